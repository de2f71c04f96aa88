"""A shopping cart."""

from __future__ import annotations

from shopkit import config, prices


class Cart:
    """Lines of (sku, quantity); prices come from the price cache at total time."""

    # Shared by every cart: a business rule, changed for bulk customers.
    max_items = 50

    def __init__(self) -> None:
        self.lines: dict[str, int] = {}

    def add(self, sku: str, qty: int = 1) -> None:
        if qty <= 0:
            raise ValueError("quantity must be positive")
        if self.count() + qty > self.max_items:
            raise ValueError(f"a cart holds at most {self.max_items} items")
        prices.price_of(sku)  # reject unknown products early
        self.lines[sku] = self.lines.get(sku, 0) + qty

    def remove(self, sku: str) -> None:
        del self.lines[sku]

    def count(self) -> int:
        return sum(self.lines.values())

    def subtotal(self) -> float:
        return round(sum(prices.price_of(sku) * qty for sku, qty in self.lines.items()), 2)

    def total(self) -> float:
        rate = float(config.SETTINGS["tax_rate"])  # type: ignore[arg-type]
        return round(self.subtotal() * (1 + rate), 2)

    def format_total(self) -> str:
        return f"{self.total():.2f} {config.SETTINGS['currency']}"
