"""Dict version tags: "has this dict been written since I last looked?" in O(1).

CPython 3.10-3.13 keep a 64-bit ``ma_version_tag`` in every dict, right after the object
header and ``ma_used``; every mutation (set, delete, clear, update, ``STORE_GLOBAL``,
``setattr`` on a class or module) gives the dict a new, never-reused value.  Reading it
costs the same for a dict of 3 keys and of 3,000, where comparing the dict with its
snapshot costs a hash lookup per key.

The tag is private CPython data.  We read it through ctypes (``_cmem``) only on builds where a
self-test at first use shows it moving on each kind of write we rely on, and treat it as a
hint in one direction only: an unchanged tag means "unchanged since verified"; a changed tag
means "compare the contents".  Elsewhere (other implementations, free-threaded builds,
3.14+, a failed self-test) every watch is compared by contents, as before.

An instance ``__dict__`` may be a split dict (its values in a separate array, non-NULL
``ma_values``).  On 3.11 and 3.12 every write to one moves its tag, as for other dicts; on
3.13 the dict shares the object's inline values and attribute stores bypass the dict (and
its tag).  A second self-test, on a warmed-up attribute store, decides whether split dicts
are watched by tag or always compared by contents.
"""

from __future__ import annotations

import collections
import gc
import operator
import sys
import types
from collections.abc import Callable
from typing import Any

from isolator import _cmem

_PTR = _cmem.sizeof(_cmem.c_void_p)
_TAG_OFFSET = 3 * _PTR  # ob_refcnt, ob_type, ma_used
_VALUES_OFFSET = 5 * _PTR  # ... ma_version_tag, ma_keys, ma_values

VALUE = operator.attrgetter("value")

# dict and the C subclasses that store through it (their writes move the tag too).
_PLAIN_DICTS = (dict, collections.defaultdict, collections.OrderedDict)

_state: dict[str, bool] = {}


class _Probe:
    def __init__(self) -> None:
        self.x = 0


def _tag(d: dict[Any, Any]) -> int:
    return int(_cmem.c_uint64.from_address(id(d) + _TAG_OFFSET).value)


def _self_test() -> bool:
    """Whether every kind of write we rely on moves the tag of the dict written."""
    d: dict[Any, Any] = {}
    ops: list[Callable[[], object]] = [
        lambda: d.__setitem__("a", 1),
        lambda: d.__setitem__("a", 2),
        lambda: d.update(b=2),
        lambda: d.setdefault("c", 3),
        lambda: d.pop("c"),
        lambda: d.__delitem__("b"),
        lambda: d.popitem(),
        lambda: d.update(x=1),
        d.clear,
    ]
    for op in ops:
        before = _tag(d)
        op()
        if _tag(d) == before:
            return False
    dd: collections.defaultdict[str, list[int]] = collections.defaultdict(list)
    od: collections.OrderedDict[str, int] = collections.OrderedDict()
    for sub, write in (
        (dd, lambda: dd["missing"]),  # __missing__ inserts
        (od, lambda: od.__setitem__("k", 1)),
        (od, lambda: od.pop("k")),
    ):
        before = _tag(sub)
        write()
        if _tag(sub) == before:
            return False
    mod: Any = types.ModuleType("_isolator_tag_probe")
    exec("X = 0\ndef f(n):\n    global X\n    X = n\n", mod.__dict__)
    cls: Any = type("_TagProbe", (), {"a": 0})
    cls_dict = gc.get_referents(cls.__dict__)
    if len(cls_dict) != 1 or not isinstance(cls_dict[0], dict):
        return False
    for i in range(100):  # warm specialised bytecode up before the real checks
        mod.f(i)
        cls.a = i
    for write, target in (
        (lambda: mod.f(-1), mod.__dict__),
        (lambda: setattr(mod, "Y", 1), mod.__dict__),
        (lambda: setattr(cls, "a", -1), cls_dict[0]),
    ):
        before = _tag(target)
        write()
        if _tag(target) == before:
            return False
    return True


class _Split:
    def __init__(self) -> None:
        self.a = 0
        self.b = 0


def _store_a(obj: Any, value: int) -> None:
    obj.a = value


def _store_new(obj: Any, value: int) -> None:
    obj.c = value


