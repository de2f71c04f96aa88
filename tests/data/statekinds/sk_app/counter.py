"""A running total kept in a rebound module global."""

from __future__ import annotations

_TOTAL = 0


def add(n: int) -> int:
    global _TOTAL
    _TOTAL += n
    return _TOTAL


def total() -> int:
    return _TOTAL
