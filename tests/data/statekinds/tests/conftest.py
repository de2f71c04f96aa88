from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sk_app.registry import REGISTRY

SUITE_ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    # The suite writes to workdir/ on purpose; never let it change the committed copy.
    if any((p / ".git").exists() for p in SUITE_ROOT.parents):
        raise pytest.UsageError(
            f"{SUITE_ROOT} is inside a git checkout; run the statekinds suite on a copy"
        )


@pytest.fixture(scope="session")
def sk_session() -> Iterator[str]:
    """Legitimate session-wide state: set up once, restored at session end."""
    os.environ["SK_SESSION_TOKEN"] = "tok-1"
    REGISTRY.session = "sess-1"
    yield "sess-1"
    REGISTRY.session = None
    del os.environ["SK_SESSION_TOKEN"]
