"""isolator: unit test virtualization for pytest.

PYTEST_DONT_REWRITE: `isolator run` imports this package before pytest starts in the same
process; nothing here has assertions to rewrite.
"""

from __future__ import annotations

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
