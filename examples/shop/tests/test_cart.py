from __future__ import annotations

import pytest

from shopkit.cart import Cart


def test_empty_cart_total_is_zero() -> None:
    assert Cart().total() == 0


def test_subtotal_uses_catalog_prices() -> None:
    # Victim: trusts the price cache to hold catalog prices.
    cart = Cart()
    cart.add("apple", 2)
    cart.add("pear")
    assert cart.subtotal() == 3.50


def test_total_is_formatted_in_euros() -> None:
    # Victim: assumes the default currency.
    cart = Cart()
    cart.add("coffee")
    assert cart.format_total() == "9.60 EUR"


def test_cart_rejects_too_many_items() -> None:
    # Victim: assumes the default item limit.
    cart = Cart()
    with pytest.raises(ValueError, match="at most 50"):
        cart.add("pear", 60)


def test_remove_line() -> None:
    cart = Cart()
    cart.add("pear", 3)
    cart.remove("pear")
    assert cart.count() == 0
