"""Price lookups, cached because the real catalog lives in a slow database."""

from __future__ import annotations

from shopkit import catalog, config

_CACHE: dict[str, float] = {}


def price_of(sku: str) -> float:
    """Unit price of ``sku``; the first lookup fills the cache."""
    if sku not in _CACHE:
        if sku not in catalog.PRODUCTS:
            raise KeyError(f"unknown product {sku!r}")
        _CACHE[sku] = catalog.PRODUCTS[sku]
    return _CACHE[sku]


def set_sale(sku: str, price: float) -> None:
    """Override a price until the next refresh (flash sales)."""
    _CACHE[sku] = price


def refresh() -> None:
    """Forget every cached price, sales included."""
    _CACHE.clear()


def describe(sku: str) -> str:
    """Human-readable price line; debug mode adds where the price came from."""
    text = f"{sku}: {price_of(sku):.2f}"
    if config.is_debug():
        source = "catalog" if catalog.PRODUCTS.get(sku) == _CACHE.get(sku) else "sale"
        text += f" [source={source}]"
    return text
