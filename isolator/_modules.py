"""Library modules and the import system.

*Monkeypatched library attributes*: every stdlib/third-party module's namespace is watched
through its dict's version tag (see ``_versions``): a module whose tag moved is compared
with its snapshot, and each name written gets its old value in an undo log in the shape of
pytest's monkeypatch.  The modules stay plain modules (``type(m) is ModuleType``, which
picklers such as dill and cloudpickle dispatch on).  Where tags cannot be read, each
module's ``__class__`` is swapped for a ModuleType subclass whose ``__setattr__`` and
``__delattr__`` note the old value on the first write of a test instead.

*sys.modules*: modules imported during a test are removed afterwards (a fresh process
would not have them), except families with C extensions, which cannot be imported twice.
Replaced and deleted entries come back.
"""

from __future__ import annotations

import builtins
import collections
import dis
import gc
import importlib
import importlib.machinery
import itertools
import operator
import os
import sys
import threading
import types
import warnings
import weakref
from collections.abc import Callable
from typing import Any, Final

from isolator import _aliases, _classes, _versions
from isolator._state import moved_entries

NOTSET: Final = object()
_NOTSETS: Final = itertools.repeat(NOTSET)
_CURRENT: Final = object()  # UndoLog.note: the old value is the one in the module now
_EXT_SUFFIXES: Final = tuple(importlib.machinery.EXTENSION_SUFFIXES)
# Never unloaded: the test runner's own machinery and modules that hold process-wide
# registries whose re-import breaks things (codecs).
_KEEP_PREFIXES: Final = (
    "_pytest",
    "pytest",
    "pluggy",
    "isolator",
    "xdist",
    "execnet",
    "coverage",
    "encodings",
    "_hypothesis",
    "hypothesis",
)
# Never unloaded either, by exact name: the old ``py`` library (a prefix would keep pytz,
# pygments and every other ``py...`` package).
_KEEP_NAMES: Final = frozenset({"py"})

RUNNER_PREFIXES: Final = ("_pytest", "pytest", "pluggy", "isolator", "xdist", "execnet")


class UndoLog:
    """First old value of every library module attribute written during the current test,
    of every library class attribute where classes are watched (see ``_classes``), and of
    every attribute bound on a typing alias (see ``_aliases``).

    ``entries``: [(owner: a module, class or alias, name, old value or NOTSET)] in write
    order.
    """

    def __init__(self) -> None:
        self.entries: list[tuple[Any, str, object]] = []
        self.seen: set[tuple[int, str]] = set()
        self.active = False

    def note(self, mod: Any, name: str, old: object = _CURRENT) -> None:
        key = (id(mod), name)
        if key in self.seen:
            return
        self.seen.add(key)
        if old is _CURRENT:
            old = mod.__dict__.get(name, NOTSET)
        self.entries.append((mod, name, old))

    def dirty_sites(self) -> list[str]:
        out = []
        for mod, name, old in self.entries:
            if bound(mod, name) is not old:
                out.append(site_of(mod, name))
        return out

    def undo(self, keep: set[str]) -> list[tuple[str, str]]:
        """Put every old value back; returns (site, why) for what could not be."""
        written = {id(mod): mod for mod, _, _ in self.entries}
        refused: list[tuple[str, str]] = []
        classes: dict[int, type] = {}
        watch = CLASSES
        if watch is not None:
            watch.muted = True  # our own writes are not a test's
        try:
            for mod, name, old in reversed(self.entries):
                if isinstance(mod, type):
                    classes[id(mod)] = mod
                    why = _put_class_attr(mod, name, old)
                    if why is not None:
                        refused.append((site_of(mod, name), why))
                    continue
                d = mod.__dict__
                if old is NOTSET:
                    new = d.get(name, NOTSET)
                    if isinstance(new, types.ModuleType) and new.__name__ in keep:
                        continue  # an import bound a submodule we keep
                    d.pop(name, None)
                else:
                    d[name] = old
        finally:
            if watch is not None:
                watch.muted = False
                watch.restored(classes.values())
        self.clear()
        if WATCH is not None:
            WATCH.resync(written.values())
        return refused

    def replace_old(self, mod: Any, name: str, was: object, now: object) -> None:
        """The old value noted for ``mod.name`` is ``now`` where it was ``was`` (a value
        isolator itself had put there for a while, not the test's baseline)."""
        self.entries = [
            (m, n, now) if m is mod and n == name and old is was else (m, n, old)
            for m, n, old in self.entries
        ]

    def leave(self, pairs: list[tuple[object, str]]) -> None:
        """These (object, attribute) stay as they are now, out of the log: what changed them
        cannot be undone (a patch started before the test and stopped by it)."""
        keys = {(id(obj), name) for obj, name in pairs}
        entries = [e for e in self.entries if (id(e[0]), e[1]) not in keys]
        if len(entries) == len(self.entries):
            return
        self.entries = entries
        self.seen -= keys
        owners = {id(obj): obj for obj, _ in pairs}.values()
        if WATCH is not None:
            WATCH.resync([o for o in owners if isinstance(o, types.ModuleType)])
        if CLASSES is not None:
            CLASSES.restored([o for o in owners if isinstance(o, type)])

    def clear(self) -> None:
        self.entries.clear()
        self.seen.clear()


def note_bases(cls: type) -> None:
    """A test is assigning ``cls.__bases__`` (told by the audit event, before the
    assignment): the bases it has now are what the check puts back.  Not a class of a
    module being imported now (a generic NamedTuple is given its bases so as it is made):
    that is the module's own set-up."""
    owner = getattr(cls, "__module__", None)
    if not isinstance(owner, str) or owner.startswith(RUNNER_PREFIXES):
        return
    spec = getattr(sys.modules.get(owner), "__spec__", None)
    if getattr(spec, "_initializing", False):
        return
    LOG.note(cls, "__bases__", cls.__bases__)


def bound(owner: Any, name: str) -> object:
    """What ``owner.name`` is bound to now, as the undo log compares it."""
    if name == "__bases__" and isinstance(owner, type):
        return owner.__bases__
    return owner.__dict__.get(name, NOTSET)


def site_of(owner: Any, name: str) -> str:
    """``module:name`` of a module attribute, ``module:Class.name`` of a class's,
    ``module:Class[args].name`` of a typing alias's (see ``_aliases``)."""
    if isinstance(owner, type):
        return f"{owner.__module__}:{owner.__qualname__}.{name}"
    if _aliases.is_alias(owner):
        return _aliases.site_of(owner, name)
    return f"{owner.__name__}:{name}"


def _put_class_attr(cls: type, name: str, old: object) -> str | None:
    """Bind (or remove) a class attribute as ``type`` itself does, past a metaclass's own
    ``__setattr__``; the reason when the class refuses."""
    try:
        if name == "__bases__":
            if cls.__bases__ is not old:
                type.__setattr__(cls, name, old)
        elif old is NOTSET:
            if name in cls.__dict__:
                type.__delattr__(cls, name)
        elif cls.__dict__.get(name, NOTSET) is not old:
            type.__setattr__(cls, name, old)
    except Exception as exc:
        return f"putting it back raised {type(exc).__name__}: {exc}"
    return None


LOG = UndoLog()
_setattr = types.ModuleType.__setattr__
_delattr = types.ModuleType.__delattr__


