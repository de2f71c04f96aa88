"""Checkout: charge a cart through a registered provider."""

from __future__ import annotations

from shopkit.cart import Cart
from shopkit.registry import REGISTRY


def checkout(cart: Cart, provider: str = "card") -> str:
    if not cart.lines:
        raise ValueError("cannot check out an empty cart")
    return REGISTRY.get(provider)(cart.total())


def receipt(cart: Cart) -> list[str]:
    return [f"{qty} x {sku}" for sku, qty in sorted(cart.lines.items())]
