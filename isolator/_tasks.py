"""asyncio tasks that a test left pending on an event loop that outlives it.

A loop of a wider scope than the test (pytest-asyncio's ``loop_scope="session"``, a loop
that a fixture runs in a thread) runs whatever tasks a test left on it during the tests
after it, as a thread left running would; a test alone in a fresh process has no such
task.  Nothing can put that back, so it is reported (and the test forked next time).
Tasks on a closed loop never run again, and those of a loop nothing holds any more go
with it: neither is reported.
"""

from __future__ import annotations

import gc
import sys
import weakref
from typing import Any


def _registry() -> Any:
    """The interpreter's weak set of asyncio tasks, or None while asyncio is not imported
    (``_all_tasks`` up to 3.11, ``_scheduled_tasks`` from 3.12: eager tasks that never
    suspended are done)."""
    tasks = sys.modules.get("asyncio.tasks")
    if tasks is None:
        return None
    reg = getattr(tasks, "_all_tasks", None)
    return reg if reg is not None else getattr(tasks, "_scheduled_tasks", None)


def _pending(task: Any) -> bool:
    """Not done, on a loop that can still run it."""
    try:
        return not task.done() and not task.get_loop().is_closed()
    except Exception:
        return False


def _describe(task: Any) -> tuple[str, str]:
    try:
        name = task.get_name()
        coro = task.get_coro()
        what = getattr(coro, "__qualname__", None) or type(coro).__name__
    except Exception:
        name, what = f"{type(task).__name__}@{id(task):#x}", "?"
    return f"<asyncio task>:{name}", f"task still pending after the test (running {what})"


class TaskWatch:
    """The tasks pending at the baseline (``known``: set up by the session or a fixture);
    :meth:`left` finds and reports the others once."""

    def __init__(self) -> None:
        self.known: weakref.WeakSet[Any] = weakref.WeakSet()
        self.note()

    def note(self) -> None:
        """Every task pending now is the baseline's (a fixture's server task)."""
        reg = _registry()
        if reg:
            self.known.update([t for t in list(reg) if _pending(t)])

    def left(self) -> list[tuple[str, str]]:
        """(site, why) for each task the test left pending; [] at once without asyncio
        or without a task."""
        reg = _registry()
        if not reg:
            return []
        known = self.known
        ids = {id(t) for t in list(reg) if t not in known and _pending(t)}
        if not ids:
            return []
        # A loop that the test made and dropped (with the tasks it holds) is freed by a
        # collection: those tasks can run in no later test.
        gc.collect()
        out = []
        for t in list(reg):
            if id(t) in ids and t not in known and _pending(t):
                known.add(t)  # (reported once)
                out.append(_describe(t))
        return out