class WatchedModule(types.ModuleType):
    """A library module whose attribute writes are logged while a test runs."""

    def __setattr__(self, name: str, value: Any) -> None:
        if LOG.active:
            LOG.note(self, name)
        _setattr(self, name, value)

    def __delattr__(self, name: str) -> None:
        if LOG.active:
            LOG.note(self, name)
        _delattr(self, name)


class LibraryWatch:
    """Library modules' namespaces as of the last look: a module whose dict's version tag
    moved since is compared with its snapshot (by identity), and what changed goes to the
    undo log with the snapshot's value as the old one (:meth:`collect`).

    ``image`` is every tag as of the last look, laid end to end: ``bytes.join`` over the
    tags' memoryviews reads them all in one C loop (a third of the cost of reading each
    tag as an int), so the common case, nothing written, is one join and one compare."""

    def __init__(self, modules: list[types.ModuleType], cells: list[Any]):
        self.mods = modules
        self.dicts = [m.__dict__ for m in modules]
        self.cells = cells
        self.index = {id(m): i for i, m in enumerate(modules)}
        self.views = [memoryview(c).cast("B") for c in cells]
        self.image = b"".join(self.views)
        self.snaps = [dict(d) for d in self.dicts]

    def _moved(self, now: bytes) -> list[int]:
        """Indexes of the modules whose tag differs between ``now`` and ``image``."""
        return moved_entries(now, self.image)

    def collect(self, log: UndoLog) -> None:
        """Note every name written since the last look (one tag read per module)."""
        now = b"".join(self.views)
        if now == self.image:
            return
        for i in self._moved(now):
            d, snap, mod = self.dicts[i], self.snaps[i], self.mods[i]
            for name in _changed_names(d, snap):
                log.note(mod, name, snap.get(name, NOTSET))
            self.snaps[i] = dict(d)
        self.image = now

    def absorb(self) -> None:
        """Whatever changed since the last look becomes the snapshot, unlogged."""
        now = b"".join(self.views)
        if now != self.image:
            self.resync([self.mods[i] for i in self._moved(now)])

    def add(self, mod: types.ModuleType) -> bool:
        """Watch one more module from now on (one kept after the test that imported it);
        False: its tag cannot be read."""
        if id(mod) in self.index:
            return True
        cell = _versions.cell_for(mod.__dict__)
        if cell is None:
            return False
        view = memoryview(cell).cast("B")
        self.index[id(mod)] = len(self.mods)
        self.mods.append(mod)
        self.dicts.append(mod.__dict__)
        self.cells.append(cell)
        self.views.append(view)
        self.snaps.append(dict(mod.__dict__))
        self.image += bytes(view)
        return True

    def resync(self, modules: Any) -> None:
        """The undo log put these modules' names back: their namespaces are the snapshot."""
        index = self.index
        image = None
        for mod in modules:
            i = index.get(id(mod))
            if i is not None:
                self.snaps[i] = dict(self.dicts[i])
                if image is None:
                    image = bytearray(self.image)
                image[8 * i : 8 * i + 8] = self.views[i]  # that module's tag only
        if image is not None:
            self.image = bytes(image)


def _changed_names(d: dict[str, Any], snap: dict[str, Any]) -> list[str]:
    """The names bound, rebound or deleted in ``d`` since ``snap`` (a copy of it), found
    in C: a module's whole namespace is compared, not only the names written."""
    gone = snap.keys() - d.keys()
    changed = [k for k in snap if k in gone] if gone else []
    changed += itertools.compress(d, map(operator.is_not, map(snap.get, d, _NOTSETS), d.values()))
    return changed


WATCH: LibraryWatch | None = None
CLASSES: _classes.ClassWatch | None = None


def collect_writes() -> None:
    """Bring the undo log up to date with library module writes (tag-watched modules)
    and library class writes (watched classes)."""
    if WATCH is not None:
        WATCH.collect(LOG)
    classes = CLASSES
    if classes is not None and (classes.pending or classes.polled):
        classes.collect(LOG.note, NOTSET)


def absorb_writes() -> None:
    """Library module and class writes made since the last look are not a test's."""
    if WATCH is not None:
        WATCH.absorb()
    if CLASSES is not None:
        CLASSES.absorb()


def watch_library_modules(is_project: Any) -> list[types.ModuleType]:
    """Watch plain library modules' namespaces; returns the modules watched (by version
    tag, or where tags cannot be read, by swapping their class)."""
    global WATCH
    # Once per module object: a module bound under two names (collections.abc is
    # _collections_abc) has one dict, and a second entry's snapshot would go stale when
    # the undo log resyncs the first, then "undo" the undo after the next test.
    mods = [
        mod
        for mod in {id(m): m for m in list(sys.modules.values())}.values()
        # sys is left alone: pytest rebinds its attributes around every test phase, and
        # the process probes cover what matters in it.  warnings too: pytest runs each
        # test in catch_warnings(), which rebinds its functions and filters on the way in
        # and puts them back on the way out (the warnings probe covers the filters and the
        # once-registry).  So are the test runner's own
        # modules: pytest writes its modules' globals all through each test's protocol
        # (and with a swapped class, every attribute read of a module costs more: the
        # interpreter's fast path is for plain modules only).
        if type(mod) is types.ModuleType
        and mod is not sys
        and mod is not warnings
        and not mod.__name__.startswith(RUNNER_PREFIXES)
        and not is_project(mod)
    ]
    _watch_library_classes(mods, is_project)
    cells = [_versions.cell_for(m.__dict__) for m in mods]
    if mods and all(c is not None for c in cells):
        WATCH = LibraryWatch(mods, cells)
        return mods
    return _swap_classes(mods)


def watch_module(mod: types.ModuleType, swapped: list[types.ModuleType]) -> None:
    """Watch a library module kept in sys.modules after the test that imported it, as the
    modules there at the start are (``swapped``: the list of class-swapped modules)."""
    if WATCH is not None and WATCH.add(mod):
        return
    if type(mod) is types.ModuleType and mod not in swapped:
        swapped += _swap_classes([mod])


def _watch_library_classes(mods: list[types.ModuleType], is_project: Any) -> None:
    """Watch the classes bound in library modules, where the interpreter can tell when
    one is changed (see ``_classes``): not the test runner's, nor project classes
    re-exported by a library."""
    global CLASSES
    if CLASSES is not None or not _classes.available():
        return
    found: dict[int, type] = {}
    library: dict[object, bool] = {}  # a class's __module__ -> whether a library's
    modules = sys.modules
    flags, mask, heap = _FLAGS, _classes.WATCHABLE_MASK, _classes.WATCHABLE_FLAGS
    types_only = itertools.repeat(type)
    for mod in mods:
        values = list(mod.__dict__.values())
        # The classes among them, by their real types (isinstance() would ask a lazy
        # object's own __class__, which may raise, as django's unconfigured settings do;
        # a proxy of a class is not one), in C: a Python call per value of every library
        # module was a millisecond of each run's start.
        for value in itertools.compress(values, map(issubclass, map(type, values), types_only)):
            if flags(value) & mask != heap or id(value) in found:
                continue
            owner = getattr(value, "__module__", None)
            ok = library.get(owner)
            if ok is None:
                home = modules.get(owner) if isinstance(owner, str) else None
                ok = library[owner] = not (
                    isinstance(owner, str) and owner.startswith(RUNNER_PREFIXES)
                ) and not (home is not None and is_project(home))
            if ok:
                found[id(value)] = value
    CLASSES = _classes.start(found.values())


_FLAGS: Final = operator.attrgetter("__flags__")


