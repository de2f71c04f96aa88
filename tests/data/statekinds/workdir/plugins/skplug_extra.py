"""A plugin found only through a sys.path entry added at run time."""

VERSION = "1.2"
