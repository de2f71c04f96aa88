"""Tests that share nothing with anyone (or read state nobody writes)."""

from __future__ import annotations

from sk_app import config


def test_pure_arithmetic() -> None:
    assert sum(range(5)) == 10


def test_tax_uses_default_rate() -> None:
    # Reads SETTINGS['tax_rate'], which no test writes: independent of the other keys.
    assert config.with_tax(100) == 125.0


def test_local_dict_only() -> None:
    settings = {"currency": "JPY"}
    settings["currency"] = "CHF"
    assert settings == {"currency": "CHF"}