def _swap_classes(modules: list[types.ModuleType]) -> list[types.ModuleType]:
    swapped = []
    for mod in modules:
        try:
            mod.__class__ = WatchedModule
        except TypeError:
            continue
        swapped.append(mod)
    return swapped


def unwatch(modules: list[types.ModuleType]) -> None:
    global WATCH, CLASSES
    WATCH = None
    if CLASSES is not None:
        CLASSES.close()
        CLASSES = None
    for mod in modules:
        if type(mod) is WatchedModule:
            mod.__class__ = types.ModuleType  # type: ignore[assignment]


def is_extension(mod: object) -> bool:
    spec = getattr(mod, "__spec__", None)
    origin = getattr(spec, "origin", None) or getattr(mod, "__file__", None) or ""
    return isinstance(origin, str) and origin.endswith(_EXT_SUFFIXES)


# A module's first import while isolator runs: (its namespace when its execution ended, the
# names its execution added to sys.modules in order, whether that execution had no effect
# outside the module that a reset would undo, and for a project module what puts its
# tracked state back as it was then, else None; and the (mtime, size) of the file it was
# executed from: a file rewritten since is executed again, as a new process would); a view
# of the module dict's version tag and the tag when its namespace was last made the first
# import's (see _Reinstate.exec_module); what the execution read (_Inputs).
_Fresh = tuple[
    dict[str, Any],
    list[str],
    bool,
    Callable[[], object] | None,
    tuple[int, int] | None,
    list[Any],
    "_Inputs",
]


_FIRST_IMPORT: Final = "_isolator_first_import"
_EARLIER_IMPORT: Final = "_isolator_earlier_import"  # (see _FirstImports.forget)


class _FirstImports:
    """Each module's first import (``_Fresh``), held by the module's own spec and loader
    (attributes of those objects), so that it lives exactly as long as the module: the
    namespace copy may lead back to the module (a template's functions -> their globals ->
    the environment -> the loader -> the module), and a module that a test unloads and
    drops itself must still be collectable, as without isolator.  The loader holds it too
    when it serves only that module: an import under another name (six.moves) rebinds the
    module's ``__spec__``, not its ``__loader__``."""

    def __init__(self) -> None:
        self._holders: weakref.WeakSet[Any] = weakref.WeakSet()

    def put(self, module: types.ModuleType, spec: Any, loader: Any, fresh: _Fresh) -> None:
        entry = (weakref.ref(module), fresh)
        holders = [spec]
        if getattr(loader, "name", None) == getattr(spec, "name", ""):
            holders.append(loader)
        for holder in holders:
            try:
                setattr(holder, _FIRST_IMPORT, entry)
                self._holders.add(holder)
            except (AttributeError, TypeError):
                pass  # no __dict__ or no weak references: the module is executed again

    def get(self, module: types.ModuleType) -> _Fresh | None:
        d = module.__dict__
        try:  # the common case, asked several times for each module of a family
            entry = d["__spec__"].__dict__[_FIRST_IMPORT]
            if entry[0]() is module:
                return entry[1]  # type: ignore[no-any-return]
        except (KeyError, AttributeError, TypeError):
            pass
        # Imported under another name since (six.moves): its loader holds it.
        entry = getattr(d.get("__loader__"), "__dict__", {}).get(_FIRST_IMPORT)
        if entry is not None and entry[0]() is module:
            return entry[1]  # type: ignore[no-any-return]
        return None

    def forget(self, module: types.ModuleType, keep_earlier: bool = False) -> None:
        """The module's first import no longer describes what importing it gives (it is
        executed on its next import); ``keep_earlier``: kept as its earlier import (see
        :meth:`earlier`)."""
        d = module.__dict__
        for holder in (d.get("__spec__"), d.get("__loader__")):
            hd = getattr(holder, "__dict__", {})
            entry = hd.get(_FIRST_IMPORT)
            if entry is not None and entry[0]() is module:
                del hd[_FIRST_IMPORT]
                if keep_earlier:
                    hd[_EARLIER_IMPORT] = entry

    def earlier(self, module: types.ModuleType) -> _Fresh | None:
        """The first import of ``module``, also when forgotten with ``keep_earlier``."""
        fresh = self.get(module)
        if fresh is not None:
            return fresh
        d = module.__dict__
        for holder in (d.get("__spec__"), d.get("__loader__")):
            entry = getattr(holder, "__dict__", {}).get(_EARLIER_IMPORT)
            if entry is not None and entry[0]() is module:
                return entry[1]  # type: ignore[no-any-return]
        return None

    def clear(self) -> None:
        for holder in list(self._holders):
            hd = getattr(holder, "__dict__", {})
            hd.pop(_FIRST_IMPORT, None)
            hd.pop(_EARLIER_IMPORT, None)
        self._holders = weakref.WeakSet()


class _Reinstate:
    """Loader that hands back a module object unloaded after an earlier test, as a new
    import would leave it, when its first import was seen (``fresh``): with the namespace
    that import left, and the modules it imported imported again (so that they, and their
    bindings in their packages, are there as after executing the module)."""

    def __init__(self, module: types.ModuleType, fresh: _Fresh | None):
        self.module = module
        self.fresh = fresh
        self.spec = getattr(module, "__spec__", None)

    def create_module(self, spec: Any) -> types.ModuleType:
        return self.module

    def exec_module(self, module: types.ModuleType) -> None:
        __tracebackhide__ = True  # (as importlib's frames: not the user's)
        fresh = self.fresh
        if fresh is not None:
            d = module.__dict__
            tag = fresh[5]
            if tag[0] is None or tag[0].value != tag[1]:
                # Written since its namespace was last the first import's (an unchanged
                # tag: nothing was, and the copy is skipped).
                d.clear()
                d.update(fresh[0])
            if fresh[3] is not None:
                fresh[3]()  # a project module's containers, emptied or refilled in place
            mods = sys.modules
            for name in fresh[1]:
                if name not in mods and not FINDER.bring_back(name):
                    try:
                        importlib.import_module(name)
                    except Exception:
                        pass  # its first import had it; a fresh one would fail the same way
        # The import system set __spec__ to ours; the module keeps its real one.
        if self.spec is not None:
            module.__spec__ = self.spec
        if fresh is not None and fresh[5][0] is not None:
            fresh[5][1] = fresh[5][0].value


class _Inputs:
    """What a module's first execution read from outside itself that a test may have set
    differently before a later import: the modules its import statements got (name ->
    module), the attributes ``from ... import`` took from them ((module name, attribute) ->
    object), the environment variables it read (name -> value, None when unset; ``every``:
    a copy of the whole environment when it went through all of them), and the platform
    names.  A module whose inputs differ now is executed again instead of reinstated."""

    __slots__ = ("imports", "names", "env", "every", "platform", "_flat")

    def __init__(self) -> None:
        self.imports: dict[str, object] = {}
        self.names: dict[tuple[str, str], object] = {}
        self.env: dict[str, str | None] = {}
        self.every: dict[Any, Any] | None = None
        self.platform = (sys.platform, os.name)
        self._flat: _FlatInputs | None = None

    def environment_differs(self) -> bool:
        """Whether the platform or an environment variable the import read differs now
        (each variable compared in C)."""
        if self.platform != (sys.platform, os.name):
            return True
        _, _, _, keys, values = self.flat()
        if keys and any(map(operator.ne, map(_env_value, keys), values)):
            return True
        return self.every is not None and self.every != _environ._data

    def flat(self) -> _FlatInputs:
        """The same, laid out for comparisons in C (made once the import is over: the
        inputs no longer change)."""
        flat = self._flat
        if flat is None:
            by_owner: dict[str, tuple[list[str], list[object]]] = {}
            for (owner, attr), obj in self.names.items():
                attrs, objs = by_owner.setdefault(owner, ([], []))
                attrs.append(attr)
                objs.append(obj)
            flat = self._flat = (
                tuple(self.imports),
                tuple(self.imports.values()),
                tuple((owner, tuple(a), tuple(o)) for owner, (a, o) in by_owner.items()),
                tuple(self.env),
                tuple(self.env.values()),
            )
        return flat


