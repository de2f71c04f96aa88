"""shopkit: a small shop library whose tests share state by accident."""

from __future__ import annotations

__version__ = "1.0"
