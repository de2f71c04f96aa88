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


def patcher_class() -> Any:
    """pyfakefs's ``Patcher`` class if pyfakefs is loaded, else None."""
    mod = sys.modules.get(_UNITTEST)
    return getattr(mod, "Patcher", None) if mod is not None else None


def spare_isolator() -> Any:
    """Put isolator's loaded modules in pyfakefs's skip list; returns ``Patcher`` (None
    when pyfakefs is not loaded: then nothing pauses a fake filesystem between tests,
    which only its pytest plugin, loaded before any test, does)."""
    cls = patcher_class()
    skip = getattr(cls, "SKIPMODULES", None)
    if not isinstance(skip, set):
        return None
    for name, mod in list(sys.modules.items()):
        if mod is not None and (name == "isolator" or name.startswith("isolator.")):
            try:
                skip.add(mod)
            except TypeError:
                pass
    return cls


def paused_patcher(cls: Any) -> Any:
    """The pyfakefs patcher (``cls.PATCHER``) of a higher-scoped fake filesystem that is
    paused between tests, or None."""
    patcher = getattr(cls, "PATCHER", None)
    if patcher is None or not getattr(patcher, "_paused", False):
        return None
    if not callable(getattr(patcher, "resume", None)) or not callable(
        getattr(patcher, "pause", None)
    ):
        return None
    return patcher
