from __future__ import annotations

import os

from shopkit import config


def test_defaults() -> None:
    assert config.SETTINGS["tax_rate"] == 0.20
    assert config.mode() in ("production", "debug")


def test_enable_debug_mode() -> None:
    # State-setter: switches the process into debug mode for everything that follows.
    os.environ["SHOPKIT_MODE"] = "debug"
    assert config.is_debug()


def test_switch_currency_to_usd() -> None:
    # Polluter: changes one setting in place and forgets to restore it.
    config.SETTINGS["currency"] = "USD"
    assert config.SETTINGS["currency"] == "USD"


def test_reset_restores_defaults() -> None:
    # Cleaner: puts every setting back.
    config.reset()
    assert config.SETTINGS == config.DEFAULTS