# _Inputs.flat(): the imported names and the modules they got; per module that names were
# taken from, its name, the attributes and the objects; the environment variables read
# and their values.
_FlatInputs = tuple[
    tuple[str, ...],
    tuple[object, ...],
    tuple[tuple[str, tuple[str, ...], tuple[object, ...]], ...],
    tuple[str, ...],
    tuple["str | None", ...],
]


# The inputs of the first imports running now in each thread, innermost last (an import
# statement is noted in its thread's innermost); and how many run in all threads (the
# noting import and environ class are in place while any does).
_READING = threading.local()
_ACTIVE = [0]
_ACTIVE_LOCK = threading.RLock()  # (re-entered by an import in a signal handler)


def _reading() -> list[_Inputs] | None:
    return getattr(_READING, "stack", None)


_real_import = __import__
_environ: Any = os.environ
_EnvironBase: Any = type(os.environ)


def _noting_import_over(prev: Callable[..., Any]) -> Callable[..., Any]:
    """The ``builtins.__import__`` put in place while a first import runs, over ``prev``
    (the one in place before: the interpreter's own, or a hook the user's code installed,
    which still sees every import): notes what each import statement got (see _Inputs).
    One for each time it is put in place: a hook that a module installs while it is in
    place may call it as its original, and calls reach the ``prev`` of that time."""

    def _noting_import(
        name: str,
        globals: Any = None,
        locals: Any = None,
        fromlist: Any = (),
        level: int = 0,
    ) -> Any:
        __tracebackhide__ = True  # (not the user's frame: pytest leaves it out)
        mod = prev(name, globals, locals, fromlist, level)
        stack = _reading()
        if stack:
            try:
                _note_import(stack[-1], name, globals, fromlist, level)
            except Exception:  # noqa: S110  (an odd __package__: nothing noted)
                pass
        return mod

    return _noting_import


_NOTING_CODE: Final = _noting_import_over(_real_import).__code__
# While first imports run: the noting import in place and the __import__ it went over.
_NOTING: list[tuple[Callable[..., Any], Any]] = []


def _import_hook_code() -> Any:
    """The code of the user's ``__import__`` hook in place (a Python function), if any."""
    hook = builtins.__dict__.get("__import__")
    if _NOTING and hook is _NOTING[0][0]:
        hook = _NOTING[0][1]
    return getattr(hook, "__code__", None)


_IMPORT_NAME: Final = dis.opmap["IMPORT_NAME"]


def _note_import(inputs: _Inputs, name: str, globals: Any, fromlist: Any, level: int) -> None:
    if level:
        package = (globals or {}).get("__package__") or ""
        base = package.rsplit(".", level - 1)[0] if level > 1 else package
        name = f"{base}.{name}" if name else base
    mods = sys.modules
    got = mods.get(name)
    if got is None:
        return
    inputs.imports.setdefault(name, got)
    for attr in fromlist or ():
        if not isinstance(attr, str) or attr == "*":
            continue
        sub = mods.get(f"{name}.{attr}")
        value = getattr(got, attr, _ABSENT)
        if sub is not None and value is sub:
            inputs.imports.setdefault(f"{name}.{attr}", sub)
        elif value is not _ABSENT:
            inputs.names.setdefault((name, attr), value)


_ABSENT: Final = object()
_ABSENTS: Final = itertools.repeat(_ABSENT)


def _env_value(key: Any) -> str | None:
    """``os.environ.get(key)`` without going through its class."""
    try:
        return _EnvironBase.__getitem__(_environ, key)  # type: ignore[no-any-return]
    except (KeyError, TypeError):
        return None


class _NotingEnviron(_EnvironBase):  # type: ignore[misc]
    """``os.environ``'s class while a first import runs: notes the variables read."""

    def __getitem__(self, key: Any) -> Any:
        stack = _reading()
        if stack:
            env = stack[-1].env
            if key not in env:
                env[key] = _env_value(key)
        return _EnvironBase.__getitem__(self, key)

    def __iter__(self) -> Any:
        stack = _reading()
        if stack and stack[-1].every is None:
            stack[-1].every = dict(self._data)
        return _EnvironBase.__iter__(self)


class _Capture:
    """Loader in front of the real one for a module imported while isolator runs: once
    the real loader has executed the module, the namespace it left is kept in ``fresh``.
    The real loader is put back on the spec and the module before the module runs, so
    that nothing in it can see this wrapper.

    The execution is *pure* when it showed no warning, changed no process-wide state that
    the resetter's probes see (``probe``), and wrote no library module attribute other
    than a submodule binding: only a pure module is reinstated after an unload, since
    reinstating skips what the execution did outside the module (the resets undid it).
    """

    def __init__(self, loader: Any, spec: Any, finder: UnloadedFinder):
        self.loader = loader
        self.spec = spec
        self.finder = finder

    def create_module(self, spec: Any) -> Any:
        create = getattr(self.loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: types.ModuleType) -> None:
        __tracebackhide__ = True  # (as importlib's frames: not the user's)
        loader = self.loader
        self.spec.loader = loader
        d = module.__dict__
        if d.get("__loader__") is self:
            d["__loader__"] = loader
        mods = sys.modules
        n = len(mods)
        probe = self.finder.probe
        before = probe() if probe is not None else None
        collect_writes()
        logged = len(LOG.entries)
        # The warnings machinery looks ``_showwarnmsg`` up on the module for every warning
        # it shows or records; a wrapper in the module's dict (not through setattr, which
        # the write barrier would log) sees each one.
        wd = _warnings_dict()
        show = wd.get("_showwarnmsg")
        shown: list[object] = []

        def seen(msg: object) -> object:
            shown.append(msg)
            return show(msg)  # type: ignore[misc]

        if show is not None:
            wd["_showwarnmsg"] = seen
        # What the execution reads, through the import statements and os.environ (in
        # their dicts and on the object's class, past the write barrier, and put back).
        inputs = _Inputs()
        stack = _reading()
        if stack is None:
            stack = _READING.stack = []
        stack.append(inputs)
        with _ACTIVE_LOCK:
            _ACTIVE[0] += 1
            if _ACTIVE[0] == 1:
                prev = builtins.__dict__.get("__import__", _real_import)
                noting = _noting_import_over(prev)
                _NOTING.append((noting, prev))
                _own_write(builtins, "__import__", noting)
                if type(_environ) is _EnvironBase:
                    _environ.__class__ = _NotingEnviron
        try:
            loader.exec_module(module)
        except Exception as exc:
            if self.finder.bring_back_earlier(self.spec.name, module, exc):
                return
            raise
        finally:
            stack.pop()
            with _ACTIVE_LOCK:
                _ACTIVE[0] -= 1
                if _ACTIVE[0] == 0 and _NOTING:
                    noting, prev = _NOTING.pop()
                    if builtins.__dict__.get("__import__") is noting:
                        _own_write(builtins, "__import__", prev)
                    else:
                        # The module put a hook of its own in place (over ours): it stays,
                        # and what a reset puts back is the one before ours.
                        collect_writes()
                        LOG.replace_old(builtins, "__import__", noting, prev)
                    if type(_environ) is _NotingEnviron:
                        _environ.__class__ = _EnvironBase
            if show is not None and wd.get("_showwarnmsg") is seen:
                wd["_showwarnmsg"] = show
        # The names this import added, read from the end (listing every name would touch
        # each one: a cache miss per name in the middle of a test).
        added = len(mods) - n
        imported = list(itertools.islice(reversed(mods), added))[::-1] if added > 0 else []
        collect_writes()
        lazy = self.finder.lazy
        pure = (
            not shown
            and all(
                isinstance(m.__dict__.get(name), types.ModuleType)
                # Another module's value loaded on first use (pytz's zone table): a new
                # execution would not load it again, and the reset puts None back.
                or (old is None and lazy is not None and lazy(m, name))
                for m, name, old in LOG.entries[logged:]
            )
            and (probe is None or self._probe_unchanged(probe, before))
        )
        snapshot = self.finder.snapshot
        state = snapshot(module) if pure and snapshot is not None else None
        cell = _versions.cell_for(d)
        fresh = (
            dict(d),
            imported,
            pure,
            state,
            _stamp(self.spec.origin),
            [cell, None if cell is None else cell.value],
            inputs,
        )
        self.finder.fresh.put(module, self.spec, loader, fresh)
        self.finder.earlier[self.spec.name] = weakref.ref(module)

    def _probe_unchanged(self, probe: Callable[[], Any], before: Any) -> bool:
        after = probe()
        if after == before:
            return True
        same = self.finder.probe_same
        return same is not None and same(before, after)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)


