from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

collect_ignore = ["data"]


@pytest.fixture(autouse=True, scope="session")
def _own_cache_dirs() -> Iterator[None]:
    """pytest keeps its cache under $TOX_ENV_DIR when that is set (under tox): every pytest
    these tests start would then share one cache (--lf, failed-first) instead of using its
    own rootdir's."""
    old = os.environ.pop("TOX_ENV_DIR", None)
    yield
    if old is not None:
        os.environ["TOX_ENV_DIR"] = old