def _split_self_test() -> bool:
    """Whether writes to a split instance dict move its tag, specialised stores included."""
    objs = [_Split() for _ in range(3)]
    obj = objs[0]
    d = obj.__dict__  # materialised, as a walk of the object materialises it
    for i in range(200):  # let the stores specialise, on this object and on others
        _store_a(objs[1], i)
        _store_a(obj, i)
    if not _cmem.c_void_p.from_address(id(d) + _VALUES_OFFSET).value:
        return False  # not a split dict here: nothing to decide from
    writes: list[Callable[[], object]] = [
        lambda: _store_a(obj, -1),
        lambda: setattr(obj, "b", -1),
        lambda: _store_new(obj, -1),
        lambda: delattr(obj, "c"),
        lambda: d.__setitem__("a", -2),
    ]
    for write in writes:
        before = _tag(d)
        write()
        if _tag(d) == before:
            return False
    return True


def split_dicts_tagged() -> bool:
    ok = _state.get("split")
    if ok is None:
        ok = available()
        if ok:
            try:
                ok = _split_self_test()
            except Exception:
                ok = False
        _state["split"] = ok
    return ok


def available() -> bool:
    ok = _state.get("ok")
    if ok is None:
        ok = (
            sys.implementation.name == "cpython"
            and (3, 10) <= sys.version_info[:2] <= (3, 13)
            # Free-threaded builds (3.13+) lay dicts out differently; the flag is read
            # only where it can exist (reading it imports the _sysconfigdata module).
            and not (sys.version_info >= (3, 13) and _free_threaded())
        )
        if ok:
            try:
                ok = _self_test()
            except Exception:
                ok = False
        _state["ok"] = ok
    return ok


def _free_threaded() -> bool:
    # POSIX builds name the free-threaded ABI in sys.abiflags ("t"); elsewhere the build
    # configuration says (importing sysconfig and its data module costs about 2 ms).
    flags = getattr(sys, "abiflags", None)
    if flags is not None:
        return "t" in flags
    import sysconfig

    return bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def cell_for(live: object) -> _cmem.c_uint64 | None:
    """A live view of ``live``'s version tag (a dict, or a class's mappingproxy), or None
    when the tag cannot be trusted for it.  The caller keeps ``live`` alive."""
    if not available():
        return None
    if type(live) is types.MappingProxyType:
        inner = gc.get_referents(live)
        if len(inner) != 1 or type(inner[0]) is not dict:
            return None
        live = inner[0]
    elif type(live) not in _PLAIN_DICTS:
        return None  # other subclasses may override writes or equality
    if _cmem.c_void_p.from_address(id(live) + _VALUES_OFFSET).value and not split_dicts_tagged():
        return None  # split / inline-values dict whose stores bypass the tag (3.13)
    return _cmem.c_uint64.from_address(id(live) + _TAG_OFFSET)


# A slot-only object keeps each slot's value as a pointer inside the object, between the
# object header and ``type(obj).__basicsize__`` (member descriptors' offsets lie there).
# The bytes of that area, read in one ``bytes.join`` over many objects, say whether any
# slot was set, rebound or deleted since: unchanged bytes name the same objects, as long
# as the objects they named are kept alive (the caller holds the values it compared).
_HEAD = object.__basicsize__


class _SlotProbeObject:
    __slots__ = ("a", "b")

    def __init__(self) -> None:
        self.a: object = 1


def _slots_self_test() -> bool:
    """Whether setting, rebinding and deleting a slot each move the bytes of the area."""
    obj = _SlotProbeObject()
    view = _slots_area(obj)
    if view is None or len(view) < 2 * _PTR:
        return False
    marker = object()
    writes: list[Callable[[], object]] = [
        lambda: setattr(obj, "b", marker),
        lambda: setattr(obj, "a", marker),
        lambda: delattr(obj, "b"),
    ]
    for write in writes:
        before = bytes(view)
        write()
        if bytes(view) == before:
            return False
    return view.tobytes()[:_PTR] == id(marker).to_bytes(_PTR, sys.byteorder)


def _slots_area(obj: object) -> memoryview | None:
    cls = type(obj)
    size = cls.__basicsize__ - _HEAD
    if size <= 0 or cls.__itemsize__ or cls.__dictoffset__:
        return None
    return memoryview((_cmem.c_char * size).from_address(id(obj) + _HEAD)).cast("B")


