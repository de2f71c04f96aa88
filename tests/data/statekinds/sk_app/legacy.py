"""An old API that still works but warns."""

from __future__ import annotations

import warnings


def old_total() -> int:
    warnings.warn("old_total() is deprecated", DeprecationWarning, stacklevel=2)
    return 42