def _own_write(mod: types.ModuleType, name: str, value: object) -> None:
    """Bind ``name`` in a watched library module's namespace for isolator itself: the
    writes made so far are collected first (a test's or a module body's stay theirs), and
    the module's snapshot then takes the new binding, so that no later look counts it as
    a write -- which would make every module imported inside another's first import look
    impure (and be executed again after each test instead of reinstated)."""
    watch = WATCH
    if watch is not None:
        collect_writes()
    mod.__dict__[name] = value
    if watch is not None:
        watch.resync([mod])


def _warnings_dict() -> dict[str, Any]:
    return warnings.__dict__


def _import_machinery(fn: Any) -> Any:
    """Give a loader method the file name of the import system's own frames.  The warnings
    machinery skips those: a module body's ``warn(..., stacklevel=2)`` must name the code
    that imported it, as without isolator.  And the interpreter cuts a failed import's
    frames out of its traceback only where they all come from the import system: with
    another name in between, three of them would show in the test's report."""
    fn.__code__ = fn.__code__.replace(co_filename="<frozen importlib._bootstrap_external>")
    return fn


_Capture.exec_module = _import_machinery(_Capture.exec_module)  # type: ignore[method-assign]
_Reinstate.exec_module = _import_machinery(_Reinstate.exec_module)  # type: ignore[method-assign]


