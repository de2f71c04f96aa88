"""A process-wide singleton with instance attributes."""

from __future__ import annotations


class Registry:
    def __init__(self) -> None:
        self.backend = "sqlite"
        self.session: str | None = None


REGISTRY = Registry()
