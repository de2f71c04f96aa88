"""Decimal arithmetic in the thread's current context."""

from __future__ import annotations

from decimal import Decimal


def one_seventh() -> Decimal:
    return Decimal(1) / Decimal(7)
