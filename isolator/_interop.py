"""Living beside pyfakefs, the fake filesystem that replaces ``os``, ``shutil``, ``io`` and
``pathlib`` in every loaded module while a test runs.

isolator's own modules must keep the real ones: its file guard saves and puts back files
on the disk, and its probes read the real process.  pyfakefs leaves alone the modules in
its ``Patcher.SKIPMODULES`` (its pytest plugin puts pytest's there), so isolator's go there
too, whenever pyfakefs has been imported (never imported here).

pyfakefs also *pauses* a module-, class- or session-scoped fake filesystem after each test
(pytest's reporting must see the real disk) and resumes it at the next test's setup.  The
fixture's patches are part of that scope's baseline, so the check after a test runs with
the fake filesystem resumed, as the test left it, and pauses it again afterwards.
"""

from __future__ import annotations

import sys
from typing import Any

_UNITTEST = "pyfakefs.fake_filesystem_unittest"


def _patcher_class() -> Any:
    mod = sys.modules.get(_UNITTEST)
    return getattr(mod, "Patcher", None) if mod is not None else None


def spare_isolator() -> None:
    """Put isolator's loaded modules in pyfakefs's skip list (if pyfakefs is loaded)."""
    skip = getattr(_patcher_class(), "SKIPMODULES", None)
    if not isinstance(skip, set):
        return
    for name, mod in list(sys.modules.items()):
        if mod is not None and (name == "isolator" or name.startswith("isolator.")):
            try:
                skip.add(mod)
            except TypeError:
                pass


def paused_patcher() -> Any:
    """The pyfakefs patcher of a higher-scoped fake filesystem that is paused between
    tests, or None."""
    cls = _patcher_class()
    patcher = getattr(cls, "PATCHER", None) if cls is not None else None
    if patcher is None or not getattr(patcher, "_paused", False):
        return None
    if not callable(getattr(patcher, "resume", None)) or not callable(
        getattr(patcher, "pause", None)
    ):
        return None
    return patcher
