"""Attributes of a module-level singleton instance."""

from __future__ import annotations

from sk_app.registry import REGISTRY


def test_default_backend() -> None:
    # Victim of test_connect_postgres.
    assert REGISTRY.backend == "sqlite"


def test_connect_postgres() -> None:
    # Polluter of test_default_backend and state-setter of test_backend_is_postgres.
    REGISTRY.backend = "postgres"


def test_backend_is_postgres() -> None:
    # Brittle: fails alone.
    assert REGISTRY.backend == "postgres"


def test_session_registered(sk_session: str) -> None:
    # Relies on the session fixture, which must not be wiped after its first user.
    assert REGISTRY.session == sk_session == "sess-1"
