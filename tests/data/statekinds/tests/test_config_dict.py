"""One module dict, several keys: only tests sharing a key depend on each other."""

from __future__ import annotations

from sk_app import config


def test_reset_settings() -> None:
    # Cleaner for every SETTINGS polluter (currency, region, and the db fixture's leak).
    config.reset_settings()
    assert config.SETTINGS == config.DEFAULTS


def test_price_label_in_euros() -> None:
    # Victim of test_switch_currency (key 'currency').
    assert config.price_label(3) == "3.00 EUR"


def test_region_is_eu() -> None:
    # Victim of test_move_to_us_region (key 'region').
    assert config.region() == "eu"


def test_db_unset_by_default() -> None:
    # Victim of the module fixture in test_fixture_scopes.py, which leaks SETTINGS['db'].
    assert config.db_url() is None


def test_switch_currency() -> None:
    # Polluter (key 'currency').
    config.SETTINGS["currency"] = "USD"
    assert config.price_label(1) == "1.00 USD"


def test_move_to_us_region() -> None:
    # Polluter (key 'region').
    config.SETTINGS["region"] = "us"
    assert config.region() == "us"
