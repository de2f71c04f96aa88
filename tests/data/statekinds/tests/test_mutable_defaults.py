"""A mutable default argument."""

from __future__ import annotations

from sk_app.tags import add_tag


def test_single_tag() -> None:
    # Victim of test_promo_tag.
    assert add_tag("new") == ["new"]


def test_promo_tag() -> None:
    # Polluter.
    assert "promo" in add_tag("promo")
