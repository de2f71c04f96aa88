"""The storage backend module (tests replace it in sys.modules)."""

from __future__ import annotations

NAME = "sqlite"
