"""A class attribute shared by every instance."""

from __future__ import annotations


class Account:
    fee = 1.5

    def charge(self, amount: float) -> float:
        return amount + self.fee