class UnloadedFinder:
    """First on sys.meta_path: modules that a test imported are unloaded after it (a fresh
    process would not have them), and come back as the *same* objects when imported again,
    instead of being executed twice (which costs time, and breaks identity of their classes
    for objects that outlive the test).

    A module comes back as its first import left it: its namespace (what a test rebound or
    added in it is gone), a project module's tracked state, and the modules that import
    pulled in.  For that, every module imported while the finder is installed is found here
    (by asking the finders after this one, as the import system would) and its namespace is
    copied when its execution ends.  Objects a library module holds and a test changed in
    place stay changed (see the README's limits).
    """

    def __init__(self) -> None:
        self.cache: dict[str, types.ModuleType] = {}
        self.fresh = _FirstImports()
        self.probe: Callable[[], Any] | None = None  # the resetter's process probes
        # For a project module: snapshot of its tracked state -> what puts it back (or None).
        self.snapshot: Callable[[types.ModuleType], Callable[[], object] | None] | None = None
        # Whether a library module's global bound from None is a value loaded lazily on
        # first use (``global _TABLE; if _TABLE is None: _TABLE = build()``).
        self.lazy: Callable[[types.ModuleType, str], bool] | None = None
        # Whether two probe findings differ only by what needs no reset (see the
        # resetter's _import_probe_same).
        self.probe_same: Callable[[Any, Any], bool] | None = None
        self._finding = False
        # name -> (where the import system looked, the origin it found there): a module
        # unloaded after most tests is found again without asking every finder each time.
        self._found: dict[str, tuple[tuple[Any, ...], str]] = {}
        # name -> (where, the finder that gave its spec) for modules without a file (six's
        # lazy modules): imported afresh after each test that imported them, and every
        # finder before that one (pytest's rewrite hook, the path finder: tens of
        # microseconds) said no from the same place last time.
        self._answered: dict[str, tuple[tuple[Any, ...], Any]] = {}
        # The file guard's count of file writes and process starts (see FileGuard.writes),
        # and, per file of an unloaded module, that count when its stamp was last found
        # unchanged: no stat() of a file before each reinstatement when nothing could have
        # written it since.
        self.writes: Callable[[], int] | None = None
        self._unchanged_at: dict[str, int] = {}
        self._verdicts: dict[int, bool] = {}  # see _stale
        # Names that C code imported (not an import statement nor importlib): C may keep
        # the module (see ModulesProbe._held_elsewhere).
        self.from_c: set[str] = set()
        # name -> the module its last completed first import executed (see
        # bring_back_earlier), and the modules brought back so -> why.
        self.earlier: dict[str, weakref.ref[types.ModuleType]] = {}
        self.came_back: dict[str, str] = {}

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name.startswith(RUNNER_PREFIXES):
            # The test runner's own modules (pytest's, isolator's: imported on first use
            # while a test runs) are never unloaded: nothing to capture or bring back.
            return None
        if self._finding and name not in self.cache:
            # A finder we asked is importing something of its own (six's lazy modules
            # import the module they stand for while making their spec): only a module
            # unloaded after an earlier test is ours to bring back.
            return None
        if self._verdicts:
            self._verdicts = {}
        mod = self.cache.pop(name, None)
        if mod is None and not _importing():
            return None
        if _imported_by_c():
            self.from_c.add(name)
        if mod is not None and self._stale(mod):
            self._found.pop(name, None)
            self.fresh.forget(mod, keep_earlier=True)
            mod = None
        if mod is not None:
            where = _where(path)
            found = self._found.get(name)
            if (
                found is not None
                and found[0] == where
                and found[1] == getattr(mod, "__file__", None)
            ):
                return self._reinstate(name, mod)
        spec = self._find_elsewhere(name, path, target)
        if mod is not None:
            # Reinstated only from where a new import would load it now (sys.path and the
            # finders may have changed since, and been reset).
            # The module's __spec__ may be another name's by now: the import system binds
            # the spec of each name a module is imported under (six.moves aliases), so its
            # file says where it came from as well.
            old = getattr(mod, "__spec__", None)
            origin = None if spec is None else spec.origin
            if spec is not None and (
                origin == getattr(old, "origin", None)
                or (origin is not None and origin == getattr(mod, "__file__", None))
            ):
                file = getattr(mod, "__file__", None)
                if isinstance(file, str):
                    self._found[name] = (where, file)
                return self._reinstate(name, mod)
            self._found.pop(name, None)
            self.fresh.forget(mod)
        if spec is None:
            return None  # the import system asks the finders again, legacy ones too
        loader = spec.loader
        # Only a module with a file is ever reinstated (see ModulesProbe.restore).
        if loader is not None and spec.has_location and hasattr(loader, "exec_module"):
            spec.loader = _Capture(loader, spec, self)
            if isinstance(spec.origin, str):
                # Where this import found it: after an unload, the module comes back from
                # the same place without asking the finders again (see above).
                self._found[name] = (_where(path), spec.origin)
        return spec

    def _stale(self, mod: types.ModuleType, fresh: _Fresh | None = None) -> bool:
        """Whether a new import would not give the module's first import: its file was
        rewritten, or what that import read differs now (see _Inputs).  Verdicts hold
        for one import statement (``_verdicts``, emptied by find_spec): a family of
        modules brought back together is looked at once each."""
        verdicts = self._verdicts
        k = id(mod)
        got = verdicts.get(k)
        if got is not None:
            return got
        verdicts[k] = False  # (a cycle of imports: decided by the rest)
        got = verdicts[k] = self._inputs_differ(mod, fresh)
        return got

    def _inputs_differ(self, mod: types.ModuleType, fresh: _Fresh | None) -> bool:
        if fresh is None:
            fresh = self.fresh.get(mod)
        if fresh is None:
            return False
        if self._rewritten(mod, fresh):
            return True
        inputs = fresh[6]
        if inputs.environment_differs():
            return True
        names, objs, taken, _, _ = inputs.flat()
        # Each check below runs in C over all its inputs; Python only looks at the ones
        # that differ (modules unloaded since, which come back as themselves unless stale).
        mods = sys.modules
        cache = self.cache
        for name in itertools.compress(names, map(operator.is_not, map(mods.get, names), objs)):
            obj = inputs.imports[name]
            if mods.get(name) is not None or cache.get(name) is not obj:
                return True  # another module there now, or none that comes back
            if self._stale(obj):  # type: ignore[arg-type]
                return True
        space: Any
        for owner_name, attrs, got in taken:
            owner = mods.get(owner_name)
            if owner is None:
                cached = cache.get(owner_name)
                owner_fresh = self.fresh.get(cached) if cached is not None else None
                if owner_fresh is None:
                    return True
                space = owner_fresh[0]
            else:
                space = getattr(owner, "__dict__", None)
                if not isinstance(space, dict):
                    return True
            if any(map(operator.is_not, map(space.get, attrs, _ABSENTS), got)):
                return True
        return False

    def _rewritten(self, mod: types.ModuleType, fresh: _Fresh | None = None) -> bool:
        """Whether the file the module's first import executed has changed since."""
        if fresh is None:
            fresh = self.fresh.get(mod)
        if fresh is None or fresh[4] is None:
            return False
        path = getattr(mod, "__file__", None)
        writes = self.writes() if self.writes is not None else None
        if writes is not None and self._unchanged_at.get(path) == writes:  # type: ignore[arg-type]
            return False
        if _stamp(path) != fresh[4]:
            return True
        if writes is not None and isinstance(path, str):
            self._unchanged_at[path] = writes
        return False

    def _reinstate(self, name: str, mod: types.ModuleType) -> Any:
        import importlib.util

        fresh = self.fresh.get(mod)
        return importlib.util.spec_from_loader(name, _Reinstate(mod, fresh))  # type: ignore[arg-type]

    def _find_elsewhere(self, name: str, path: Any, target: Any) -> Any:
        """The spec the finders after this one give, as the import system would ask them."""
        finding, self._finding = self._finding, True
        try:
            hint = self._answered.get(name)
            where = None
            if hint is not None:
                where = _where(path)
                if hint[0] == where:
                    spec = hint[1].find_spec(name, path, target)
                    if spec is not None:
                        return spec
                del self._answered[name]
            for finder in list(sys.meta_path):
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(name, path, target)
                if spec is not None:
                    if not spec.has_location:
                        self._answered[name] = (where or _where(path), finder)
                    return spec
            return None
        finally:
            self._finding = finding

    def bring_back(self, name: str) -> bool:
        """Reinstate an unloaded module that a reinstated module's first import imported,
        without the import system's machinery (module lock, spec, attribute set-up: most of
        the cost of a reinstatement), when it would find and reinstate the same object:
        its package is imported, it is found from the same place as at its first import,
        and its file is unchanged.  Does what the import system does around a load: the
        audit event, sys.modules before execution and again at the end after its own
        imports, the binding on its package.  False: not done (import it)."""
        mod = self.cache.get(name)
        if mod is None:
            return False
        parent_name, _, child = name.rpartition(".")
        parent = None
        path = None
        if parent_name:
            parent = sys.modules.get(parent_name)
            if parent is None and self.bring_back(parent_name):
                # As the import system imports a package before its submodule (a module
                # first imported beside an imported package: http.client after http).
                parent = sys.modules.get(parent_name)
                if self.cache.get(name) is not mod:
                    # The package's own first import had imported this module: it came
                    # back with it (concurrent.futures -> its .process submodule).
                    return sys.modules.get(name) is mod
            path = getattr(parent, "__path__", None)
            if path is None:
                return False
        found = self._found.get(name)
        fresh = self.fresh.get(mod)
        if (
            fresh is None
            or found is None
            or found[1] != getattr(mod, "__file__", None)
            or found[0] != _where(path)
            or self._stale(mod, fresh)
        ):
            return False
        sys.audit("import", name, None, sys.path, sys.meta_path, sys.path_hooks)
        del self.cache[name]
        mods = sys.modules
        mods[name] = mod
        try:
            _Reinstate(mod, fresh).exec_module(mod)
        except BaseException:
            mods.pop(name, None)
            raise
        mods[name] = mods.pop(name, mod)
        if parent is not None:
            setattr(parent, child, mod)
        return True

    def bring_back_earlier(self, name: str, failed: types.ModuleType, exc: Exception) -> bool:
        """A module executed again (its first import had effects a reinstatement would
        skip, or modules it imported were executed again since) raised where an earlier
        test's execution of it had completed, from the same file and environment: what
        differs is state of that execution's that no reset puts back, such as an entry in
        another library's registry ("already registered").  It comes back as that
        execution left it, as a pure module does: True (reported in the summary).  An
        ImportError, or environment variables it read set otherwise, is the import's own
        outcome: False."""
        ref = self.earlier.get(name)
        old = None if ref is None else ref()
        if old is None or old is failed or isinstance(exc, ImportError):
            return False
        fresh = self.fresh.earlier(old)
        if fresh is None or self._rewritten(old, fresh):
            return False
        if fresh[6].environment_differs():
            return False  # the test set the environment it reads: its own outcome
        sys.modules[name] = old
        try:
            _Reinstate(old, fresh).exec_module(old)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        why = f"{type(exc).__name__}: {exc}".splitlines()[0]
        self.came_back.setdefault(name, why[:200])
        return True

    def invalidate_caches(self) -> None:
        # importlib.invalidate_caches(): files may have appeared where imports look.
        self._found.clear()
        self._answered.clear()
        self._unchanged_at.clear()

    def reinstatable(self, name: str, module: types.ModuleType, project: bool = False) -> bool:
        """Whether ``module`` may come back as itself; False: a new import executes it.
        A library module whose import was not seen here comes back as it is; a project
        module only with a snapshot of its state from right after a pure import."""
        fresh = self.fresh.get(module)
        if fresh is None:
            return not project
        return fresh[2] and (not project or fresh[3] is not None)

    def clear(self) -> None:
        self.cache.clear()
        self.fresh.clear()
        self._found.clear()
        self._answered.clear()
        self._unchanged_at.clear()
        self.from_c.clear()
        self.earlier.clear()
        self.came_back.clear()
        self.probe = None
        self.snapshot = None
        self.lazy = None
        self.probe_same = None
        self.writes = None
        _CWD[0] = _CWD[1] = None


