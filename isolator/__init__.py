"""isolator: unit test virtualization for pytest.

PYTEST_DONT_REWRITE: `isolator run` imports this package before pytest starts in the same
process; nothing here has assertions to rewrite.
"""

from __future__ import annotations

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
