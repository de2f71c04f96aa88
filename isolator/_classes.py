"""Attributes of library classes (CPython 3.12+): a test that rebinds one directly,
``SomeLibraryClass.attr = x`` with no monkeypatch to undo it, leaves it changed for every
later test; a fresh process would not.

Polling ~1,000 library classes' dicts after every test would cost more than all the other
checks together, so the interpreter tells instead: a *type watcher* (``PyType_AddWatcher``,
reached through ``ctypes.pythonapi``) is called when a watched class is modified.  It is
called once per class until the class's version tag is assigned again, which
:meth:`ClassWatch.collect` does after each look (``PyUnstable_Type_AssignVersionTag``).

CPython 3.12 calls the watcher after the change, 3.13 before it (a self-test at start
tells which): after, each class's namespace is copied up front to know the old values;
before, the watcher copies the namespace of the class being changed, when it is first
changed since the last look.  Either way what changed goes to the undo log of library
module writes (:data:`isolator._modules.LOG`) with its old value, and is put back with
the module attributes.  A class that can no longer get a version tag (CPython stops
giving tags to a class modified too often) is compared with its copy after every look.

Elsewhere (3.10, 3.11, other implementations, free-threaded builds) nothing is watched:
README, "Limits".
"""

from __future__ import annotations

import atexit
import sys
from collections.abc import Callable, Iterable
from typing import Any, Final

_HEAPTYPE: Final = 1 << 9
_IMMUTABLETYPE: Final = 1 << 8
# Set by library code on first use, from the class alone (copyreg's cache of a class's
# slot names for pickling): not a test's state.
CACHE_NAMES: Final = frozenset({"__slotnames__"})

_NOTSET: Final = object()  # in a namespace copy: no such name


def _api() -> tuple[Any, ...] | None:
    """(callback type, PyType_AddWatcher, PyType_Watch, PyType_ClearWatcher,
    PyUnstable_Type_AssignVersionTag), or None where type watchers are not to be used."""
    if sys.version_info < (3, 12) or sys.implementation.name != "cpython":
        return None
    gil = getattr(sys, "_is_gil_enabled", None)
    if gil is not None and not gil():
        return None
    try:
        from isolator import _cmem

        fn = _cmem.pythonapi_function
        add, watch = fn("PyType_AddWatcher"), fn("PyType_Watch")
        clear, assign = fn("PyType_ClearWatcher"), fn("PyUnstable_Type_AssignVersionTag")
    except (ImportError, AttributeError):
        return None
    c_int, py_object = _cmem.c_int, _cmem.py_object
    callback = _cmem.pyfunctype(c_int, py_object)
    add.argtypes, add.restype = [callback], c_int
    watch.argtypes, watch.restype = [c_int, py_object], c_int
    clear.argtypes, clear.restype = [c_int], c_int
    assign.argtypes, assign.restype = [py_object], c_int
    return callback, add, watch, clear, assign


# A class whose attributes Python code can rebind: ``__flags__ & WATCHABLE_MASK ==
# WATCHABLE_FLAGS`` (a heap type, not immutable: not a built-in or C-defined one).
WATCHABLE_MASK: Final = _HEAPTYPE | _IMMUTABLETYPE
WATCHABLE_FLAGS: Final = _HEAPTYPE


