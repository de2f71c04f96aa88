from __future__ import annotations

import pytest

from shopkit.cart import Cart
from shopkit.payments import checkout, receipt


def test_receipt_lists_lines_in_order() -> None:
    cart = Cart()
    cart.add("pear")
    cart.add("coffee", 2)
    assert receipt(cart) == ["2 x coffee", "1 x pear"]


def test_empty_cart_cannot_check_out() -> None:
    with pytest.raises(ValueError, match="empty cart"):
        checkout(Cart())


def test_bulk_order_raises_item_limit() -> None:
    # Polluter: a bulk customer needs bigger carts, so the test raises the class-wide limit
    # and never puts it back.
    Cart.max_items = 500
    cart = Cart()
    cart.add("coffee", 120)
    assert cart.count() == 120
