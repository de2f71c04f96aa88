"""Environment variables."""

from __future__ import annotations

import os

from sk_app import mode


def test_timeout_default() -> None:
    # Victim of test_short_timeout.
    assert mode.timeout() == 30


def test_short_timeout() -> None:
    # Polluter.
    os.environ["SK_TIMEOUT"] = "5"
    assert mode.timeout() == 5


def test_enable_debug() -> None:
    # State-setter for test_debug_mode_enabled.
    os.environ["SK_MODE"] = "debug"
    assert mode.current_mode() == "debug"


def test_debug_mode_enabled() -> None:
    # Brittle: fails alone.
    assert mode.current_mode() == "debug"
