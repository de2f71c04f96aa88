"""Dict version tags: "has this dict been written since I last looked?" in O(1).

CPython 3.10-3.13 keep a 64-bit ``ma_version_tag`` in every dict, right after the object
header and ``ma_used``; every mutation (set, delete, clear, update, ``STORE_GLOBAL``,
``setattr`` on a class or module) gives the dict a new, never-reused value.  Reading it
costs the same for a dict of 3 keys and of 3,000, where comparing the dict with its
snapshot costs a hash lookup per key.

The tag is private CPython data.  We read it through ``ctypes`` only on builds where a
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
import ctypes
import gc
import operator
import sys
import types
from collections.abc import Callable
from typing import Any

_PTR = ctypes.sizeof(ctypes.c_void_p)
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
    return int(ctypes.c_uint64.from_address(id(d) + _TAG_OFFSET).value)


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
    if not ctypes.c_void_p.from_address(id(d) + _VALUES_OFFSET).value:
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


def cell_for(live: object) -> ctypes.c_uint64 | None:
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
    if ctypes.c_void_p.from_address(id(live) + _VALUES_OFFSET).value and not split_dicts_tagged():
        return None  # split / inline-values dict whose stores bypass the tag (3.13)
    return ctypes.c_uint64.from_address(id(live) + _TAG_OFFSET)
