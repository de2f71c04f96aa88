from __future__ import annotations

import pytest

from shopkit import prices


def test_price_of_coffee() -> None:
    assert prices.price_of("coffee") == 8.00


def test_unknown_product() -> None:
    with pytest.raises(KeyError, match="durian"):
        prices.price_of("durian")


def test_flash_sale_price() -> None:
    # Polluter: a sale price stays in the cache until somebody refreshes it.
    prices.set_sale("apple", 0.50)
    assert prices.price_of("apple") == 0.50


def test_refresh_reloads_catalog() -> None:
    # Cleaner: refreshing drops sale prices.
    prices.refresh()
    assert prices.price_of("apple") == 1.00


def test_debug_mode_shows_price_source() -> None:
    # Brittle: only passes once something has switched on debug mode.
    assert prices.describe("pear") == "pear: 1.50 [source=catalog]"
