from __future__ import annotations

import pytest

from shopkit.cart import Cart
from shopkit.payments import checkout
from shopkit.registry import REGISTRY


def test_unknown_provider_is_rejected() -> None:
    with pytest.raises(LookupError, match="bitcoin"):
        REGISTRY.get("bitcoin")


def test_register_card_provider() -> None:
    # State-setter: registers a provider in the process-wide registry.
    REGISTRY.register("card", lambda amount: f"charged {amount:.2f}")
    assert "card" in REGISTRY.names()


def test_charge_with_card() -> None:
    # Brittle: relies on the provider registered by the previous test.
    cart = Cart()
    cart.add("pear", 2)
    assert checkout(cart, "card").startswith("charged ")
