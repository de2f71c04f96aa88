"""The product catalog (unit prices in the shop currency)."""

from __future__ import annotations

PRODUCTS: dict[str, float] = {"apple": 1.00, "pear": 1.50, "coffee": 8.00}
