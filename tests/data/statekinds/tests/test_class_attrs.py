"""A class attribute changed on the class."""

from __future__ import annotations

from sk_app.models import Account


def test_charge_adds_fee() -> None:
    # Victim of test_fee_waiver_campaign.
    assert Account().charge(10) == 11.5


def test_fee_waiver_campaign() -> None:
    # Polluter.
    Account.fee = 0.0
    assert Account().charge(10) == 10.0
