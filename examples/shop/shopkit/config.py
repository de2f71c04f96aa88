"""Shop-wide settings, read by everything that formats or taxes money."""

from __future__ import annotations

import os

DEFAULTS: dict[str, object] = {"currency": "EUR", "tax_rate": 0.20, "locale": "de_DE"}

# The live settings; code mutates this dict in place, so `from config import SETTINGS`
# copies elsewhere keep seeing the current values.
SETTINGS: dict[str, object] = dict(DEFAULTS)


def reset() -> None:
    """Put every setting back to its default."""
    SETTINGS.clear()
    SETTINGS.update(DEFAULTS)


def mode() -> str:
    """The deployment mode, taken from the environment at call time."""
    return os.environ.get("SHOPKIT_MODE", "production")


def is_debug() -> bool:
    return mode() == "debug"