_HELD_LOOKS: Final = 4


def _untracked_references(mods: list[types.ModuleType]) -> list[int]:
    """Per module, how many of its references no object the collector tracks accounts
    for: a C static's.  A new module object held only by the same list calibrates what
    this function's own call holds."""
    # (The probe is held by the list alone: a local variable is a reference the collector
    # cannot see, on 3.11 and later.)
    cands = [*mods, types.ModuleType("<isolator reference probe>")]
    counts = list(map(sys.getrefcount, cands))
    referents = itertools.chain.from_iterable(map(gc.get_referents, gc.get_referrers(*cands)))
    by_id = collections.Counter(map(id, referents))
    seen = [by_id[id(m)] for m in cands]
    base = counts[-1] - seen[-1]
    return [c - s - base for c, s in zip(counts[:-1], seen[:-1])]


_os_stat: Final = os.stat  # our own (see _getcwd below)


def _stamp(path: object) -> tuple[int, int] | None:
    if not isinstance(path, str):
        return None
    try:
        st = _os_stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _where(path: Any) -> tuple[Any, ...]:
    """Everything that decides where a new import of a name finds it, short of the files
    themselves: the finders, the search path (relative entries: the cwd) and the package
    path.  Files that tests create are put back by the file guard, and code that creates
    importable files calls importlib.invalidate_caches(), which clears what was found."""
    cwd = _cwd()
    return (
        tuple(sys.meta_path),
        tuple(sys.path_hooks),
        tuple(sys.path),
        None if path is None else tuple(path),
        cwd,
    )


# (FINDER.writes() when the current directory was last read, that directory)
_CWD: list[Any] = [None, None]


# Our own reference: a test may replace os.getcwd (a checker of blocking calls that raises
# while an event loop runs), and the import system reads the directory from posix anyway.
_getcwd: Final = os.getcwd


def _cwd() -> str | None:
    """``os.getcwd()`` (None: deleted, so relative entries find nothing), read again only
    after the file guard saw a change of directory or a write (a rename of a directory
    above it) since the last read: a reinstated family asks where imports look once per
    module."""
    writes = FINDER.writes
    key = writes() if writes is not None else None
    if key is not None and _CWD[0] == key:
        return _CWD[1]  # type: ignore[no-any-return]
    try:
        cwd: str | None = _getcwd()
    except OSError:
        cwd = None
    _CWD[0], _CWD[1] = key, cwd
    return cwd


def _imported_by_c() -> bool:
    """Whether the import system was called from C code that a Python frame called
    (``datetime.strptime`` importing ``_strptime``), not from an import statement, the
    importlib functions or a call of ``__import__``: that code may hold on to the module.
    (Frame 5: this function <- find_spec <- _find_spec <- _find_and_load_unlocked <-
    _find_and_load <- the code that asked for the import.)"""
    try:
        frame: Any = sys._getframe(5)
    except ValueError:
        return False
    if frame.f_back is None or frame.f_code is _NOTING_CODE:
        return False
    if frame.f_code is _import_hook_code():
        return False  # the user's __import__ hook, called by an import statement
    code = frame.f_code
    if code.co_filename.startswith("<frozen") or "__import__" in code.co_names:
        return False
    i: int = frame.f_lasti
    return i >= 0 and code.co_code[i] != _IMPORT_NAME


def _importing() -> bool:
    """Whether the import system called us to import (not ``importlib.util.find_spec``
    asking where a module is, whose caller may look at the spec's loader)."""
    try:
        frame = sys._getframe(3)  # _importing <- find_spec <- _find_spec <- caller
    except ValueError:
        return False
    return frame.f_code.co_name == "_find_and_load_unlocked"


FINDER = UnloadedFinder()


