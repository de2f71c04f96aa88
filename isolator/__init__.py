"""isolator: unit test virtualization for pytest.

PYTEST_DONT_REWRITE: `isolator run` imports this package before pytest starts in the same
process; nothing here has assertions to rewrite.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from isolator._types import (
        AccessLog,
        Cleaners,
        Dependency,
        DependencyGraph,
        ResetPlan,
        StateSite,
    )

__version__ = "0.1.0"

__all__ = [
    "AccessLog",
    "Cleaners",
    "Dependency",
    "DependencyGraph",
    "ResetPlan",
    "StateSite",
    "__version__",
]


def __getattr__(name: str) -> Any:
    # The data types are imported on first use: pytest imports this package in every run
    # of a project that has isolator installed, most of them not using it.
    if name in __all__ and name != "__version__":
        from isolator import _types

        return getattr(_types, name)
    raise AttributeError(f"module 'isolator' has no attribute {name!r}")


def _no_assertion_rewriting() -> None:
    """Have isolator's modules imported as Python imports them, not through pytest's
    assertion rewriter.  pytest marks every package of a distribution with a pytest11 entry
    point for rewriting (this one, when installed from a wheel); a module imported through
    the rewriter costs about 1 ms more (its pyc is checked against a hash of the source and
    read piecewise), and is parsed and rewritten again in every run where its
    ``__pycache__`` cannot be written (a read-only site-packages).  isolator has no test
    assertions to rewrite.  The mark is pytest's private state: where it is not found,
    nothing changes but the cost."""
    for finder in sys.meta_path:
        marked = getattr(finder, "_must_rewrite", None)
        if isinstance(marked, set) and __name__ in marked:
            marked.discard(__name__)
            cache = getattr(finder, "_marked_for_rewrite_cache", None)
            if isinstance(cache, dict):
                for name in [n for n in cache if n.partition(".")[0] == __name__]:
                    del cache[name]


_no_assertion_rewriting()
