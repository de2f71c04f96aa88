"""An lru_cache that keeps a stale value."""

from __future__ import annotations

from sk_app import rates


def test_usd_rate() -> None:
    # Victim of test_rate_override_during_refresh (through the cache only).
    assert rates.get_rate("USD") == 1.10


def test_rate_override_during_refresh() -> None:
    # Polluter: the source is restored, the cache keeps the override.
    rates._SOURCE["USD"] = 2.0
    try:
        rates.refresh()
        assert rates.get_rate("USD") == 2.0
    finally:
        rates._SOURCE["USD"] = 1.10


def test_refresh_rates() -> None:
    # Cleaner: refreshing drops whatever the cache held.
    rates.refresh()
    assert rates.get_rate("GBP") == 0.85