def _verified(name: str, self_test: Callable[[], bool]) -> bool:
    """Whether the tags can be read here and ``self_test`` passed (run once)."""
    ok = _state.get(name)
    if ok is None:
        try:
            ok = available() and self_test()
        except Exception:
            ok = False
        _state[name] = ok
    return ok


def slots_view(obj: object) -> memoryview | None:
    """A live view of the slot area of a slot-only object (fixed size, no ``__dict__``),
    or None where it cannot be trusted.  The caller keeps ``obj`` alive."""
    if not _verified("slots", _slots_self_test):
        return None
    try:
        return _slots_area(obj)
    except Exception:
        return None


# The entry table of a combined dict (3.11-3.13 default builds): ``ma_keys`` points to a
# keys object {dk_refcnt, dk_log2_size, dk_log2_index_bytes, dk_kind, dk_version,
# dk_usable, dk_nentries, dk_indices[1 << dk_log2_index_bytes]} followed by the entries in
# insertion order; a table of str keys holds {me_key, me_value} pointer pairs.  Comparing
# the first n entries' bytes with an earlier copy says whether those n keys are still
# there, in order, bound to the same objects, without touching a key or value object
# (iterating a dict increments each one's reference count: a cache miss per object).
_KEYS_OFFSET = 4 * _PTR
_LOG2_INDEX_BYTES = 9
_KIND = 10
_NENTRIES = 24
_INDICES = 32
ENTRY = 2 * _PTR  # an entry of a table of str keys
_str_kind = [-1]  # dk_kind of such a table, as the self-test read it


def _keys_of(d: dict[Any, Any]) -> int:
    return int(_cmem.c_void_p.from_address(id(d) + _KEYS_OFFSET).value or 0)


def _read_entries(d: dict[Any, Any], n: int | None) -> bytes | None:
    keys = _keys_of(d)
    if not keys or _cmem.c_void_p.from_address(id(d) + _VALUES_OFFSET).value:
        return None  # a split table (an instance dict)
    head = _cmem.string_at(keys, _INDICES)
    if head[_KIND] != _str_kind[0]:
        return None
    used = int.from_bytes(head[_NENTRIES : _NENTRIES + 8], sys.byteorder, signed=True)
    if n is None:
        n = used
    elif used < n:
        return None
    start = keys + _INDICES + (1 << head[_LOG2_INDEX_BYTES])
    return _cmem.string_at(start, n * ENTRY)


def _entries_self_test() -> bool:
    """Whether entry tables are laid out as above: the image names the very key and value
    objects in order, and moves on a replacement or a deletion, not on an append or a
    resize."""
    if _PTR != 8 or not (3, 11) <= sys.version_info[:2] <= (3, 13):
        return False
    names = [f"_isolator_entry_{i}" for i in range(5)]
    values = [object() for _ in names]
    d = dict(zip(names, values))
    _str_kind[0] = _cmem.string_at(_keys_of(d), _INDICES)[_KIND]
    image = _read_entries(d, len(names))
    if image is None:
        return False
    ptrs = memoryview(image).cast("Q").tolist()
    if ptrs != [p for k, v in zip(names, values) for p in (id(k), id(v))]:
        return False
    for i in range(200):  # appends and resizes keep the prefix
        d[f"_isolator_more_{i}"] = i
    if _read_entries(d, len(names)) != image:
        return False
    d[names[2]] = object()
    if _read_entries(d, len(names)) == image:
        return False
    d[names[2]] = values[2]
    if _read_entries(d, len(names)) != image:
        return False
    del d[names[1]]
    return _read_entries(d, len(names)) != image


def entries_image(d: dict[Any, Any], n: int | None = None) -> bytes | None:
    """Bytes naming the (key, value) objects of ``d``'s first ``n`` entries (all by
    default), deleted entries included, or None when they cannot be read here (then
    compare the dict itself).  Entries are only appended until the table is rebuilt, so
    an unchanged prefix means those keys are still bound to the same objects."""
    if not _verified("entries", _entries_self_test) or type(d) is not dict:
        return None
    try:
        return _read_entries(d, n)
    except Exception:
        return None
