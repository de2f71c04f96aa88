"""The decimal module's current context."""

from __future__ import annotations

import decimal

from sk_app.money import one_seventh


def test_one_seventh_precision() -> None:
    # Victim of test_low_precision_invoice.
    assert str(one_seventh()) == "0.1428571428571428571428571429"


def test_low_precision_invoice() -> None:
    # Polluter.
    decimal.getcontext().prec = 4
    assert str(one_seventh()) == "0.1429"