class ClassWatch:
    """Watches ``classes``; :meth:`collect` tells what changed in them.

    ``pending``: id -> (class, copy of its namespace from before its first change since
    the last look, or None where copies are kept up front in ``snaps``)."""

    def __init__(self, classes: Iterable[type], api: tuple[Any, ...]) -> None:
        callback_type, add, watch, self._clear, self._assign = api
        self.classes: dict[int, type] = {}
        self.proxies: dict[int, Any] = {}
        self.pending: dict[int, tuple[type, dict[str, Any] | None]] = {}
        self.snaps: dict[int, dict[str, Any]] = {}
        self.polled: dict[int, type] = {}
        self.muted = False
        self.before = True  # copy in the callback (until the self-test says otherwise)
        seen = self._seen

        def modified(cls: Any) -> int:
            # Called by the interpreter in the middle of the change: nothing may raise.
            try:
                if not self.muted:
                    seen(cls)
            except BaseException:  # noqa: S110
                pass
            return 0

        self._callback = callback_type(modified)  # alive as long as the watcher
        self.wid = add(self._callback)
        try:
            self._watch(classes, watch)
        except BaseException:
            self.close()  # no watcher left behind with a callback about to be freed
            raise

    def _watch(self, classes: Iterable[type], watch: Callable[[int, type], int]) -> None:
        self.before = self._called_before(watch)
        for cls in classes:
            k = id(cls)
            self.classes[k] = cls
            self.proxies[k] = cls.__dict__
        if not self.before:
            # Called after the change (3.12): the old values are known only from copies.
            self.snaps = {k: dict(p) for k, p in self.proxies.items()}
        wid, assign = self.wid, self._assign
        for k, cls in self.classes.items():
            watch(wid, cls)
            if not assign(cls):
                self._poll(k, cls)

    def _seen(self, cls: type) -> None:
        k = id(cls)
        proxy = self.proxies.get(k)
        if proxy is not None and k not in self.pending:
            self.pending[k] = (cls, dict(proxy) if self.before else None)

    def _called_before(self, watch: Callable[[int, type], int]) -> bool:
        """Whether this interpreter calls the watcher before the class changes: a
        throwaway class is watched and changed, and the callback's copy tells."""
        probe = type("_IsolatorOrderProbe", (), {"attr": "old"})
        k = id(probe)
        self.classes[k] = probe
        self.proxies[k] = probe.__dict__
        try:
            watch(self.wid, probe)
            self._assign(probe)
            probe.attr = "new"  # type: ignore[attr-defined]
            got = self.pending.get(k)
            return got is not None and got[1] is not None and got[1].get("attr") == "old"
        finally:
            self.pending.clear()
            del self.classes[k], self.proxies[k]

    def _poll(self, k: int, cls: type) -> None:
        """No version tag for ``cls`` any more: compared with a copy at every look."""
        self.polled[k] = cls
        if k not in self.snaps:
            self.snaps[k] = dict(self.proxies[k])

    def collect(self, note: Callable[[type, str, object], None], absent: object) -> None:
        """``note(class, name, old value or absent)`` for every name changed since the last
        look; the classes changed are watched again."""
        if not self.pending and not self.polled:
            return
        items = list(self.pending.values())
        self.pending.clear()
        items += [(c, None) for c in self.polled.values()]
        for cls, copy in items:
            k = id(cls)
            base = copy if copy is not None else self.snaps.get(k)
            if base is None:
                continue
            now = self.proxies[k]
            changed = [n for n in base if n not in now]
            changed += [n for n, v in now.items() if base.get(n, _NOTSET) is not v]
            for name in changed:
                if name not in CACHE_NAMES:
                    note(cls, name, base.get(name, absent))
            if k in self.snaps:
                self.snaps[k] = dict(now)
            self._rearm(k, cls)

    def absorb(self) -> None:
        """What changed since the last look is not a test's: it becomes the baseline."""
        self.collect(lambda cls, name, old: None, None)

    def restored(self, classes: Iterable[type]) -> None:
        """The undo log put these classes' names back: they are as their copies again."""
        for cls in classes:
            k = id(cls)
            self.pending.pop(k, None)
            if k in self.snaps:
                self.snaps[k] = dict(self.proxies[k])
            self._rearm(k, cls)

    def _rearm(self, k: int, cls: type) -> None:
        if k not in self.polled and not self._assign(cls):
            self._poll(k, cls)

    def close(self) -> None:
        """Stop watching (before the interpreter shuts down: a watcher called then would
        call a freed callback)."""
        if self.wid >= 0:
            self._clear(self.wid)
            self.wid = -1
        self.pending.clear()


_API: list[tuple[Any, ...] | None] = []


def available() -> bool:
    if not _API:
        _API.append(_api())
    return _API[0] is not None


def start(classes: Iterable[type]) -> ClassWatch | None:
    """Watch ``classes``; None where the interpreter cannot tell (see the module doc)."""
    if not available():
        return None
    try:
        watch = ClassWatch(classes, _API[0])  # type: ignore[arg-type]
    except Exception:
        return None
    # Closed at the latest before the interpreter shuts down.
    atexit.register(watch.close)
    return watch
