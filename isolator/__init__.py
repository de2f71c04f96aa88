"""isolator: unit test virtualization for pytest."""

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
