"""State set by higher-scoped fixtures is part of the baseline while they are in scope."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from sk_app import config, mode


@pytest.fixture(scope="module")
def db_config() -> Iterator[str]:
    # Sets shared state for the module's tests and leaks it (no restore at teardown).
    config.SETTINGS["db"] = "sqlite:///:memory:"
    yield "sqlite:///:memory:"


@pytest.fixture(scope="class")
def tenant() -> Iterator[str]:
    # Well-behaved class-scoped state: restored at the class's end.
    os.environ["SK_TENANT"] = "acme"
    yield "acme"
    del os.environ["SK_TENANT"]


def test_query_uses_db(db_config: str) -> None:
    assert config.db_url() == db_config


def test_report_uses_db(db_config: str) -> None:
    assert config.db_url() == "sqlite:///:memory:"


def test_session_token_visible(sk_session: str) -> None:
    assert mode.session_token() == "tok-1"


@pytest.mark.usefixtures("tenant")
class TestTenant:
    def test_tenant_set(self) -> None:
        assert mode.tenant() == "acme"

    def test_tenant_still_set(self) -> None:
        assert mode.tenant() == "acme"
