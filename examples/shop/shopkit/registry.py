"""Payment providers, registered at start-up into one process-wide registry."""

from __future__ import annotations

from typing import Callable

Provider = Callable[[float], str]


class Registry:
    """Named payment providers."""

    def __init__(self) -> None:
        self._providers: dict[str, Provider] = {}

    def register(self, name: str, provider: Provider) -> None:
        self._providers[name] = provider

    def get(self, name: str) -> Provider:
        try:
            return self._providers[name]
        except KeyError:
            raise LookupError(f"no payment provider {name!r} registered") from None

    def names(self) -> list[str]:
        return sorted(self._providers)


# The singleton the application uses.
REGISTRY = Registry()