class ModulesProbe:
    """Snapshot of ``sys.modules``; see the module docstring for the policy.

    ``snap``: name -> module at the baseline, in ``sys.modules`` order (imports append to
    it, so a test's imports are its tail); ``n``: its length.  ``_clean``: (snap, its tag
    cell, its tag, sys.modules' tag) when the two were last known equal.
    """

    def __init__(self, is_project: Any = None) -> None:
        self.is_project = is_project or (lambda mod: False)
        # sys.modules' version tag (see _versions): any write to it moves the tag, so an
        # unchanged tag proves "unchanged", replacements of the same length included.
        # (Before the snapshot: the tag's first use may import modules of its own.)
        self._mods_tag = _versions.cell_for(sys.modules)
        self.snap: dict[str, Any] = dict(sys.modules)
        self.n = len(self.snap)
        self.ext_families = {n.partition(".")[0] for n, m in self.snap.items() if is_extension(m)}
        self._clean: tuple[dict[str, Any], Any, int, int] | None = None
        # The bytes of sys.modules' entry table when ``_clean`` was taken: see _changes.
        self._image: bytes | None = None
        self._lists: tuple[dict[str, Any], int, list[str], list[Any]] | None = None
        self._library: dict[str, types.ModuleType] = {}  # unloaded before, not project code
        # name -> (id of the module, its reference count) when found held by nothing
        # beyond Python's objects, and how often that was looked at (see _held_elsewhere).
        self._refs: dict[str, tuple[int, int]] = {}
        self._looks: dict[str, int] = {}
        self.swapped: list[types.ModuleType] = []  # the resetter's class-swapped modules
        self._snap_cell: tuple[dict[str, Any], Any] | None = None  # (snap, its tag cell)
        # The last _changes() found sys.modules' entry table to start with ``_image``.
        self._prefix_seen = False
        self._mark_clean()

    def _cell(self, snap: dict[str, Any]) -> Any:
        """The tag cell of ``snap`` (made once per snapshot object)."""
        cached = self._snap_cell
        if cached is not None and cached[0] is snap:
            return cached[1]
        cell = _versions.cell_for(snap)
        self._snap_cell = (snap, cell)
        return cell

    def _mark_clean(self, same_prefix: bool = False) -> None:
        """sys.modules equals the snapshot now.  ``same_prefix``: its entry table still
        starts with ``_image`` (only entries after it were removed since that was seen),
        which need not be read again."""
        image = self._image if same_prefix else None
        self._clean = None
        self._image = None
        self._prefix_seen = False
        if self._mods_tag is None:
            return
        cell = self._cell(self.snap)
        if cell is not None:
            self._clean = (self.snap, cell, cell.value, self._mods_tag.value)
            self._image = image if image is not None else _versions.entries_image(sys.modules)

    def diff(self) -> tuple[list[str], list[str], list[str]]:
        """(added, replaced, deleted) names; the common case is two integer reads."""
        clean, mods_cell = self._clean, self._mods_tag
        if mods_cell is None:
            if len(sys.modules) == self.n:
                return [], [], []  # no version tags here: a length check, as before
        elif clean is not None:
            snap, cell, tag, mods_tag = clean
            if snap is self.snap and cell.value == tag and mods_cell.value == mods_tag:
                return [], [], []
        changes = self._changes()
        if not any(changes):
            self._mark_clean()
        return changes

    def full_diff(self) -> tuple[list[str], list[str], list[str]]:
        changes = self._changes()
        if not any(changes):
            self._mark_clean()
        return changes

    def _snap_lists(self) -> tuple[list[str], list[Any]]:
        """The snapshot's keys and values, cached while the snapshot is unchanged."""
        snap = self.snap
        cell = self._cell(snap) if self._mods_tag is not None else None
        cached = self._lists
        if cell is not None and cached is not None:
            if cached[0] is snap and cached[1] == cell.value:
                return cached[2], cached[3]
        keys, values = list(snap), list(snap.values())
        self._lists = (snap, cell.value, keys, values) if cell is not None else None
        return keys, values

    def _changes(self) -> tuple[list[str], list[str], list[str]]:
        mods, snap = sys.modules, self.snap
        n = len(snap)
        image, clean = self._image, self._clean
        if (
            image is not None
            and clean is not None
            and len(mods) >= n
            and clean[0] is snap
            and clean[1].value == clean[2]
            and _versions.entries_image(mods, len(image) // _versions.ENTRY) == image
        ):
            # sys.modules' entry table starts as it was when it equalled the snapshot (the
            # same keys bound to the same objects, read without touching a module), so
            # every other live entry was added since: read them from the end.
            self._prefix_seen = True
            return sorted(itertools.islice(reversed(mods), len(mods) - n)), [], []
        self._prefix_seen = False
        if len(mods) >= n:
            # Fast path, exact: sys.modules starts with the snapshot's very key and value
            # objects, in order (imports append); then nothing was replaced or deleted, and
            # the rest is what was added.  (map stops at the end of the snapshot's lists.)
            keys, values = self._snap_lists()
            # Values by identity; names by equality (a list compare, in C: an equal name
            # is the same key).
            if not any(map(operator.is_not, mods.values(), values)) and (
                list(itertools.islice(mods, n)) == keys
            ):
                return sorted(itertools.islice(mods, n, None)), [], []
        # Set differences and a map over the snapshot run in C: a test that imports a
        # module pays for a thousand entries once, not three Python loops over them.
        keys_list = list(snap)
        added = sorted(mods.keys() - snap.keys())
        deleted = sorted(snap.keys() - mods.keys())
        gone = set(deleted)
        replaced = [
            n
            for n in itertools.compress(
                keys_list, map(operator.is_not, map(mods.get, keys_list), snap.values())
            )
            if n not in gone
        ]
        return added, replaced, deleted

    def _held_elsewhere(self, names: list[str]) -> list[str]:
        """The library modules among ``names`` that something outside Python's objects
        holds (a C extension's static variable), found by counting references.

        A module's reference count, minus the references the collector can show, is what
        C code holds.  Finding them walks every object, so a module is looked at again
        only when its count grew since the last look found nothing (another holder since),
        and at most ``_HELD_LOOKS`` times."""
        mods, refs, looks = sys.modules, self._refs, self._looks
        keys: dict[int, list[str]] = {}  # module id -> its names here (six.moves aliases)
        cands: list[types.ModuleType] = []
        from_c = FINDER.from_c
        for n in names:
            if n not in from_c:
                continue
            m = mods.get(n)
            if not isinstance(m, types.ModuleType) or self.is_project(m):
                continue
            k = id(m)
            if k in keys:
                keys[k].append(n)
                continue
            last = refs.get(n)
            if last is not None and (
                (last[0] == k and sys.getrefcount(m) <= last[1]) or looks.get(n, 0) >= _HELD_LOOKS
            ):
                continue
            looks[n] = looks.get(n, 0) + 1
            keys[k] = [n]
            cands.append(m)
        m = None
        if not cands:
            return []
        held: list[str] = []
        for mod, extra in zip(cands, _untracked_references(cands)):
            if extra > 0:
                held += keys[id(mod)]
            else:
                count = sys.getrefcount(mod)
                for n in keys[id(mod)]:
                    refs[n] = (id(mod), count)
        return held

    def _keep_library_module(self, mod: types.ModuleType) -> None:
        """A module kept in sys.modules for good gets back the namespace its first import
        left, when that import was seen and pure, and is watched from now on."""
        fresh = FINDER.fresh.get(mod)
        if fresh is not None and fresh[2]:
            d = mod.__dict__
            spec = d.get("__spec__")  # the import system's, for the name it is under
            d.clear()
            d.update(fresh[0])
            if spec is not None:
                d["__spec__"] = spec
        FINDER.fresh.forget(mod)
        watch_module(mod, self.swapped)

    def library_modules(self) -> dict[str, types.ModuleType]:
        """Library modules unloaded after the tests that imported them (name -> module)."""
        return self._library

    def restore(
        self, added: list[str], replaced: list[str], deleted: list[str]
    ) -> tuple[list[str], list[str]]:
        """Undo; returns (sites reset, names kept and absorbed into the baseline)."""
        mods = sys.modules
        names: list[str] = []
        kept: list[str] = []
        families = self.ext_families
        for n in added:
            m = mods.get(n)
            top = n.partition(".")[0]
            if (
                isinstance(m, types.ModuleType)
                and getattr(m, "__spec__", None) is not None
                and (
                    top in families
                    or is_extension(m)
                    or top.startswith(_KEEP_PREFIXES)
                    or top in _KEEP_NAMES
                )
            ):
                if top not in families and is_extension(m):
                    families.add(top)
                kept.append(n)
                continue
            names.append(n)
        # A family gains a C extension during the test: keep the whole family.
        kept += [n for n in names if n.partition(".")[0] in families]
        names = [n for n in names if n.partition(".")[0] not in families]
        m = None  # (a reference the collector cannot see: see _held_elsewhere)
        held = self._held_elsewhere(names) if names and FINDER.from_c else []
        if held:
            # C code holds these (datetime's _strptime on 3.10-3.12): it would go on using
            # the unloaded module, and no later import would put it back in sys.modules.
            # They stay, as their first import left them, and are watched from now on.
            kept += held
            gone = set(held)
            names = [n for n in names if n not in gone]
            for n in held:
                self._keep_library_module(mods[n])
        library = self._library
        for name in names:
            m = mods.pop(name, None)
            if (
                isinstance(m, types.ModuleType)
                and getattr(m, "__spec__", None) is not None
                and getattr(m, "__file__", None)
            ):
                # The same module object comes back after each test that imports it.
                if library.get(name) is not m:
                    if self.is_project(m):
                        if FINDER.reinstatable(name, m, project=True):
                            FINDER.cache[name] = m
                        continue
                    library[name] = m
                if FINDER.reinstatable(name, m):
                    FINDER.cache[name] = m
        reset = [f"<sys.modules>:{n}" for n in names]
        for n in replaced + deleted:
            mods[n] = self.snap[n]
            reset.append(f"<sys.modules>:{n}")
        snap = self.snap
        for n in kept:
            snap[n] = mods[n]
        if kept or deleted:
            # Keep the snapshot in sys.modules order (re-inserted and kept names moved to
            # its end), so that the next test's imports are again its tail.
            order = [n for n in mods if n in snap]
            if len(order) == len(snap):
                self.snap = {n: snap[n] for n in order}
        self.n = len(self.snap)
        if len(mods) == self.n:
            # Only names added after the entries last seen equal to the image were removed
            # (none put back, none kept): the table still starts with that image.
            self._mark_clean(self._prefix_seen and not (kept or replaced or deleted))
        return reset, kept
