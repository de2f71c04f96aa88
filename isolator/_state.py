"""In-memory state of the project's modules: find it, fingerprint it, restore it in place.

A :class:`StateTable` is the baseline of one moment.  It holds *watches*: for every
mutable object reachable from a tracked module (module dicts, class dicts, containers,
instance dicts of singletons, function defaults, closure cells, memo caches) a live
reference and a shallow snapshot.  Checking is one C-level pass of ``!=`` over two
parallel lists, so a clean test costs one comparison per watched object, and nothing is
deep-copied::

    lives: [mod.__dict__, SETTINGS, Config.__dict__ (proxy), ...]
    snaps: [dict(...),    dict(...), dict(...),               ...]
    sites: ["m:<globals>", "m:SETTINGS", "m:Config", ...]
    kinds: [MODULE, DICT, CLASS, ...]

Restoring puts the old contents back into the *same* objects, so references that other
modules hold (``from m import SETTINGS``) stay coherent.
"""

from __future__ import annotations

import _thread
import ast
import collections
import contextvars
import datetime
import decimal
import dis
import functools
import gc
import io
import itertools
import operator
import re
import sys
import threading
import types
import warnings
import weakref
from array import array
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final

from isolator import _versions

# Kinds of watch.  Each kind has one snapshot, compare and restore rule.
MODULE: Final = 0  # a module's __dict__; restored name by name
DICT: Final = 1  # dict and subclasses, and instance __dict__s
LIST: Final = 2
SET: Final = 3
BYTEARRAY: Final = 4
DEQUE: Final = 5
CLASS: Final = 6  # a class's mappingproxy; restored with setattr/delattr
ARRAY: Final = 7
INSTANCE: Final = 8  # an instance __dict__ (sites name attributes, not keys)

_MAX_DEPTH: Final = 6
_MAX_INSTANCE_DEPTH: Final = 4
_INSTANCE_VALUES_DEPTH: Final = 2  # below it, an instance's attributes but not their contents
_MAX_WATCHES_PER_MODULE: Final = 5000
_MAX_ELEMENTS_PER_CONTAINER: Final = 20000

# Types whose instances cannot change, or whose changes do not matter for isolation.
_IMMUTABLE: tuple[type, ...] = (
    int,
    float,
    complex,
    str,
    bytes,
    bool,
    type(None),
    frozenset,
    range,
    slice,
    type(Ellipsis),
    type(NotImplemented),
    types.BuiltinFunctionType,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    types.MethodWrapperType,
    types.GetSetDescriptorType,
    types.MemberDescriptorType,
    types.CodeType,
    property,
    staticmethod,
    classmethod,
    # Library values with no state to change: walking them found nothing to watch, one
    # by one (a project's compiled patterns and decimal tables hold thousands).
    re.Pattern,
    decimal.Decimal,
)
# The same types exactly, for a set lookup before the isinstance() (most values walked
# past are ints and strings, which the tuple check finds only after a few tries); and
# the standard library's date and time values, whose subclasses may have attributes to
# change (pytz's memo of thousands of datetimes counted against a walk's bound, and its
# entries were reported as watched in part).
_IMMUTABLE_EXACT: Final = frozenset(
    (
        *_IMMUTABLE,
        datetime.date,
        datetime.datetime,
        datetime.time,
        datetime.timedelta,
        datetime.timezone,
    )
)
_SKIP_GLOBALS: tuple[type, ...] = (*_IMMUTABLE, types.ModuleType)
# A function's defaults, keyword defaults, closure and attribute dict; all empty:
# nothing of it to watch.
_BARE: Final = operator.attrgetter("__defaults__", "__kwdefaults__", "__closure__", "__dict__")
_NOTHING: Final[tuple[None, None, None, dict[str, Any]]] = (None, None, None, {})
_CONTAINERS: Final = (dict, list, set, collections.deque)
_WEAK_CONTAINERS: Final = (weakref.WeakValueDictionary, weakref.WeakKeyDictionary, weakref.WeakSet)
_PLAIN_CONTAINERS: Final = frozenset(
    {dict, list, set, collections.deque, collections.OrderedDict, collections.defaultdict}
)
_SKIP_NAMES: Final = frozenset(
    {
        "__builtins__",
        "__loader__",
        "__spec__",
        "__cached__",
        "__file__",
        "__name__",
        "__package__",
        "__path__",
        "__doc__",
        "__annotations__",
        "__warningregistry__",
        "__dict__",
        "__weakref__",
        "__module__",
        "__qualname__",
        "__abstractmethods__",
        "_abc_impl",
        "__slotnames__",
        "__parameters__",
        "__orig_bases__",
        "__firstlineno__",
        "__static_attributes__",
    }
)


# Kinds of watches, as bits: which of a table's may have changed (``_reach.Scope.hits``).
TAGS: Final = 1  # dicts checked by version tag
LIVES: Final = 2  # watches compared with their snapshots
SLOTS: Final = 4
CELLS: Final = 8
CACHES: Final = 16
DEFAULTS: Final = 32
OPAQUE: Final = 64
ALL_KINDS: Final = 127

# Bumped whenever a table's ``vimage`` (or its ``vviews``) changes, so that a scope's copy
# of its tables' images laid end to end (``_reach.Scope``) knows when to be made again.
image_epoch = [0]
# Bumped whenever a table's ``vviews`` list is made (its watches were sorted again): a
# scope's flat list of them is made again only then, not after every change of an image.
views_epoch = [0]
# Bumped whenever a table's ``parts`` are dropped (its snapshots or its watches changed): a
# scope then compares its tables' parts with the ones its flat lists were laid out from.
parts_epoch = [0]
# Bumped whenever a memo cache's sizer or baseline count changes in a table's parts, in
# place (entries learned into it, or it was emptied): a scope copies its two cache lists
# again, not its whole layout.
sizes_epoch = [0]
Parts = tuple[
    list[Any], list[Any], list[Any], list[Any], list[Any], list[Any], list[Any], list[Any],
    list[int],
]  # fmt: skip


