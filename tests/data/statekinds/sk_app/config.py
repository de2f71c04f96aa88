"""Settings dict: tests touching different keys must stay independent."""

from __future__ import annotations

DEFAULTS: dict[str, object] = {"currency": "EUR", "region": "eu", "db": None, "tax_rate": 0.25}
SETTINGS: dict[str, object] = dict(DEFAULTS)


def reset_settings() -> None:
    SETTINGS.clear()
    SETTINGS.update(DEFAULTS)


def price_label(amount: float) -> str:
    return f"{amount:.2f} {SETTINGS['currency']}"


def region() -> object:
    return SETTINGS["region"]


def db_url() -> object:
    return SETTINGS["db"]


def with_tax(amount: float) -> float:
    return round(amount * (1 + float(SETTINGS["tax_rate"])), 2)  # type: ignore[arg-type]