def moved_entries(now: bytes, image: bytes | bytearray) -> list[int]:
    """Positions of the 8-byte entries that differ between two equally long images of
    version tags: halves compared as bytes (a C memcmp each) and only unequal halves split
    again, down to runs of at most 64 entries, whose moved entries the lowest set bits of
    the two runs XORed as integers name; a few moved tags among hundreds cost a few dozen
    C calls, not a Python int per tag."""
    out: list[int] = []
    todo = [(0, len(now) // 8)]
    while todo:
        lo, hi = todo.pop()
        if hi - lo <= 64:
            x = int.from_bytes(now[8 * lo : 8 * hi], "little") ^ int.from_bytes(
                image[8 * lo : 8 * hi], "little"
            )
            while x:  # entry j is bits 64j..64j+63: the lowest set bit names the next one
                j = ((x & -x).bit_length() - 1) >> 6
                out.append(lo + j)
                lo += j + 1
                x >>= 64 * (j + 1)
            continue
        mid = (lo + hi) // 2
        if now[8 * mid : 8 * hi] != image[8 * mid : 8 * hi]:
            todo.append((mid, hi))
        if now[8 * lo : 8 * mid] != image[8 * lo : 8 * mid]:
            todo.append((lo, mid))
    out.sort()
    return out


def _has_static(obj: object, name: str) -> bool:
    """Whether ``obj`` has attribute ``name``, found without running any of its code: no
    ``__getattr__`` (a mock would grow a child, a proxy raise outside its context, a
    mark generator warn), no property."""
    for cls in type(obj).__mro__:
        if name in cls.__dict__:
            return True
    try:
        d = object.__getattribute__(obj, "__dict__")
    except Exception:
        return False
    return isinstance(d, dict) and name in d


def _is_lru_cache(obj: object) -> bool:
    return callable(obj) and _has_static(obj, "cache_info") and _has_static(obj, "cache_clear")


class Unrestorable:
    """An object isolator can see but not snapshot (C-level state, iterators...).

    It is checked through a cheap fingerprint; a change is reported, never silently shared.
    """

    __slots__ = ("site", "obj", "fingerprint", "kind", "rebuild")

    def __init__(self, site: str, obj: object, fingerprint: Callable[[object], object], kind: str):
        self.site = site
        self.obj = obj
        self.fingerprint = fingerprint
        self.kind = kind
        # A new object in the state ``obj`` was in at the baseline (see _rebuilder), or None.
        self.rebuild: Callable[[], object] | None = _rebuilder(obj)


def key_repr(k: object) -> str:
    """``repr(k)`` for a site name (a dict key's); a key whose own ``__repr__`` raises
    (astroid's nodes, asked while half built) is named as ``object.__repr__`` names it."""
    try:
        return repr(k)
    except Exception:
        return object.__repr__(k)


def _rebuilder(obj: object) -> Callable[[], object] | None:
    """For an ``itertools.count`` (an id or sequence counter: boltons numbers the functions
    it compiles), a function making a new counter where this one is now; None for others.
    A counter cannot be set back in place; the name holding it is bound to the new one."""
    if type(obj) is not itertools.count:
        return None
    text = repr(obj)  # count(5) or count(5, 2): its position and step
    if not (text.startswith("count(") and text.endswith(")")):
        return None
    try:
        args = ast.literal_eval(f"({text[6:-1]},)")
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not all(type(a) in (int, float) for a in args):
        return None
    return lambda: itertools.count(*args)


def rebind_site(site: str, old: object, new: object) -> tuple[Any, Any] | None:
    """Bind what holds ``old`` at ``site`` (``mod:name``, ``.attr`` and ``[key]`` steps, as
    the walk names them) to ``new``; returns the holder (a module, class, instance or
    dict) and the name or key, or None when the site does not lead to ``old`` (nothing is
    changed then)."""
    modname, _, rest = site.partition(":")
    holder: Any = sys.modules.get(modname)
    steps = re.findall(r"\.?([A-Za-z_]\w*)|\[([^\]]*)\]", rest)
    if holder is None or not steps:
        return None
    try:
        path: list[tuple[bool, Any]] = []
        for name, key in steps:
            if name:
                path.append((True, name))
            else:
                path.append((False, ast.literal_eval(key)))
        for is_attr, step in path[:-1]:
            holder = getattr(holder, step) if is_attr else holder[step]
        is_attr, last = path[-1]
        if is_attr:
            if holder.__dict__.get(last) is not old:
                return None
            setattr(holder, last, new)
        else:
            if not isinstance(holder, dict) or holder.get(last) is not old:
                return None
            holder[last] = new
    except Exception:
        return None
    return holder, last


def _opaque_fingerprint(obj: object) -> Callable[[object], object] | None:
    """A cheap function whose value changes when ``obj``'s hidden state changes, or None."""
    if isinstance(obj, (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)):

        def gen_fp(o: Any) -> object:
            frame = getattr(o, "gi_frame", None) or getattr(o, "cr_frame", None)
            return -1 if frame is None else frame.f_lasti

        return gen_fp
    if isinstance(obj, io.IOBase):
        # A file or stream: closing it cannot be undone (its position moves with every
        # write to a log: not counted).
        return _closed
    if hasattr(type(obj), "__length_hint__") and hasattr(type(obj), "__next__"):
        return operator.length_hint
    if callable(getattr(type(obj), "locked", None)):
        return lambda o: o.locked()  # type: ignore[attr-defined]
    if hasattr(type(obj), "__next__"):
        # itertools.count and friends show their position in their repr.
        r = repr(obj)
        if " at 0x" not in r:
            return repr
        # Others (chain, map, zip, filter, islice) tell it only to pickle: what their
        # __reduce__ gives, with the iterators they hold told the same way.
        if _reduced(obj) is not None:
            return _reduced
    return None


def _closed(obj: Any) -> object:
    return bool(obj.closed)


_SCALARS: Final = (int, float, str, bytes, bool, type(None))


def _reduced(obj: object) -> object:
    """An iterator's position as its ``__reduce__`` tells it (None: it does not)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (itertools' pickling: deprecated in 3.12)
            return _reduced_parts(obj, 0)
    except Exception:
        return None


def _reduced_parts(obj: object, depth: int) -> object:
    if type(obj) in _SCALARS:
        return obj
    if type(obj) is tuple:
        return tuple(_reduced_parts(x, depth) for x in obj)
    if depth < 4 and hasattr(type(obj), "__next__"):
        got = obj.__reduce__()
        if type(got) is tuple:
            return (id(got[0]), *(_reduced_parts(x, depth + 1) for x in got[1:]))
    return id(obj)  # anything else by identity: a held list, a function


_UNSEEN: Final = 2**64 - 1  # in a table's tag image: a tag no dict has (a 64-bit counter)
_UNSEEN_BYTES: Final = b"\xff" * 8


class SeenBeside(set[int]):
    """The objects a new table walked, seen together with those other tables watch (their
    own sets, read where they are): a project module a test imports is snapshotted
    beside a baseline of a hundred thousand objects, which a copy per import would cost
    milliseconds to make.  The other sets only grow (a learned entry's objects join its
    table's): what they hold later is watched there, and stays out of this table too.
    Of another SeenBeside only its own part is read: what it reads beside is watched
    by the tables themselves."""

    __slots__ = ("others",)

    def __init__(self, others: list[set[int]]):
        super().__init__()
        self.others = others

    def __contains__(self, x: object) -> bool:
        return set.__contains__(self, x) or any(
            map(set.__contains__, self.others, itertools.repeat(x))
        )


class StateTable:
    """Watches over the state of a set of modules; see the module docstring for the shape."""

    def __init__(self, seen: set[int] | None = None, owners: dict[int, str] | None = None) -> None:
        self.lives: list[Any] = []
        self.snaps: list[Any] = []
        self.sites: list[str] = []
        self.kinds: list[int] = []
        # The class for CLASS watches; for a DICT, what to call after restoring it (a
        # singledispatch registry: its dispatch cache's clear); else None.
        self.owners: list[Any] = []
        self.depths: list[int] = []  # walk depth of each watch (-1: module globals)
        self._depth = 0
        self._imported: frozenset[str] = frozenset()
        self.caches: list[tuple[str, Any, int]] = []  # (site, lru wrapper, baseline size)
        # Cache index -> the entries learned into its baseline (key -> value): an unbounded
        # cache's restore then removes only the others (see restore_cache).
        self.cache_base: dict[int, dict[Any, Any]] = {}
        # Caches whose entries were learned (a pure function's, or declared in `keep`):
        # an entry computed again is the same value, so their plain count is checked
        # (one C call), where the others' learned entries are checked one by one.
        self.cache_pure: set[int] = set()
        self.cells: list[tuple[str, Any, object]] = []  # (site, cell, baseline contents)
        self.defaults: list[tuple[str, Any, object, object]] = []  # (site, fn, defaults, kw)
        # The functions watched and their code: a function may replace its __code__
        # (networkx's argmap compiles itself on first call).  (site, fn, code)
        self.codes: list[tuple[str, Any, Any]] = []
        self.opaque: list[Unrestorable] = []
        self.opaque_fps: list[object] = []
        self.truncated: list[str] = []  # sites not fully watched because they are too large
        # (site, why): values whose walk raised (their own code ran and failed); not watched
        self.unwalkable: list[tuple[str, str]] = []
        self._site_set: tuple[int, set[str]] | None = None
        self._seen: set[int] = set() if seen is None else seen
        # id -> the module whose table watches it, for the objects in ``_seen`` (shared
        # like it): an object this table reaches but another watches makes that module
        # one this module refers to (see _walk).
        self._owners: dict[int, str] = {} if owners is None else owners
        self._keepalive: list[object] = []
        self.modname = ""
        self.refs: set[str] = set()  # modules this module's globals refer to
        # Of those, the modules of its functions, classes and other objects (not modules
        # bound as globals): what a package re-exports from its submodules.
        self.obj_refs: set[str] = set()
        # Version-tag split (see _versions), made on first use: watches checked through
        # their dict's tag (``vidx``, with ``vcells`` and the tags last verified equal to
        # the snapshot, ``vers``; -1 = not verified) and watches compared (``cidx``).
        self.vidx: list[int] | None = None
        self.vcells: list[Any] = []
        self.vers: list[int] = []
        # The same tags as raw bytes (``vviews``: each cell's memory; ``vimage``: ``vers``
        # laid end to end, an unverified tag as all ones): ``b"".join(vviews) == vimage`` reads
        # and compares every tag in one C call (see ``_versions``).
        self.vviews: list[memoryview] = []
        self.vimage = bytearray()
        self.cidx: list[int] = []
        self._cidx_subclassed: bool | None = None  # see dirty_watches (None: not known)
        self.slots: _SlotCheck | None = None  # the slot-only objects' watches, if any
        self._parts: Parts | None = None  # see parts()
        self.segs: tuple[Parts, tuple[list[Any], ...]] | None = None  # (see _reach)

    # ---------------------------------------------------------------- building

    def add_module(
        self,
        module: types.ModuleType,
        project_prefixes: tuple[str, ...],
        imported: frozenset[str] = frozenset(),
    ) -> None:
        """Watch a module's globals and everything mutable reachable from them.

        ``imported`` names are bound by ``from other import NAME``: their objects belong to
        (and are named after) the module that defines them.
        """
        name = module.__name__
        self.modname = name
        mdict = module.__dict__
        if id(mdict) in self._seen:
            return
        self._seen.add(id(mdict))
        self._owners[id(mdict)] = name
        for value in list(mdict.values()):
            cls = type(value)
            # (By the object's real type: isinstance() asks an object's own __class__,
            # which a lazy object computes, and may raise: django's unconfigured settings.)
            if issubclass(cls, types.ModuleType):
                name_of = value.__dict__.get("__name__")
                if isinstance(name_of, str):
                    self.refs.add(name_of)
                continue
            try:
                ref = (
                    getattr(value, "__module__", None)
                    if issubclass(cls, (type, types.FunctionType))
                    else getattr(cls, "__module__", None)
                )
            except Exception:
                continue
            if isinstance(ref, str):
                self.refs.add(ref)
                self.obj_refs.add(ref)
        self._depth = -1
        self._watch(f"{name}:<globals>", mdict, dict(mdict), MODULE, None)
        self._imported = imported
        budget = [_MAX_WATCHES_PER_MODULE]
        for key, value in list(mdict.items()):
            if (
                type(value) in _IMMUTABLE_EXACT
                or key in _SKIP_NAMES
                or key in imported
                or issubclass(type(value), _SKIP_GLOBALS)
            ):
                continue
            if type(value) is types.FunctionType and _BARE(value) == _NOTHING:
                self.codes.append((f"{name}:{key}", value, value.__code__))
                # A function without defaults, closure or attributes (most test functions)
                # has nothing to watch: skipped before its site name is formatted.
                continue
            self._walk_guarded(f"{name}:{key}", value, name, project_prefixes, 0, budget)

    def add_value(self, site: str, value: Any, project_prefixes: tuple[str, ...]) -> None:
        """Watch one object and what is mutable in it, named ``site`` (a higher-scoped
        fixture's value: ``<fixture>:doctest_namespace``)."""
        self.modname = site.partition(":")[0]
        self._walk_guarded(
            site, value, self.modname, project_prefixes, 0, [_MAX_WATCHES_PER_MODULE]
        )

    def _walk_guarded(
        self,
        site: str,
        value: Any,
        modname: str,
        prefixes: tuple[str, ...],
        depth: int,
        budget: list[int],
    ) -> None:
        """Walk one value; code of the project's objects that runs during the walk (an
        ``__iter__``, a ``__repr__``, a warning turned into an error) may raise: what was
        watched before that stays watched, and the site is reported."""
        try:
            self._walk(site, value, modname, prefixes, depth, budget)
        except Exception as exc:
            self.unwalkable.append((site, f"{type(exc).__name__}: {exc}"[:200]))

    def site_set(self) -> set[str]:
        """The watched sites, as a set (rebuilt when watches were added)."""
        cached = self._site_set
        if cached is None or cached[0] != len(self.sites):
            cached = self._site_set = (len(self.sites), set(self.sites))
        return cached[1]

    def _watch(self, site: str, live: Any, snap: Any, kind: int, owner: Any) -> None:
        self.depths.append(self._depth)
        self.lives.append(live)
        self.snaps.append(snap)
        self.sites.append(site)
        self.kinds.append(kind)
        self.owners.append(owner)

    def _walk(
        self,
        site: str,
        value: Any,
        modname: str,
        prefixes: tuple[str, ...],
        depth: int,
        budget: list[int],
    ) -> None:
        if type(value) in _IMMUTABLE_EXACT or isinstance(value, _IMMUTABLE) or depth > _MAX_DEPTH:
            return
        self._depth = depth
        if isinstance(value, tuple):
            for i, item in enumerate(value):
                if type(item) not in _IMMUTABLE_EXACT and not isinstance(item, _IMMUTABLE):
                    self._walk(f"{site}[{i}]", item, modname, prefixes, depth + 1, budget)
            return
        vid = id(value)
        if vid in self._seen:
            # Watched by another module's table (walked first, or bound there by name): a
            # test that reaches this module reaches that state too (a borg's shared dict
            # behind a manager instance of another module).
            watcher = self._owners.get(vid)
            if watcher is not None and watcher != self.modname:
                self.refs.add(watcher)
            return
        if budget[0] <= 0 and depth > 0:
            # (A module's own globals are watched whatever the budget: a huge table must
            # not hide the list defined after it.)
            self.truncated.append(site)
            return
        self._seen.add(vid)
        self._owners[vid] = self.modname
        self._keepalive.append(value)
        budget[0] -= 1
        cls = type(value)
        if cls is types.FunctionType:
            # Most values walked are functions: straight to their own walk (the checks
            # below find them only after a dozen isinstance() calls).
            if _is_project(getattr(value, "__module__", None), prefixes):
                self._walk_function(site, value, modname, prefixes, depth, budget)
            return
        if cls not in _PLAIN_CONTAINERS and isinstance(value, _CONTAINERS):
            # A container of a project class: its class is state too when made at run time
            # (a class defined in a function, whose methods' closures fill the container
            # lazily), where no module global leads to it.
            self._walk(f"{site}.__class__", cls, modname, prefixes, depth + 1, budget)
        if isinstance(value, types.ModuleType):
            # A module object of a project class (lazy modules like six.moves) keeps its
            # state in its __dict__; plain modules are tracked as modules of their own.
            if type(value) is not types.ModuleType and _is_project(
                getattr(type(value), "__module__", None), prefixes
            ):
                self._watch(site, value.__dict__, dict(value.__dict__), INSTANCE, None)
            elif made_module(value):
                # A module object that code made and filled, never imported (html5lib's
                # tree builders, held by a memo): no table of its own tracks it.
                d = value.__dict__
                self._watch(site, d, dict(d), INSTANCE, None)
                for k, v in list(d.items())[:_MAX_ELEMENTS_PER_CONTAINER]:
                    if type(v) not in _IMMUTABLE_EXACT and not isinstance(v, _IMMUTABLE):
                        self._walk(f"{site}.{k}", v, modname, prefixes, depth + 1, budget)
            return
        if isinstance(value, dict):
            if len(value) > _MAX_ELEMENTS_PER_CONTAINER:
                self.truncated.append(site)
            # An OrderedDict's move_to_end() moves no version tag: it is compared with an
            # OrderedDict snapshot (order-sensitive) instead of checked by tag.
            ordered = isinstance(value, collections.OrderedDict)
            # (dict's own copy and items: a subclass's are the project's code.)
            snap = collections.OrderedDict(value) if ordered else dict.copy(value)
            self._watch(site, value, snap, DICT, None)
            # Immutable values are skipped before their site name is formatted.
            for k, v in list(dict.items(value))[:_MAX_ELEMENTS_PER_CONTAINER]:
                if type(v) not in _IMMUTABLE_EXACT and not isinstance(v, _IMMUTABLE):
                    self._walk(f"{site}[{key_repr(k)}]", v, modname, prefixes, depth + 1, budget)
            return
        if isinstance(value, list):
            # (list's own slicing, for the snapshot too: a subclass may index by name, as
            # EntryPoints does, or fill itself when first iterated, as pytz's LazyList.)
            self._watch(site, value, _list_of(value), LIST, None)
            for i, v in enumerate(list.__getitem__(value, slice(_MAX_ELEMENTS_PER_CONTAINER))):
                if type(v) not in _IMMUTABLE_EXACT and not isinstance(v, _IMMUTABLE):
                    self._walk(f"{site}[{i}]", v, modname, prefixes, depth + 1, budget)
            return
        if isinstance(value, (set,)):
            self._watch(site, value, set(value), SET, None)
            return
        if isinstance(value, bytearray):
            self._watch(site, value, _bytes_of(value), BYTEARRAY, None)
            return
        if isinstance(value, collections.deque):
            held = _deque_of(value)
            self._watch(site, value, held, DEQUE, None)
            for i, v in enumerate(list(held)[:_MAX_ELEMENTS_PER_CONTAINER]):
                self._walk(f"{site}[{i}]", v, modname, prefixes, depth + 1, budget)
            return
        if isinstance(value, array):
            self._watch(site, value, array(value.typecode, value), ARRAY, None)
            return
        if isinstance(value, type):
            if not _is_project(getattr(value, "__module__", None), prefixes):
                return
            owner: Any = value
            if not issubclass(cls, type):
                # A proxy standing for a class (wrapt's ObjectProxy, @synchronized on a
                # class, forwards __class__ and __dict__): the class it wraps is put back;
                # without one to name, the proxy (which forwards attribute writes).
                wrapped = getattr(value, "__wrapped__", None)
                if issubclass(type(wrapped), type):
                    owner = wrapped
            proxy = owner.__dict__
            self._watch(site, proxy, dict(proxy), CLASS, owner)
            for k, v in list(proxy.items()):
                if type(v) is staticmethod or type(v) is classmethod:
                    inner: Any = v.__func__
                    if _is_lru_cache(inner):
                        # ``@classmethod`` over ``@lru_cache``: a memo like a module's own,
                        # whose entries a test learned from state it changed.
                        self._walk(f"{site}.{k}", inner, modname, prefixes, depth + 1, budget)
                        continue
                    # Nothing to watch in it, but its function may replace its code.
                    if type(inner) is types.FunctionType and _is_project(
                        inner.__module__, prefixes
                    ):
                        self.codes.append((f"{site}.{k}", inner, inner.__code__))
                    continue
                if type(v) in _IMMUTABLE_EXACT or k in _SKIP_NAMES or isinstance(v, _IMMUTABLE):
                    continue
                self._walk(f"{site}.{k}", v, modname, prefixes, depth + 1, budget)
            return
        if isinstance(value, (types.FunctionType, types.MethodType)):
            fn: Any = value.__func__ if isinstance(value, types.MethodType) else value
            if not _is_project(getattr(fn, "__module__", None), prefixes):
                return
            self._walk_function(site, fn, modname, prefixes, depth, budget)
            return
        if _is_lru_cache(value):
            wrapped = getattr(value, "__wrapped__", None)
            # A library's cache that project code refers to (``from urllib.parse import
            # urlsplit``) is library state, as it is when reached through its own module.
            if not _is_project(getattr(wrapped or value, "__module__", None), prefixes):
                return
            try:
                size = value.cache_info().currsize
            except Exception:
                return
            entries = cache_dict(value) if size else None
            if entries is not None:
                # Entries there at the baseline (computed at import or collection): an
                # unbounded cache gets exactly them back after each test that changed it.
                self.cache_base[len(self.caches)] = dict(entries)
                size = 0  # (its sizer counts the entries beside them)
            self.caches.append((site, value, size))
            if isinstance(wrapped, types.FunctionType):
                self._walk_function(site, wrapped, modname, prefixes, depth, budget)
            return
        if isinstance(value, functools.partial):
            self._walk(site, value.args, modname, prefixes, depth + 1, budget)
            self._walk(site, value.keywords, modname, prefixes, depth + 1, budget)
            return
        if isinstance(value, contextvars.ContextVar):
            # Its value in the context the tests run in: a test's var.set() outlives it.
            self._watch(site, _VarView(value), _VarView(value).values(), _VIEW, None)
            return
        if isinstance(value, _thread._local):
            # The running thread's attributes (tests run in the main thread), and what they
            # hold, as an instance's (a subclass's __init__ fills a list per thread).
            idict = getattr(value, "__dict__", None)
            if type(idict) is dict:
                self._watch(site, idict, dict(idict), INSTANCE, None)
                if depth <= _INSTANCE_VALUES_DEPTH:
                    for k, v in list(idict.items()):
                        if type(v) not in _IMMUTABLE_EXACT and not isinstance(v, _IMMUTABLE):
                            self._walk(f"{site}.{k}", v, modname, prefixes, depth + 1, budget)
            return
        if isinstance(value, _WEAK_CONTAINERS):
            # A weak cache of canonical instances: the entries a test added must go, or the
            # next test is handed an earlier test's object (which a fresh process would
            # build anew).  Its ``data`` holds the weak references: watching them keeps no
            # object alive.
            data = getattr(value, "data", None)
            if type(data) is dict:
                self._watch(site, data, dict(data), DICT, None)
            elif type(data) is set:
                self._watch(site, data, set(data), SET, None)
            return
        cls = type(value)
        if isinstance(value, threading.Thread):
            # Its attributes are the threading machinery's, changing as the thread runs;
            # a thread left running is checked (and reported) as such.
            return
        if _is_random(cls):
            # A generator's state is no attribute: watched through getstate().
            self._watch(site, _RandomView(value), _RandomView(value).values(), _VIEW, None)
            return
        if _derives(cls, "asyncio", "AbstractEventLoop"):
            # A loop the tests share (a session fixture's): its settings, not its machinery.
            self._watch(site, _LoopView(value), _LoopView(value).values(), _VIEW, None)
            return
        if _derives(cls, "ssl", "SSLContext"):
            # A session fixture's TLS context that one test makes stricter (verify_mode).
            self._watch(site, _SSLView(value), _SSLView(value).values(), _VIEW, None)
            return
        if (
            cls is not types.SimpleNamespace
            and not _is_project(getattr(cls, "__module__", None), prefixes)
            and not _plain_data(cls)
        ):
            # Instances of library classes (loggers, sessions, compiled objects) are the
            # library's state; following them would watch half the interpreter.
            fp = _opaque_fingerprint(value)
            if fp is not None and (
                isinstance(value, io.IOBase) or not _has_static(value, "__dict__")
            ):
                self._add_opaque(site, value, fp)
            return
        if depth > _MAX_INSTANCE_DEPTH:
            return  # objects deep inside containers are seen through their container only
        idict = _instance_dict(value, cls)
        if isinstance(idict, dict):
            # Enum members and other framework objects are immutable in practice; their
            # classes are watched instead.
            if _is_enum(cls):
                return
            self._watch(site, idict, dict(idict), INSTANCE, None)
            self._watch_class_of(site, value, cls)
            if depth > _INSTANCE_VALUES_DEPTH:
                # Deep down, its attributes (one version tag) but not what they hold: a
                # rebound or added attribute is seen (a cached_property filled on first
                # use), a list mutated in place is not, as compared lists cost a pass
                # over their items after every test.
                return
            # A standard-library wrapper's own container (a ChainMap's maps, a UserDict's
            # data) is no level of the project's structure: what it holds is walked as
            # if the wrapper were that container (glom's registry, in its default scope).
            inner = depth if _plain_data(cls) else depth + 1
            for k, v in list(idict.items()):
                if type(v) not in _IMMUTABLE_EXACT and not isinstance(v, _IMMUTABLE):
                    self._walk(f"{site}.{k}", v, modname, prefixes, inner, budget)
            slots = _slot_names(cls)
            if slots:  # (slots beside a __dict__: a slotted base class)
                self._watch_slots(site, value, slots, modname, prefixes, depth, budget)
            return
        slots = _slot_names(type(value))
        if slots:
            self._watch_slots(site, value, slots, modname, prefixes, depth, budget)
            self._watch_class_of(site, value, cls)
            return
        fp = _opaque_fingerprint(value)
        if fp is not None:
            self._add_opaque(site, value, fp)

    def _watch_slots(
        self,
        site: str,
        value: object,
        slots: tuple[str, ...],
        modname: str,
        prefixes: tuple[str, ...],
        depth: int,
        budget: list[int],
    ) -> None:
        """An object's slots: watched through a tuple of their values, and what they hold
        walked as an instance's attributes are (a ``dataclass(slots=True)`` or attrs
        ``@define`` registry whose list a test appends to)."""
        view = _SlotView(value, slots)
        values = view.values()
        self._watch(site, view, values, LIST, None)
        self.kinds[-1] = _SLOTS
        if depth > _INSTANCE_VALUES_DEPTH:
            return
        for name, v in zip(slots, values):
            if v is _EMPTY or type(v) in _IMMUTABLE_EXACT or isinstance(v, _IMMUTABLE):
                continue
            self._walk(f"{site}.{name}", v, modname, prefixes, depth + 1, budget)

    def _watch_class_of(self, site: str, value: object, cls: type) -> None:
        """An instance's class: ``obj.__class__ = Other`` (by a test, or by the object
        itself on first use, as lazy objects turn into what they stand for) is put back
        with its attributes.  Watched as a closure cell is (see _ClassOf)."""
        self.cells.append((f"{site}.__class__", _ClassOf(value), cls))

    def _add_opaque(self, site: str, value: object, fp: Callable[[object], object]) -> None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.opaque_fps.append(fp(value))
        except Exception:
            return
        self.opaque.append(Unrestorable(site, value, fp, type(value).__name__))

    def _walk_function(
        self,
        site: str,
        fn: types.FunctionType,
        modname: str,
        prefixes: tuple[str, ...],
        depth: int,
        budget: list[int],
    ) -> None:
        self.codes.append((site, fn, fn.__code__))
        if fn.__defaults__ or fn.__kwdefaults__:
            self.defaults.append((site, fn, fn.__defaults__, fn.__kwdefaults__))
            for i, d in enumerate(fn.__defaults__ or ()):
                self._walk(f"{site}.__defaults__[{i}]", d, modname, prefixes, depth + 1, budget)
            for k, d in (fn.__kwdefaults__ or {}).items():
                self._walk(
                    f"{site}.__kwdefaults__[{key_repr(k)}]", d, modname, prefixes, depth + 1, budget
                )
        if fn.__closure__:
            names = fn.__code__.co_freevars
            stored = _stored_free_names(fn.__code__)
            for cname, cell in zip(names, fn.__closure__):
                try:
                    contents = cell.cell_contents
                except ValueError:
                    contents = _EMPTY
                csite = f"{site}.<closure>.{cname}"
                # A cell is rebound only by code that stores it (``nonlocal``): one this
                # function only reads is watched when a function that stores it is walked
                # (generated test functions hold thousands of read-only cells).
                if cname in stored and id(cell) not in self._seen:
                    self._seen.add(id(cell))
                    self.cells.append((csite, cell, contents))
                if contents is not _EMPTY:
                    self._walk(csite, contents, modname, prefixes, depth + 1, budget)
        fdict = fn.__dict__
        if fdict:
            # Function attributes (counters, registries hung on a function).
            self._depth = depth
            self._watch(site, fdict, dict(fdict), INSTANCE, None)
            registry, clear = fdict.get("registry"), fdict.get("_clear_cache")
            if type(registry) is types.MappingProxyType and callable(clear):
                # functools.singledispatch: implementations a test registers live in the
                # dict behind the read-only proxy, and its dispatch cache must forget them.
                for d in gc.get_referents(registry):
                    if type(d) is dict and id(d) not in self._seen:
                        self._seen.add(id(d))
                        self._watch(f"{site}.registry", d, dict(d), DICT, clear)
            for k, v in list(fdict.items()):
                if k != "__wrapped__" and k != "registry":
                    self._walk(f"{site}.{k}", v, modname, prefixes, depth + 1, budget)

    # ---------------------------------------------------------------- checking

    def copy_of(self, i: int) -> Any:
        """A new snapshot of watch ``i``'s live object, as the baseline takes one."""
        kind, live = self.kinds[i], self.lives[i]
        if kind in _TAGGED_KINDS:
            ordered = isinstance(live, collections.OrderedDict)
            live = as_read(live)  # (a dict subclass's contents, read as dict reads them)
            return collections.OrderedDict(live) if ordered else dict(live)
        if kind == LIST:
            return _list_of(live)
        if kind == DEQUE:
            return _deque_of(live)
        if kind == SET:
            return set(live)
        if kind == BYTEARRAY:
            return _bytes_of(live)
        if kind == ARRAY:
            return array(live.typecode, live)
        if kind == _SLOTS or kind == _VIEW:
            return live.values()
        return self.snaps[i]

    def absorb(
        self,
        idx: list[int],
        extras: tuple[list[int], list[int], list[int], list[int]],
        prefixes: tuple[str, ...],
        keep_out: dict[int, set[Any]] | None = None,
    ) -> None:
        """Make the current contents of the dirty watches ``idx`` and dirty ``extras`` the
        baseline (a higher-scoped fixture set them up), with new snapshot objects (a
        fixture frame may hold the old ones), and watch the mutable objects newly bound
        there.  Costs what changed, where rebuilding the table walks the whole module.
        ``keep_out``: per mapping watch, keys whose baseline stays as it was (an earlier
        test's writes, kept for the test whose set-up runs the fixture)."""
        budget = [_MAX_WATCHES_PER_MODULE]
        fresh: list[tuple[str, int, Any]] = []
        for i in idx:
            kind, live, old, site, depth = (
                self.kinds[i],
                self.lives[i],
                self.snaps[i],
                self.sites[i],
                self.depths[i],
            )
            snap = self.snaps[i] = self.copy_of(i)
            if kind in _TAGGED_KINDS:
                out = keep_out.get(i, ()) if keep_out else ()
                for k in out:
                    if k in old:
                        snap[k] = old[k]
                    else:
                        snap.pop(k, None)
                live = as_read(live)
                for k in _diff_keys(live, old):
                    if k not in live or (isinstance(k, str) and k in _SKIP_NAMES) or k in out:
                        continue
                    v = live[k]
                    if kind == MODULE and (k in self._imported or isinstance(v, types.ModuleType)):
                        continue
                    fresh.append((*self._entry_site(i, k), v))
            elif kind == LIST:
                fresh += [(site, depth + 1, v) for v in snap[:_MAX_ELEMENTS_PER_CONTAINER]]
            elif kind == DEQUE:
                fresh += [(site, depth + 1, v) for v in list(snap)[:_MAX_ELEMENTS_PER_CONTAINER]]
        caches, cells, defaults, opaque = extras
        for j in opaque:
            # What a fixture did to an object seen through a fingerprint is its baseline.
            u = self.opaque[j]
            try:
                self.opaque_fps[j] = u.fingerprint(u.obj)
            except Exception:
                pass
            u.rebuild = _rebuilder(u.obj)
        for j in caches:
            site, fn, _ = self.caches[j]
            entries = cache_dict(fn)
            if entries is not None:
                self.cache_base[j] = dict(entries)  # (a new dict: the frame keeps the old)
            self.caches[j] = (site, fn, len(self._cache_sizer(j)))
        for j in cells:
            site, cell, _ = self.cells[j]
            contents = _cell_get(cell)
            self.cells[j] = (site, cell, contents)
            if contents is not _EMPTY:
                fresh.append((site, 1, contents))
        for j in defaults:
            site, fn, _, _ = self.defaults[j]
            self.defaults[j] = (site, fn, fn.__defaults__, fn.__kwdefaults__)
            for n, d in enumerate(fn.__defaults__ or ()):
                fresh.append((f"{site}.__defaults__[{n}]", 1, d))
        watched = len(self.lives)
        for site, depth, value in fresh:
            self._walk_guarded(site, value, self.modname, prefixes, depth, budget)
        if len(self.lives) != watched or self.vidx is None:
            self.vidx = None  # sorted again on next use (new tag cells, views, slot checks)
        else:
            self.forget_versions()  # same watches: only the snapshots are new
        self.changed()

    def _entry_site(self, i: int, k: Any) -> tuple[str, int]:
        """The site and walk depth of entry ``k`` of mapping watch ``i`` (a module's name,
        a dict's key, an object's or a class's attribute), as the baseline walk names it."""
        kind, site, depth = self.kinds[i], self.sites[i], self.depths[i]
        if kind == MODULE:
            return f"{self.modname}:{k}", 0
        if kind == DICT:
            return f"{site}[{key_repr(k)}]", depth + 1
        return f"{site}.{k}", depth + 1

    def walk_cost(self, value: Any, depth: int, prefixes: tuple[str, ...], limit: int) -> int:
        """About how many watches :meth:`watch_kept` would add for ``value`` entered at
        ``depth``: the containers and project objects in it not watched yet, as the walk
        finds them (within its depth bounds).  Counting stops past ``limit``.  What a
        learned memo entry costs every later check, known before it is learned."""
        if type(value) in _IMMUTABLE_EXACT:
            return 0  # (most memo values: a number, a string, a date)
        seen = self._seen
        counted: set[int] = set()
        n = 0
        todo: list[tuple[Any, int]] = [(value, depth)]
        pop, push = todo.pop, todo.extend
        while todo:
            v, d = pop()
            cls = type(v)
            if cls in _IMMUTABLE_EXACT or d > _MAX_DEPTH or isinstance(v, _IMMUTABLE):
                continue
            if isinstance(v, tuple):
                push([(x, d + 1) for x in v])
                continue
            vid = id(v)
            if vid in seen or vid in counted:
                continue
            counted.add(vid)
            inside: list[Any] = []
            if isinstance(v, dict):
                inside = list(v.values())[:_MAX_ELEMENTS_PER_CONTAINER]
            elif isinstance(v, (list, collections.deque)):
                inside = list(v)[:_MAX_ELEMENTS_PER_CONTAINER]
            elif isinstance(v, (set, bytearray, array, type)) or cls is types.FunctionType:
                pass  # (one watch, or a project class's or function's own walk)
            elif isinstance(v, types.ModuleType):
                if not made_module(v):
                    continue  # an imported module: a table of its own
                inside = list(v.__dict__.values())[:_MAX_ELEMENTS_PER_CONTAINER]
            elif d > _MAX_INSTANCE_DEPTH or not _is_project(
                getattr(cls, "__module__", None), prefixes
            ):
                continue  # a library's object: not followed
            else:
                idict = _instance_dict(v, cls)
                if type(idict) is dict and d <= _INSTANCE_VALUES_DEPTH:
                    inside = list(idict.values())
            n += 1
            if n > limit:
                break
            push([(x, d + 1) for x in inside])
        return n

    def watch_kept(
        self, i: int | str, pairs: list[tuple[Any, Any]], prefixes: tuple[str, ...]
    ) -> None:
        """Watch the mutable objects held by entries that joined watch ``i``'s baseline
        after it was taken (memo entries learned; ``i`` a site: a memo cache's): what a
        later test changes inside them is put back like the rest of the baseline, not
        left to the tests after it."""
        budget = [_MAX_WATCHES_PER_MODULE]
        watched = len(self.lives)
        for k, v in pairs:
            if isinstance(i, str):
                site, depth = f"{i}({key_repr(k)})", 1
            else:
                site, depth = self._entry_site(i, k)
            self._walk_guarded(site, v, self.modname, prefixes, depth, budget)
        if len(self.lives) != watched:
            self._split_more(watched)
            self.changed()

    def _split_more(self, start: int) -> None:
        """Sort the watches added from ``start`` on (appended after the split) into the
        tag-checked and compared ones: the others keep their tag cells, views and the tags
        last verified, so that the next check does not compare every dict of the table."""
        if self.vidx is None:
            return  # not split yet: split() sorts them all
        sidx = list(self.slots.idx) if self.slots is not None else []
        slots = len(sidx)
        cells: list[Any] = []
        self._sort(start, self.vidx, self.cidx, sidx, cells)
        if cells:
            self.vcells += cells
            self.vviews += [memoryview(c).cast("B") for c in cells]
            self.vers += [-1] * len(cells)
            views_epoch[0] += 1
            self._sync_image()
        if len(sidx) != slots:
            self.slots = _SlotCheck(self, sidx)

    def _sort(
        self, start: int, vidx: list[int], cidx: list[int], sidx: list[int], cells: list[Any]
    ) -> None:
        """Append the watches from ``start`` on to the tag-checked (``vidx``, with their
        tag ``cells``), compared (``cidx``) or slot-checked (``sidx``) ones."""
        kinds, lives = self.kinds, self.lives
        for i in range(start, len(lives)):
            kind, live = kinds[i], lives[i]
            tagged = kind in _TAGGED_KINDS and not isinstance(live, collections.OrderedDict)
            cell = _versions.cell_for(live) if tagged else None
            if kind == _SLOTS:
                sidx.append(i)
            elif cell is None:
                cidx.append(i)
                self._cidx_subclassed = None
            else:
                vidx.append(i)
                cells.append(cell)

    def split(self) -> None:
        """Sort the watches into tag-checked and compared ones (once; watches are fixed
        after building)."""
        if self.vidx is not None:
            return
        vidx: list[int] = []
        cidx: list[int] = []
        sidx: list[int] = []
        cells: list[Any] = []
        self._sort(0, vidx, cidx, sidx, cells)
        self.vidx, self.cidx, self.vcells = vidx, cidx, cells
        self.vviews = [memoryview(c).cast("B") for c in cells]
        views_epoch[0] += 1
        self.vers = [-1] * len(cells)
        self._sync_image()
        self.slots = _SlotCheck(self, sidx) if sidx else None
        self.changed()

    def parts(self) -> Parts:
        """The compared watches and the extras as flat lists, in the order a scope lays
        its tables' end to end: (compared lives, their snapshots, cells, the cells' baseline
        contents, functions with defaults, their __defaults__, their __kwdefaults__, the memo
        caches' sizers (:func:`cache_sizer`), their baseline sizes).  Made again only after
        :meth:`changed`."""
        p = self._parts
        if p is None:
            self.split()
            cidx = self.cidx
            p = self._parts = (
                [self.lives[i] for i in cidx],
                [self.snaps[i] for i in cidx],
                [c for _, c, _ in self.cells],
                [old for _, _, old in self.cells],
                [fn for _, fn, _, _ in self.defaults],
                [d for _, _, d, _ in self.defaults],
                [kw for _, _, _, kw in self.defaults],
                [self._cache_sizer(j) for j in range(len(self.caches))],
                [n for _, _, n in self.caches],
            )
        return p

    def cache_changed(self, i: int) -> None:
        """Memo cache ``i``'s sizer or baseline count changed (``caches[i]`` and
        ``cache_base`` say what they are now): put in place in the parts, whose other
        lists stay (see :data:`sizes_epoch`)."""
        p = self._parts
        if p is None:
            return  # made again, with it, when next asked for
        p[7][i] = self._cache_sizer(i)
        p[8][i] = self.caches[i][2]
        sizes_epoch[0] += 1

    def changed(self) -> None:
        """A snapshot was replaced, or watches were added: :meth:`parts` are made again
        (every change to ``snaps``, ``cells``, ``defaults`` or ``caches`` other than one
        made in place inside a snapshot object must end with this call)."""
        self._parts = None
        parts_epoch[0] += 1

    def _sync_image(self) -> None:
        self.vimage = bytearray(array("Q", [_UNSEEN if v < 0 else v for v in self.vers]))
        image_epoch[0] += 1

    def forget_versions(self) -> None:
        """The snapshots changed while the live objects did not: compare before trusting
        (called once the snapshots are changed)."""
        if self.vcells:
            self.vers = [-1] * len(self.vcells)
            self._sync_image()
        if self.slots is not None:
            self.slots = _SlotCheck(self, self.slots.idx)

    def dirty_slots(self) -> list[int]:
        """Indexes of the slot-only objects' watches that differ from their snapshot."""
        self.split()
        return self.slots.dirty() if self.slots is not None else []

    def dirty_watches(self, kinds: int = ALL_KINDS) -> tuple[list[int], list[int]]:
        """Indexes of watches that differ from their snapshot, and the positions in
        ``vcells`` of those among them whose tag must be read again once they are restored.
        Tags of watches written but found equal are taken as verified.  Only the ``kinds``
        of watches that may have changed (TAGS, LIVES, SLOTS) are looked at."""
        self.split()
        out: list[int] = []
        pending: list[int] = []
        if self.vcells and kinds & TAGS:
            now = b"".join(self.vviews)
            if now != self.vimage:
                vers, image = self.vers, self.vimage
                wkinds = self.kinds
                for j in moved_entries(now, image):
                    i = self.vidx[j]  # type: ignore[index]
                    live, snap = self.lives[i], self.snaps[i]
                    if _differs(live, snap) or (wkinds[i] == DICT and _reordered(live, snap)):
                        out.append(i)
                        pending.append(j)
                        vers[j] = -1
                        image[8 * j : 8 * j + 8] = _UNSEEN_BYTES
                    else:
                        vers[j] = int.from_bytes(now[8 * j : 8 * j + 8], sys.byteorder)
                        image[8 * j : 8 * j + 8] = now[8 * j : 8 * j + 8]
                image_epoch[0] += 1
        cidx = self.cidx
        if cidx and kinds & LIVES:
            lives, snaps = self.lives, self.snaps
            odd = self._cidx_subclassed
            if odd is None:
                odd = self._cidx_subclassed = any_subclassed([lives[i] for i in cidx])
            flags: list[bool] | None = None
            if not odd:
                try:
                    # One C-level pass (a table can hold hundreds of untagged instances).
                    got, then = map(lives.__getitem__, cidx), map(snaps.__getitem__, cidx)
                    flags = list(map(bool, map(operator.ne, got, then)))
                except Exception:
                    pass  # an __eq__ raised: pair by pair below
            if flags is None:
                flags = [_differs(lives[i], snaps[i]) for i in cidx]
            out += itertools.compress(cidx, flags)
        if self.slots is not None and kinds & SLOTS:
            out += self.slots.dirty()
        out.sort()
        return out, pending

    def verified(self, pending: list[int]) -> None:
        """The watches at ``pending`` (see :meth:`dirty_watches`) equal their snapshots now."""
        image = self.vimage
        for j in pending:
            self.vers[j] = self.vcells[j].value
            image[8 * j : 8 * j + 8] = self.vviews[j]
        image_epoch[0] += 1

    def dirty_indexes(self) -> list[int]:
        """Indexes of watches whose live object differs from its snapshot (for dicts: in
        content or in order)."""
        lives, snaps = self.lives, self.snaps
        flags = ne_all(lives, snaps)
        dicts = itertools.compress(range(len(lives)), map(DICT.__eq__, self.kinds))
        reordered = {i for i in dicts if not flags[i] and _reordered(lives[i], snaps[i])}
        return [i for i, f in enumerate(flags) if f or i in reordered]

    def dirty_extras(
        self, check_defaults: bool = True, kinds: int = ALL_KINDS
    ) -> tuple[list[int], list[int], list[int], list[int]]:
        """Dirty caches, cells, defaults (unless known unchanged) and opaque objects, of
        the ``kinds`` that may have changed."""
        caches = (
            [i for i, (_, _, size) in enumerate(self.caches) if len(self._cache_sizer(i)) != size]
            if self.caches and kinds & CACHES
            else []
        )
        cells = (
            [i for i, (_, cell, old) in enumerate(self.cells) if _cell_get(cell) is not old]
            if self.cells and kinds & CELLS
            else []
        )
        defaults = (
            [
                i
                for i, (_, fn, d, kw) in enumerate(self.defaults)
                if fn.__defaults__ is not d or fn.__kwdefaults__ is not kw
            ]
            if self.defaults and check_defaults and kinds & DEFAULTS
            else []
        )
        opaque: list[int] = []
        if self.opaque and kinds & OPAQUE:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for i, u in enumerate(self.opaque):
                    try:
                        if u.fingerprint(u.obj) != self.opaque_fps[i]:
                            opaque.append(i)
                    except Exception:
                        opaque.append(i)
        return caches, cells, defaults, opaque

    def rebuild_opaque(self, i: int) -> bool:
        """Put rebuildable object ``i`` (see Unrestorable.rebuild) back: a new one in its
        baseline state bound where it was, and the snapshot of what holds it updated, so
        that the rebinding is not taken for a change.  False: cannot (nothing changed)."""
        u = self.opaque[i]
        if u.rebuild is None:
            return False
        try:
            new = u.rebuild()
        except Exception:
            return False
        if self._rebind_default(u.site, u.obj, new):
            u.obj = new
            u.rebuild = _rebuilder(new)
            return True
        where = rebind_site(u.site, u.obj, new)
        if where is None:
            return False
        holder, name = where
        target = holder if isinstance(holder, dict) else getattr(holder, "__dict__", None)
        for j, live in enumerate(self.lives):
            if live is target or (self.kinds[j] == CLASS and self.owners[j] is holder):
                snap = self.snaps[j]
                if isinstance(snap, dict) and snap.get(name, _EMPTY) is u.obj:
                    snap[name] = new
        u.obj = new
        u.rebuild = _rebuilder(new)
        return True

    def _rebind_default(self, site: str, old: object, new: object) -> bool:
        """For ``site`` naming a function's positional default (``f.__defaults__[i]``,
        glom's ``def next_id(_ids=itertools.count())``): the function gets its defaults
        with ``new`` in place of ``old``, and its watch takes them as the baseline."""
        owner, sep, rest = site.rpartition(".__defaults__[")
        if not sep or not rest.endswith("]") or not rest[:-1].isdigit():
            return False
        n = int(rest[:-1])
        for j, (fsite, fn, d, kw) in enumerate(self.defaults):
            if fsite == owner and fn.__defaults__ is d and d is not None and n < len(d):
                if d[n] is not old:
                    return False
                now = d[:n] + (new,) + d[n + 1 :]
                fn.__defaults__ = now
                self.defaults[j] = (fsite, fn, now, kw)
                self.changed()
                return True
        return False

    def changed_sites(self, i: int) -> list[str]:
        """The fine-grained sites that changed in watch ``i`` (called only when dirty)."""
        if self.kinds[i] not in _MAPPING_KINDS:
            return [self.sites[i]]
        return self.key_sites(i, _diff_keys(self.lives[i], self.snaps[i]))

    def key_sites(self, i: int, keys: list[Any]) -> list[str]:
        """The sites of mapping watch ``i`` named by the ``keys`` that differ."""
        kind = self.kinds[i]
        site = self.sites[i]
        if kind == MODULE:
            mod = site.split(":", 1)[0]
            return [f"{mod}:{k}" for k in keys if k not in _SKIP_NAMES]
        if kind == CLASS:
            return [f"{site}.{k}" for k in keys if k not in _SKIP_NAMES]
        if kind == INSTANCE:
            return [f"{site}.{k}" for k in keys]
        return [f"{site}[{key_repr(k)}]" for k in keys] if keys else [site]

    # ---------------------------------------------------------------- restoring

    def diff_keys(self, i: int) -> list[Any] | None:
        """The keys that differ between mapping watch ``i`` and its snapshot (see
        :func:`_diff_keys`), or None when they cannot be told (a key's hash or equality
        raises, or changed since it was stored)."""
        try:
            return _diff_keys(self.lives[i], self.snaps[i])
        except Exception:
            return None

    def reset(self, i: int, keys: list[Any] | None = None) -> list[str]:
        """Put watch ``i`` back (see :meth:`restore`) and return the sites that changed
        (see :meth:`changed_sites`).  A mapping is compared with its snapshot once (or
        not at all when the caller has its :meth:`diff_keys`): the keys that differ name
        the sites and are the only ones put back."""
        kind = self.kinds[i]
        if kind in _MAPPING_KINDS and keys is None:
            keys = self.diff_keys(i)
        if keys is None:
            # Not a mapping, or keys that cannot be compared: the general way.
            sites = self.changed_sites(i)
            self.restore(i)
            return sites
        sites = self.key_sites(i, keys)
        if kind == CLASS:
            _restore_class(self.owners[i], keys, self.snaps[i])
        else:
            _restore_keys(self.lives[i], self.snaps[i], keys)
            if kind == DICT and _reordered(self.lives[i], self.snaps[i]):
                # A key removed and put back went to the end; or the test only reordered.
                _restore_mapping(self.lives[i], self.snaps[i], in_order=True)
                sites = sites or [self.sites[i]]
            if self.owners[i] is not None:
                self.owners[i]()  # what derives from the dict (a dispatch cache) goes
        return sites

    def restore(self, i: int) -> None:
        """Put the snapshot back into the live object of watch ``i``, in place."""
        kind = self.kinds[i]
        live, snap = self.lives[i], self.snaps[i]
        if kind == MODULE:
            _restore_mapping(live, snap)
        elif kind == DICT or kind == INSTANCE:
            _restore_mapping(live, snap)
            if kind == DICT and _reordered(live, snap):
                _restore_mapping(live, snap, in_order=True)
            if self.owners[i] is not None:
                self.owners[i]()
        elif kind == LIST:
            # list's own methods, as object's setattr for slots: a subclass's (a
            # deprecation warning on every write, EntryPoints's) is not asked.
            list.__setitem__(live, slice(None), snap)
        elif kind == SET:
            set.clear(live)
            set.update(live, snap)
        elif kind == BYTEARRAY:
            bytearray.__setitem__(live, slice(None), snap)
        elif kind == DEQUE:
            collections.deque.clear(live)
            collections.deque.extend(live, snap)
        elif kind == ARRAY:
            array.__setitem__(live, slice(None), snap)
        elif kind == CLASS:
            _restore_class(self.owners[i], _diff_keys(live, snap), snap)
        elif kind == _SLOTS or kind == _VIEW:
            live.restore(snap)

    def restore_cache(self, i: int) -> None:
        site, fn, size = self.caches[i]
        base = self.cache_base.get(i)
        entries = cache_dict(fn) if base is not None else None
        if base is None or entries is None:
            fn.cache_clear()
            if base is not None:
                del self.cache_base[i]
                self.cache_pure.discard(i)
                self.caches[i] = (site, fn, 0)
                self.cache_changed(i)
            return
        # Only the learned entries stay (a test that emptied the cache gets them back).
        for k in [k for k in entries if k not in base]:
            del entries[k]
        for k, v in base.items():
            if entries.get(k, _EMPTY) is not v:
                entries[k] = v
        want = self.cache_baseline_size(i)
        if size != want:
            self.caches[i] = (site, fn, want)
            self.cache_changed(i)

    def cache_baseline_size(self, i: int) -> int:
        """What memo cache ``i``'s sizer gives at its baseline (see _cache_sizer)."""
        base = self.cache_base.get(i)
        if base is None:
            return _cache_size(self.caches[i][1])
        return len(base) if i in self.cache_pure else 0

    def _cache_sizer(self, i: int) -> Any:
        """Memo cache ``i``'s sizer (:func:`cache_sizer`); with learned entries, one that
        also tells when one of them is no longer the object learned."""
        fn = self.caches[i][1]
        base = self.cache_base.get(i)
        entries = cache_dict(fn) if base is not None else None
        if base is None or entries is None:
            return cache_sizer(fn)
        if i in self.cache_pure:
            return entries
        return _LearnedCache(entries, base)

    def restore_cell(self, i: int) -> None:
        _, cell, old = self.cells[i]
        if old is _EMPTY:
            try:
                del cell.cell_contents
            except ValueError:
                pass
        else:
            cell.cell_contents = old

    def dirty_codes(self) -> list[int]:
        """Indexes of the functions in ``codes`` whose ``__code__`` was replaced."""
        return [i for i, (_, fn, code) in enumerate(self.codes) if fn.__code__ is not code]

    def restore_defaults(self, i: int) -> None:
        _, fn, d, kw = self.defaults[i]
        fn.__defaults__ = d
        fn.__kwdefaults__ = kw

    def restore_changed(self) -> list[tuple[str, Exception]]:
        """What :meth:`restore_all` does, to the watches and extras that differ from their
        snapshots only.  A reinstated project module's snapshot was put back when the
        module was unloaded; usually nothing changed it since, and this is one comparison
        of version tags instead of a restore of every watch."""
        idx, pending = self.dirty_watches()
        caches, cells, defaults, _ = self.dirty_extras(True, ALL_KINDS & ~OPAQUE)
        failed: set[int] = set()
        refused = self._restore_parts(idx, caches, cells, defaults, failed)
        if pending:
            vidx = self.vidx
            self.verified([j for j in pending if vidx[j] not in failed])  # type: ignore[index]
        return refused

    def restore_all(self) -> list[tuple[str, Exception]]:
        """Restore every watch unconditionally (``--reset=full``); returns the sites whose
        objects refused (their own code raised), left as they are."""
        return self._restore_parts(
            range(len(self.lives)),
            range(len(self.caches)),
            range(len(self.cells)),
            range(len(self.defaults)),
            set(),
        )

    def _restore_parts(
        self,
        idx: Iterable[int],
        caches: Iterable[int],
        cells: Iterable[int],
        defaults: Iterable[int],
        failed: set[int],
    ) -> list[tuple[str, Exception]]:
        """Restore these watches and extras; the watches that refused go into ``failed``."""
        refused = []
        for i in idx:
            try:
                self.restore(i)
            except Exception as exc:
                refused.append((self.sites[i], exc))
                failed.add(i)
        for i in caches:
            if self.caches[i][2] == 0:
                self.restore_cache(i)
        for i in cells:
            self.restore_cell(i)
        for i in defaults:
            self.restore_defaults(i)
        return refused


_SLOTS: Final = 9
_VIEW: Final = 10  # a view of state kept elsewhere (a context variable's value); compared
_TAGGED_KINDS: Final = frozenset({MODULE, DICT, INSTANCE, CLASS})
# Watches whose reset compares keys with the snapshot (see StateTable.reset), and whose
# fixture deltas are kept per key (resetter): the same kinds as the tagged ones.
_MAPPING_KINDS: Final = _TAGGED_KINDS
_CELL = operator.attrgetter("cell_contents")
_DEFAULTS = operator.attrgetter("__defaults__")
_KWDEFAULTS = operator.attrgetter("__kwdefaults__")
_EMPTY: Final = object()


class _ClassOf:
    """An object's class seen as a closure cell's contents: its watch is a cell's (compared
    by identity with the baseline class, put back by assignment)."""

    __slots__ = ("obj",)

    def __init__(self, obj: object):
        self.obj = obj

    def _get(self) -> type:
        return type(self.obj)

    def _set(self, cls: type) -> None:
        if type(self.obj) is not cls:
            # object's own __class__ slot: a class may define __class__ as a read-only
            # property (lazy objects: dynaconf's LazySettings, Django's LazyObject).
            _OBJECT_CLASS.__set__(self.obj, cls)

    cell_contents = property(_get, _set)


_OBJECT_CLASS: Final[Any] = object.__dict__["__class__"]
_OBJECT_GET: Final = object.__getattribute__


class _Compared:
    """A live view that compares as the tuple its ``values()`` give (a watch of kind
    _SLOTS or _VIEW)."""

    __slots__ = ()

    def values(self) -> tuple[object, ...]:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return self.values() == other

    def __ne__(self, other: object) -> bool:
        return self.values() != other

    __hash__ = None  # type: ignore[assignment]


class _SlotView(_Compared):
    """A live view of an object's slot values; compares by tuple of values (``_EMPTY``
    for an unset slot)."""

    __slots__ = ("obj", "names")

    def __init__(self, obj: object, names: tuple[str, ...]):
        self.obj = obj
        self.names = names

    def values(self) -> tuple[object, ...]:
        # In C for the common case, every slot set; read as object reads them (a class's
        # __getattr__ that fills an unset slot on first use is the project's code).
        try:
            return tuple(map(_OBJECT_GET, itertools.repeat(self.obj), self.names))
        except AttributeError:
            return tuple(_slot_value(self.obj, n) for n in self.names)

    def restore(self, snap: tuple[object, ...]) -> None:
        # Through the slot descriptors, as object's own setattr: a class's __setattr__
        # (a frozen dataclass's raises) is not asked to put its old state back.
        for n, v in zip(self.names, snap):
            if v is _EMPTY:
                try:
                    object.__delattr__(self.obj, n)
                except AttributeError:
                    pass
            else:
                object.__setattr__(self.obj, n, v)


# Standard-library classes whose instances keep their state as data in their __dict__:
# a project global bound to one (glom's default scope, a ChainMap) is walked as a
# project instance is (the locks of an Event or a Queue are watched as such, and
# reported if a test leaves one held).
_PLAIN_DATA_CLASSES: Final = frozenset(
    {
        ("collections", "ChainMap"),
        ("collections", "UserDict"),
        ("collections", "UserList"),
        ("argparse", "Namespace"),
        ("threading", "Event"),
        ("configparser", "ConfigParser"),
        ("configparser", "RawConfigParser"),
        ("queue", "Queue"),
        ("queue", "LifoQueue"),
        ("queue", "PriorityQueue"),
        # asyncio's queues and synchronisation primitives: plain attributes (a deque, a
        # count, the loop bound on first use), often a higher-scoped fixture's value.
        ("asyncio.queues", "Queue"),
        ("asyncio.queues", "LifoQueue"),
        ("asyncio.queues", "PriorityQueue"),
        ("asyncio.locks", "Event"),
        ("asyncio.locks", "Lock"),
        ("asyncio.locks", "Semaphore"),
        ("asyncio.locks", "BoundedSemaphore"),
        ("asyncio.locks", "Condition"),
    }
)


def _plain_data(cls: type) -> bool:
    """Whether ``cls`` is one of the :data:`_PLAIN_DATA_CLASSES`."""
    key = (getattr(cls, "__module__", None), getattr(cls, "__qualname__", None))
    return key in _PLAIN_DATA_CLASSES


def _is_random(cls: type) -> bool:
    """A ``random.Random`` (or SystemRandom's base) made by the project: ``Random(seed)``."""
    rnd = sys.modules.get("random")
    return rnd is not None and cls is getattr(rnd, "Random", None)


class _RandomView(_Compared):
    """A ``random.Random``'s state (``getstate()``), compared by value, put back with
    ``setstate()``: a module-level generator a test draws from."""

    __slots__ = ("rng",)

    def __init__(self, rng: Any):
        self.rng = rng

    def values(self) -> tuple[object, ...]:
        return (self.rng.getstate(),)

    def restore(self, snap: tuple[object, ...]) -> None:
        if self.values() != snap:
            self.rng.setstate(snap[0])


def _derives(cls: type, module: str, name: str) -> bool:
    """Whether ``cls`` derives from ``module.name``, looked up only where ``module`` is
    imported (an object of one exists only then)."""
    base = getattr(sys.modules.get(module), name, None)
    return isinstance(base, type) and issubclass(cls, base)


class _ObjectView(_Compared):
    """A view of one object's state that is no attribute of it (see subclasses)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj


class _LoopView(_ObjectView):
    """An event loop's settings a test may change on a loop other tests use: debug mode,
    exception handler, task factory, slow-callback threshold; put back through the loop's
    setters.  Its tasks, callbacks and executor are the loop's running state (a task left
    pending is checked as such); uvloop's loops too."""

    def values(self) -> tuple[object, ...]:
        loop = self.obj
        return (
            loop.get_debug(),
            loop.get_exception_handler(),
            loop.get_task_factory(),
            getattr(loop, "slow_callback_duration", None),
        )

    def restore(self, snap: tuple[object, ...]) -> None:
        loop = self.obj
        debug, handler, factory, slow = snap
        if loop.get_debug() != debug:
            loop.set_debug(debug)
        if loop.get_exception_handler() is not handler:
            loop.set_exception_handler(handler)
        if loop.get_task_factory() is not factory:
            loop.set_task_factory(factory)
        if slow is not None and loop.slow_callback_duration != slow:
            loop.slow_callback_duration = slow


_SSL_FIELDS: Final = (
    "options",
    "minimum_version",
    "maximum_version",
    "verify_flags",
    "post_handshake_auth",
    "hostname_checks_common_name",
    "sni_callback",
    "keylog_filename",
)


class _SSLView(_ObjectView):
    """A TLS context's settings that have getters, put back through their setters; and
    the counts of certificates it trusts, which cannot be taken out again (a test that
    loads more is reported).  What has no getter (ALPN protocols, cipher lists, the
    context's own certificate) is not seen."""

    def values(self) -> tuple[object, ...]:
        ctx = self.obj
        return (
            ctx.verify_mode,
            ctx.check_hostname,
            *[getattr(ctx, name, None) for name in _SSL_FIELDS],
            ctx.cert_store_stats(),
        )

    def restore(self, snap: tuple[object, ...]) -> None:
        ctx = self.obj
        verify_mode, check_hostname, *fields, stats = snap
        # check_hostname needs verification on, and turning it on turns verification on.
        if not check_hostname and ctx.check_hostname:
            ctx.check_hostname = False
        if ctx.verify_mode != verify_mode:
            ctx.verify_mode = verify_mode
        if check_hostname and not ctx.check_hostname:
            ctx.check_hostname = True
        for name, value in zip(_SSL_FIELDS, fields):
            if getattr(ctx, name, None) != value:
                setattr(ctx, name, value)
        if ctx.cert_store_stats() != stats:
            raise ValueError("certificates loaded into a TLS context cannot be taken out")


class _VarView:
    """A context variable's value in the current context, compared by identity
    (``_EMPTY``: no value).  A value cannot be taken out of a context again: an unset
    variable is put back to its default, which then counts as unset; one without a
    default cannot be put back (raises)."""

    __slots__ = ("var", "default")

    def __init__(self, var: contextvars.ContextVar[Any]):
        self.var = var
        self.default = _var_default(var)

    def values(self) -> tuple[object, ...]:
        return (self.var.get(_EMPTY),)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, tuple) or len(other) != 1:
            return False
        now = self.var.get(_EMPTY)
        return now is other[0] or (other[0] is _EMPTY and now is self.default)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = None  # type: ignore[assignment]

    def restore(self, snap: tuple[object, ...]) -> None:
        if self.__eq__(snap):
            return  # (--reset=full restores every watch)
        old = snap[0]
        if old is _EMPTY:
            if self.default is _EMPTY:
                if not _unset_in_context(self.var):
                    raise LookupError(f"{self.var.name} had no value, and has no default")
                return
            old = self.default
        self.var.set(old)


def _var_default(var: contextvars.ContextVar[Any]) -> object:
    """A context variable's default (``_EMPTY``: none), read in an empty context."""
    try:
        return contextvars.Context().run(var.get)
    except LookupError:
        return _EMPTY


# The context _unset_in_context made the running thread's current one, if any.
_ENTERED: list[contextvars.Context] = []


def _context_api() -> Any:
    """CPython's ``PyContext_Enter`` and ``PyContext_Exit`` (None: not available)."""
    if sys.implementation.name != "cpython":
        return None
    try:
        from isolator import _cmem

        enter = _cmem.pythonapi_function("PyContext_Enter")
        leave = _cmem.pythonapi_function("PyContext_Exit")
    except (ImportError, AttributeError):
        return None
    for fn in (enter, leave):
        fn.argtypes = [_cmem.py_object]
        fn.restype = _cmem.c_int
    return enter, leave


def _unset_in_context(var: contextvars.ContextVar[Any]) -> bool:
    """Take ``var``'s value out of the running thread's current context, as a fresh
    process has it: no value.  Python can only set a variable or reset it with the token
    of a ``set``, and a context's mapping cannot be changed from outside; so a new context
    is made holding every other variable's value as it is now, and entered through the
    C API in its place (the context entered last time is left first, when it is still
    the current one, so that they do not pile up).  False: not possible here."""
    api = _context_api()
    if api is None:
        return False
    enter, leave = api
    values = [(v, x) for v, x in contextvars.copy_context().items() if v is not var]
    fresh = contextvars.Context()

    def fill() -> None:
        for v, x in values:
            v.set(x)

    try:
        fresh.run(fill)
    except Exception:
        return False
    if _ENTERED:
        try:
            leave(_ENTERED[-1])
            _ENTERED.pop()
        except RuntimeError:
            pass  # something entered a context on top of it since: the new one goes on top
    try:
        enter(fresh)
    except RuntimeError:
        return False
    _ENTERED.append(fresh)
    return var.get(_EMPTY) is _EMPTY


def leave_entered_context() -> None:
    """At the end of the session: back to the context the session started in (a caller
    that runs pytest inside ``Context.run`` must find it current when the run returns),
    with the variables' values as they are now (but those taken out, which it still has)."""
    api = _context_api() if _ENTERED else None
    if api is None:
        return
    values = list(contextvars.copy_context().items())
    try:
        api[1](_ENTERED[-1])
    except RuntimeError:
        return  # something entered a context on top of ours: leave both as they are
    _ENTERED.pop()
    for v, x in values:
        v.set(x)


class _SlotCheck:
    """The slot-only objects of one table, checked in C: a pass of ``gc.get_referents``
    (what an object's traverse visits: its type and its set slots) compared with the
    referents last seen equal to the snapshots, and, when that differs, a flat pass of
    the slots' values (read as object reads them) against the snapshot values, which
    names the watches.

    Referents do not say *which* slot holds a value, so they stand for the snapshot only
    for objects whose slots were all set: an unset slot set and another deleted would
    look the same.  Objects with unset slots always take the flat pass.  Where the
    objects' slot areas can be read (``_versions.slots_view``), their bytes, joined,
    replace the referents (the values they name are held, so no address is reused)::

        idx:   [watch index, ...]
        full:  [obj, ...]                  refs: gc.get_referents(*full), the areas' bytes
                                           (views), or None
        objs/names/vals/owner: one entry per (slot-only object, slot name)
        part:  positions in the flat lists of the objects with unset slots
    """

    __slots__ = (
        "idx", "full", "refs", "objs", "names", "vals", "owner", "nfull", "part", "views", "held",
    )  # fmt: skip

    def __init__(self, t: StateTable, idx: list[int]):
        self.idx = idx
        self.full: list[object] = []
        self.refs: Any = None  # the referents, or the slot areas' bytes
        self.objs: list[object] = []
        self.names: list[str] = []
        self.vals: list[object] = []
        self.owner: list[int] = []
        rest: list[tuple[int, Any, tuple[str, ...], tuple[object, ...]]] = []
        for i in idx:
            view, snap = t.lives[i], t.snaps[i]
            if any(v is _EMPTY for v in snap):
                rest.append((i, view.obj, view.names, snap))
                continue
            self.full.append(view.obj)
            self._add(i, view.obj, view.names, snap)
        self.nfull = len(self.objs)
        for entry in rest:
            self._add(*entry)
        self.part = (self.objs[self.nfull :], self.names[self.nfull :], self.vals[self.nfull :])
        # The slot areas' bytes, where they can be read: a join of a view per object costs
        # a fraction of listing every referent (thousands of objects in a test module).
        self.held: list[object] = []
        self.views: list[memoryview] | None = None
        if self.full:
            views = [_versions.slots_view(obj) for obj in self.full]
            if None not in views:
                self.views = views  # type: ignore[assignment]

    def _add(self, i: int, obj: object, names: tuple[str, ...], snap: tuple[object, ...]) -> None:
        self.objs += [obj] * len(names)
        self.names += names
        self.vals += snap
        self.owner += [i] * len(names)

    def dirty(self) -> list[int]:
        """Indexes of the watches that differ from their snapshots."""
        objs, names, vals = self.objs, self.names, self.vals
        try:
            views = self.views
            if views is not None:
                refs: Any = b"".join(views)
            else:
                refs = gc.get_referents(*self.full) if self.full else None
            if refs is not None and refs != self.refs:
                now = list(map(_OBJECT_GET, objs, names))  # (all set: see __init__)
                if now != vals:
                    return self._which(objs, names, vals)
                # Equal to the snapshots now: these referents (or bytes, which name the
                # values kept alive here) stand for them from here on.
                self.refs = refs
                self.held = now
                return []
            if len(objs) > self.nfull:
                objs, names, vals = self.part
                if list(map(_slot_value, objs, names)) != vals:
                    return self._which(objs, names, vals)
        except Exception:
            return self._which(objs, names, vals)  # a value whose __eq__ raises: look closer
        return []

    def _which(self, objs: list[object], names: list[str], vals: list[object]) -> list[int]:
        owner = self.owner[len(self.objs) - len(objs) :]
        flags = map(_differs, map(_getattr_or_error, objs, names), vals)
        return sorted(set(itertools.compress(owner, flags)))


def _getattr_or_error(obj: object, name: str) -> object:
    """A slot's value, ``_EMPTY`` when unset, or the error reading it raised (differs)."""
    try:
        return _slot_value(obj, name)
    except Exception as e:
        return e


def made_module(m: types.ModuleType) -> bool:
    """Whether ``m`` is a module object that code made and filled (``ModuleType(name)``),
    not one imported: no spec, no file, and not the process's module of its name."""
    d = m.__dict__
    name = d.get("__name__")
    return (
        d.get("__spec__") is None
        and "__file__" not in d
        and isinstance(name, str)
        and sys.modules.get(name) is not m
    )


def _instance_dict(obj: object, cls: type) -> Any:
    """``obj.__dict__``, or None.  A class without instance dicts is not asked: looking
    the name up would run its ``__getattr__`` (a slotted object that computes what it
    lacks on first use, and stores it).  One that makes ``__dict__`` or every attribute
    its own business (a proxy's property, its ``__getattribute__``) still answers."""
    if not cls.__dictoffset__ and not any(
        "__dict__" in c.__dict__ or "__getattribute__" in c.__dict__
        for c in cls.__mro__
        if c is not object
    ):
        return None
    return getattr(obj, "__dict__", None)


def _slot_value(obj: object, name: str) -> object:
    """A slot's value as the slot holds it (``_EMPTY`` when unset): read by object's own
    lookup, so that the class's ``__getattr__`` and ``__getattribute__`` do not run."""
    try:
        return object.__getattribute__(obj, name)
    except AttributeError:
        return _EMPTY


def _slot_names(cls: type) -> tuple[str, ...]:
    names: list[str] = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__")
        if isinstance(slots, str):
            slots = (slots,)
        for s in slots or ():
            if s not in ("__dict__", "__weakref__"):
                names.append(s)
    return tuple(names)


def _is_enum(cls: type) -> bool:
    enum = sys.modules.get("enum")
    return enum is not None and isinstance(cls, enum.EnumMeta)


# The prefixes tuple of the last call and its dotted form: a walk passes the same tuple
# thousands of times, and rebuilding the dotted form each time cost most of a baseline.
_dotted_for: list[Any] = [None, ()]


def _is_project(modname: object, prefixes: tuple[str, ...]) -> bool:
    if not isinstance(modname, str):
        return False
    if modname in prefixes:
        return True
    if _dotted_for[0] is not prefixes:
        _dotted_for[:] = [prefixes, tuple(p + "." for p in prefixes)]
    return modname.startswith(_dotted_for[1])


# How the built-in containers compare, for watched objects of their subclasses: a
# subclass's own ``__eq__`` and ``__ne__`` are the project's code, which a check must not
# run (pytz's LazySet fills itself on its first comparison: a check that made it do so
# had compared the rest of its state already, and left it filled and half reset).
_BASE_NE: Final[dict[type, Callable[[Any, Any], Any]]] = {
    collections.OrderedDict: collections.OrderedDict.__ne__,
    dict: dict.__ne__,
    list: list.__ne__,
    set: set.__ne__,
    frozenset: frozenset.__ne__,
    collections.deque: collections.deque.__ne__,
    bytearray: bytearray.__ne__,
    array: array.__ne__,
}
_BASE_LEN: Final[dict[type, Callable[[Any], int]]] = {
    collections.OrderedDict: collections.OrderedDict.__len__,
    dict: dict.__len__,
    list: list.__len__,
    set: set.__len__,
    frozenset: frozenset.__len__,
    collections.deque: collections.deque.__len__,
    bytearray: bytearray.__len__,
    array: array.__len__,
}
_MAPPING_PROXY: Final = types.MappingProxyType  # (a class's namespace, as watched)
# Types compared and measured as they are (the usual lives: no subclass to look past).
_OWN_NE: Final = frozenset({*_BASE_NE, _MAPPING_PROXY})


def _built_in_base(t: type) -> type | None:
    """The built-in container type that ``t`` derives from, when ``t`` is a subclass of
    one (None: ``t`` is built in, or not a container)."""
    if t in _OWN_NE:
        return None
    for b in t.__mro__[1:]:
        if b in _BASE_NE:
            return b
    return None


def _dict_subclass(live: Any) -> bool:
    """Whether ``live`` is of a subclass of dict (an OrderedDict's is not: its order is
    its own structure, which only its own methods keep)."""
    return isinstance(live, dict) and _built_in_base(type(live)) is dict


def _list_of(v: list[Any]) -> list[Any]:
    """A plain copy of a list, through list's own slicing (see _BASE_NE)."""
    return list.__getitem__(v, slice(None))


_DEQUE_MAXLEN: Final = vars(collections.deque)["maxlen"].__get__


def _deque_of(v: collections.deque[Any]) -> collections.deque[Any]:
    """A plain copy of a deque, through deque's own iteration and bound."""
    return collections.deque(collections.deque.__iter__(v), _DEQUE_MAXLEN(v))


def _bytes_of(v: bytearray) -> bytes:
    """A bytearray's bytes, through its buffer (a subclass's ``__bytes__`` is not asked)."""
    with memoryview(v) as view:
        return view.tobytes()


def as_read(live: Any) -> Any:
    """``live`` to read entries from: a dict subclass's contents as a plain dict (its own
    ``get``, ``in`` and ``[]`` are the project's code), anything else as it is."""
    if type(live) is not dict and _dict_subclass(live):
        return dict.copy(live)
    return live


def _differs(live: Any, snap: Any) -> bool:
    try:
        t = type(live)
        if t not in _OWN_NE:
            base = _built_in_base(t)
            if base is not None:
                got = _BASE_NE[base](live, snap)
                if got is not NotImplemented:
                    return bool(got)
        return bool(live != snap)
    except Exception:
        return True  # an element whose __eq__ raises was put there: dirty


def length(live: Any) -> int:
    """``len(live)`` as its built-in base counts (a subclass's own ``__len__`` is the
    project's code); -1 for an object without one."""
    try:
        base = _built_in_base(type(live))
        return _BASE_LEN[base](live) if base is not None else len(live)
    except Exception:
        return -1


def lengths(lives: list[Any], subclassed: bool = True) -> list[int]:
    """:func:`length` of each: in C, unless one is of a container subclass (or has no
    length: an instance's watch)."""
    if not (subclassed and any_subclassed(lives)):
        try:
            return list(map(len, lives))
        except Exception:
            pass
    return list(map(length, lives))


def any_subclassed(lives: list[Any]) -> bool:
    """Whether a live object among ``lives`` is of a container subclass."""
    return any(map(_built_in_base, map(type, lives)))


def ne_all(lives: list[Any], snaps: list[Any], subclassed: bool = True) -> list[bool]:
    """:func:`_differs` pair by pair: in C, unless a live object is of a container
    subclass (compared as its built-in base compares; ``subclassed=False``: known to
    hold none)."""
    if subclassed and any_subclassed(lives):
        return list(map(_differs, lives, snaps))
    try:
        return list(map(bool, map(operator.ne, lives, snaps)))
    except Exception:
        return list(map(_differs, lives, snaps))  # an __eq__ raised


class _CacheInfoSize:
    """``len()`` of a memo cache through its ``cache_info()`` (the slow, general way)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Any):
        self.fn = fn

    def __len__(self) -> int:
        size = _cache_size(self.fn)
        return size if size >= 0 else 0


def cache_sizer(fn: Any) -> Any:
    """An object whose ``len()`` is the number of entries in memo cache ``fn``.

    For ``functools.lru_cache`` (the C wrapper) that is its internal dict, found among
    the objects the wrapper refers to and checked against ``cache_info()``: ``len`` of a
    dict is one C call, where ``cache_info()`` builds a named tuple each time."""
    size = _cache_size(fn)
    own = getattr(fn, "__dict__", None)
    try:
        dicts = [r for r in gc.get_referents(fn) if type(r) is dict and r is not own]
    except Exception:
        dicts = []
    if len(dicts) == 1 and len(dicts[0]) == size:
        return dicts[0]
    return _CacheInfoSize(fn)


class _LearnedCache:
    """For an unbounded memo cache with learned entries (``base``): ``len()`` is the count
    of its other entries, or ``sys.maxsize`` when a learned one is no longer the object
    learned (the cache was emptied and the entry computed again, by a test that changed
    what it is computed from: the count alone would not tell).  Entries learned later
    leave it at 0: the table's parts need not be made again."""

    __slots__ = ("entries", "base")

    def __init__(self, entries: dict[Any, Any], base: dict[Any, Any]):
        self.entries, self.base = entries, base

    def __len__(self) -> int:
        entries, base = self.entries, self.base
        if any(map(operator.is_not, map(entries.get, base), base.values())):
            return sys.maxsize
        return len(entries) - len(base)


def cache_dict(fn: Any) -> dict[Any, Any] | None:
    """The dict of an unbounded ``functools.cache``: key -> result, the cache itself (the
    C wrapper looks entries up in it, and counts them for ``cache_info()``); None for a
    bounded cache (its entries are also linked in recency order) or another kind."""
    try:
        if fn.cache_info().maxsize is not None:
            return None
    except Exception:
        return None
    found = cache_sizer(fn)
    return found if type(found) is dict else None


def _cache_size(fn: Any) -> int:
    try:
        return int(fn.cache_info().currsize)
    except Exception:
        return -1


def nested_code(code: types.CodeType) -> Iterator[types.CodeType]:
    """``code`` and every code object nested in it (its functions, classes, lambdas)."""
    todo = [code]
    while todo:
        c = todo.pop()
        yield c
        todo += [k for k in c.co_consts if isinstance(k, types.CodeType)]


_STORE_DEREF: Final = bytes([dis.opmap["STORE_DEREF"]])
_DELETE_DEREF: Final = bytes([dis.opmap["DELETE_DEREF"]])


@functools.lru_cache(maxsize=4096)
def _stored_free_names(code: types.CodeType) -> frozenset[str]:
    """The free variables that ``code``, or code nested in it, stores or deletes.  Only
    code whose opcodes (the even bytes of its wordcode) include such a store is
    disassembled: most code has none, and ``dis`` costs tens of microseconds a function."""
    out: list[str] = []
    for c in nested_code(code):
        ops = c.co_code[::2]
        if _STORE_DEREF in ops or _DELETE_DEREF in ops:
            out += [
                ins.argval
                for ins in dis.get_instructions(c)
                if ins.opname in ("STORE_DEREF", "DELETE_DEREF")
            ]
    return frozenset(out)


def _cell_get(cell: Any) -> object:
    try:
        return cell.cell_contents
    except ValueError:
        return _EMPTY


def _diff_keys(live: Any, snap: dict[Any, Any]) -> list[Any]:
    """Keys added, removed or rebound (by identity) between ``snap`` and ``live``: the
    removed ones in snapshot order, then the others in ``live``'s order.  (A loop: passes
    of map/compress over the keys measure slower, 8.0 against 5.6 us for a class of 80
    attributes.)"""
    if type(live) is not dict and type(live) is not _MAPPING_PROXY:
        live = as_read(live)
    out = [k for k in snap if k not in live]
    for k, v in live.items():
        if k not in snap or snap[k] is not v:
            out.append(k)
    return out


def _restore_keys(live: Any, snap: dict[Any, Any], keys: list[Any]) -> None:
    """Put back the ``keys`` (from :func:`_diff_keys`) of a mapping, leaving it as
    :func:`_restore_mapping` would: added keys removed first, then the others bound to
    their snapshot values (keys the test removed come back in snapshot order)."""
    if type(live) is not dict and _dict_subclass(live):
        _restore_mapping(live, snap)
        return
    try:
        for k in keys:
            if k not in snap:
                del live[k]
        for k in keys:
            if k in snap:
                live[k] = snap[k]
    except Exception:
        _restore_mapping(live, snap)


def _restore_class(cls: Any, keys: list[Any], snap: dict[Any, Any]) -> None:
    # type's own setattr: a metaclass whose __setattr__ refuses writes (a "frozen" class,
    # which a test changed through type.__setattr__) still gets its old attributes back.
    real = issubclass(type(cls), type)  # (not a proxy whose __class__ says it is one)
    put = type.__setattr__ if real else setattr
    drop = type.__delattr__ if real else delattr
    for k in keys:
        if k in ("__dict__", "__weakref__"):
            continue
        if k in snap:
            put(cls, k, snap[k])
        else:
            drop(cls, k)


def _reordered(live: Any, snap: dict[Any, Any]) -> bool:
    """Whether a dict holds the same keys as its snapshot in another order (the order is
    what iteration, and code that takes the first match, sees)."""
    try:
        # Key by key in C, stopping at the first difference (no lists of the keys); a dict
        # subclass's keys as the dict holds them (its own __iter__ is the project's code;
        # an OrderedDict's order is its own, not its dict's).
        keys = live
        if type(live) is not dict and _dict_subclass(live):
            keys = dict.keys(live)
        return len(keys) == len(snap) and any(map(operator.ne, keys, snap))
    except Exception:
        return False


def _restore_mapping(live: Any, snap: dict[Any, Any], in_order: bool = False) -> None:
    if type(live) is not dict and _dict_subclass(live):
        # A dict subclass, refilled by dict's own methods in the snapshot's order: its
        # own (a registry's __setitem__ that refuses a name twice) are the project's code.
        dict.clear(live)
        dict.update(live, snap)
        return
    if in_order:
        # Rebuilt in the snapshot's order (the same object, refilled).
        try:
            live.clear()
            live.update(snap)
            return
        except Exception:
            pass
    try:
        for k in [k for k in live if k not in snap]:
            del live[k]
        for k, v in snap.items():
            if k not in live or live[k] is not v:
                live[k] = v
    except Exception:
        # A key whose hash changed since it was stored (mpmath's numbers hash by the working
        # precision) cannot be found to delete: refill the same mapping from the snapshot.
        live.clear()
        live.update(snap)
