"""Whether two object graphs are the same value: an isomorphism check, without recursion.

``learn_memo`` keeps a memo-cache entry once a fresh computation gives back "the same"
value.  Values such as parser grammars are graphs of plain objects that compare by
identity, hold sets of identity-hashed objects (whose iteration order follows memory
addresses) and dicts keyed by such objects, and have cycles and long paths.  Two such
values are the same when a one-to-one map between their reachable objects exists that
keeps every type, every atomic value and every edge:

* lists and tuples pair their items by position; dicts with keys found in both (by
  equality) pair the values; object attributes, ``__slots__`` and bound methods pair by
  name (a built-in method bound to an object, such as a compiled pattern's ``match``,
  by its name and that object); objects with state in C (dates, decimals, patterns)
  compare with their own ``==``;
* the remaining items of sets and dicts (keys that are objects hashed by identity) pair
  by a structural signature, refined until the items part; items alike at every depth
  wait until other pairings tell them apart, and only then is one pairing guessed;
* objects reachable from both values (classes, functions, enum members, shared
  singletons) must map to themselves;
* classes and functions the computation itself defines are made anew each time (a
  factory's class statements, the methods in them, the closures it returns, a module
  object it fills with them): two such are one definition run twice when their code is
  one (a module: when neither is imported), and then pair as objects do.
  Those defined inside a function count only when that function is code of the memo's
  own module (``home``): a test's class statement, registered by name in a library's
  registry, is the test's own and no memo entry.

Every pair is checked when it is made, so "the same" is always backed by a complete,
consistent map; "not the same" may be a missed match, which only costs the memo.

The map may differ in what the computation's memory layout alone can change between
two runs in one process (and between fresh processes):
the order of lists, and which objects a set of identity-hashed objects holds (a choice
made while iterating such a set in address order, e.g. which of two equal states
survives) as long as the sets agree on size and member types.  Atomic values, attributes
and dict keys must still agree everywhere.  The work is bounded by a node budget.
"""

from __future__ import annotations

import collections
import gc
import heapq
import operator
import sys
import types
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import chain, repeat
from typing import Any, Final

from isolator._state import _instance_dict, _slot_names, _slot_value, made_module

_ATOMS: Final = (int, float, complex, str, bytes, bool, type(None))
# Compared by identity only: code and types are never rebuilt by a memoised computation.
_IDENTITY: Final = (
    type,
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.CodeType,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    types.GetSetDescriptorType,
    types.MemberDescriptorType,
)
_CONTAINERS: Final = frozenset({dict, list, tuple, set, frozenset})
# What an object's type makes the check do with it, found once per type (_Matcher.kind).
_ATOM, _IDENT, _OBJECT, _OBJECT_DICT, _LEAF, _METHOD, _DICT, _LIST, _TUPLE, _SET = range(10)
_BUILTIN: Final = 10  # a built-in function or method (not a container: no _SUBCLASS)
_SUBCLASS: Final = 16  # added to a container's kind: its __dict__ and __slots__ pair too
# Built-in types whose own ``__getattribute__`` answers ``__class__`` with the type.
_HONEST: Final = frozenset({object, type, types.MethodType, *_ATOMS, *_CONTAINERS, *_IDENTITY})
# Identities as ints.  ``id()`` raises an audit event ("builtins.id"): with a Python audit
# hook installed (isolator's file journal, during every run) each call runs Python code,
# which made a check of a parso grammar 2.5 times as slow in a run as alone.  CPython's
# object hash is the address rotated: as unique among live objects, and not audited.
_addr: Final = object.__hash__ if sys.implementation.name == "cpython" else id
_BUDGET: Final = 400_000
_SIG_DEPTH: Final = 40
_MISSING: Final = object()
_key: Final = operator.itemgetter(0)  # of a dict item
# Tiers of open groups (sets, lists, dict items left to pair), settled in this order.
_FRESH, _WAITING, _ALIKE = 0, 1, 2
_HEAPTYPE: Final = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class defined by a class statement


class _NotSame(Exception):
    pass


def _twins(x: Any, y: Any, home: str | None) -> bool:
    """Whether ``x`` and ``y``, distinct objects of one type compared by identity, may be
    one definition made twice (see the module docstring); their parts then pair."""
    t = type(x)
    if t is types.FunctionType:
        # One ``def`` run twice: a nested function's code is a constant of the code
        # around it, so both have the very same code object, and one module namespace.
        return (
            x.__code__ is y.__code__
            and x.__globals__ is y.__globals__
            and home is not None
            and x.__module__ == home == y.__module__
        )
    if t is types.MemberDescriptorType:
        # A ``__slots__`` entry of twin classes (paired through their namespaces).
        return bool(x.__name__ == y.__name__)
    if t is types.ModuleType:
        # A module object a factory makes (html5lib's tree builders, ``ModuleType(name)``
        # filled with the classes of one call): not imported, so no module of the
        # process's.
        return home is not None and made_module(x) and made_module(y) and x.__name__ == y.__name__
    return _twin_classes(x, y, home)


def _twin_classes(x: Any, y: Any, home: str | None = None) -> bool:
    """Whether ``x`` and ``y`` may be one class made twice: a ``type(name, bases,
    namespace)`` call run once per computation (cerberus builds its schema validator
    class on first use), or a class statement in a function of the memo's own module
    ``home`` (html5lib's parser phases, built on first use).  Both classes of one
    metaclass, defined in Python, with one name; the rest is paired as any object's
    (bases, namespace).  A class statement inside a function of another module is not:
    a test that defines a class registers it (marshmallow's class registry), and that
    entry is the test's own, not a memo."""
    return (
        isinstance(x, type)
        and isinstance(y, type)
        and bool(x.__flags__ & y.__flags__ & _HEAPTYPE)
        and x.__qualname__ == y.__qualname__
        and x.__module__ == y.__module__
        and ("<locals>" not in x.__qualname__ or (home is not None and x.__module__ == home))
        and len(x.__bases__) == len(y.__bases__)
    )


# Built-in wrappers a class body makes, by what they wrap (all of their state).
_DESCRIBED: Final[dict[type, Callable[[Any], tuple[Any, ...]]]] = {
    property: lambda p: (p.fget, p.fset, p.fdel, p.__doc__),
    staticmethod: lambda m: (m.__func__, getattr(m, "__dict__", None)),
    classmethod: lambda m: (m.__func__, getattr(m, "__dict__", None)),
}
_EMPTY_CELL: Final = object()  # stands for an empty closure cell (_state's _EMPTY: a slot)


def _cell_contents(fn: types.FunctionType) -> tuple[Any, ...]:
    out = []
    for cell in fn.__closure__ or ():
        try:
            out.append(cell.cell_contents)
        except ValueError:
            out.append(_EMPTY_CELL)
    return tuple(out)


# A class's own descriptors for its instances' __dict__ and weak references: one per class.
_PER_CLASS: Final = frozenset({"__dict__", "__weakref__"})


def _class_namespace(cls: type) -> dict[str, Any]:
    return {k: v for k, v in vars(cls).items() if k not in _PER_CLASS}


def _same_pattern(x: Any, y: Any) -> bool:
    """Two compiled regular expressions of one type made from the same source: what
    compiling gives is a function of the pattern, the flags and (the ``regex`` module's)
    named lists.  The ``regex`` module's patterns compare by identity, and its cache of
    compiled patterns is bounded, so a recomputed memo entry holds a new, equal one."""
    t = type(x)
    if t.__name__ != "Pattern" or type(y) is not t:
        return False
    try:
        return bool(
            x.pattern == y.pattern
            and type(x.pattern) is type(y.pattern)
            and x.flags == y.flags
            and getattr(x, "named_lists", None) == getattr(y, "named_lists", None)
        )
    except Exception:
        return False


def same_value(a: object, b: object, budget: int = _BUDGET, home: str | None = None) -> bool:
    """Whether ``a`` and ``b`` are isomorphic object graphs (see the module docstring);
    ``home``: the name of the memo's module, whose functions' own class statements and
    nested functions may be made anew by the computation."""
    if a is b:
        return True
    # A tuple per pair made: the collections that would set off (traversing a freshly
    # computed value and the maps again and again) cost a few percent of a check in a run.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _Matcher(budget, home).run(a, b)
    except _NotSame:
        return False
    except Exception:  # a broken __eq__, __hash__ or property: cannot tell
        return False
    finally:
        if collecting:
            gc.enable()


class _Matcher:
    def __init__(self, budget: int, home: str | None = None):
        self.budget = budget
        self.home = home
        self.ab: dict[int, Any] = {}
        self.ba: dict[int, Any] = {}
        self.work: deque[tuple[Any, Any]] = deque()
        # Groups left to pair: (tier, size, order, a items, b items, whether the items
        # are (key, value) pairs, number of pairs made when the group was opened).
        self.groups: list[tuple[int, int, int, list[Any], list[Any], bool, int]] = []
        self.sigs: dict[tuple[int, int], int] = {}
        self.slots: dict[type, tuple[str, ...]] = {}
        self.plains: dict[type, bool] = {}
        self.kinds: dict[type, int] = {}
        self.order = 0

    def spend(self, n: int = 1) -> None:
        self.budget -= n
        if self.budget < 0:
            raise _NotSame

    # ------------------------------------------------------------------ pairing

    def pair_all(self, pairs: Iterable[tuple[Any, Any]], expand: bool = False) -> None:
        """Pair each ``x`` with its ``y``; new pairs of objects join the work queue.

        With ``expand``, go on through the queue (breadth first: the order of groups
        depends on it) and pair what each pair refers to, until the queue is empty.
        Nearly all the work is in this loop: it keeps to locals, and pairs by kind of
        type (:meth:`kind`) rather than by ``isinstance`` chains.
        """
        ab, ba, kinds, kind, work = self.ab, self.ba, self.kinds, self.kind, self.work
        push, pop = work.append, work.popleft
        missing, addr = _MISSING, _addr
        budget, home = self.budget, self.home
        while True:
            for x, y in pairs:
                ix = addr(x)
                mapped = ab.get(ix, missing)
                if mapped is not missing:
                    if mapped is not y:
                        raise _NotSame
                    continue
                # Atoms after that: equal atoms may or may not be one object, so their
                # identities are never recorded (nor found in ``ab``).
                t = type(x)
                k = kinds.get(t)
                if k is None:
                    k = kind(x)
                if k == _ATOM:
                    if t is not type(y) or not (x is y or x == y):
                        raise _NotSame
                    continue
                iy = addr(y)
                if iy in ba:
                    raise _NotSame
                if x is y:
                    ab[ix] = x
                    ba[iy] = y
                    continue
                if t is not type(y) or (k == _IDENT and not _twins(x, y, home)):
                    raise _NotSame  # distinct code objects, types or modules
                budget -= 1
                if budget < 0:
                    raise _NotSame
                ab[ix] = y
                ba[iy] = x
                push((x, y))
            if not (expand and work):
                self.budget = budget
                return
            x, y = pop()
            k = kinds.get(type(x))
            if k is None:
                k = kind(x)
            if k == _DICT:
                n = len(x)
                if n != len(y):
                    raise _NotSame
                budget -= n
                if budget < 0:
                    raise _NotSame
                # Keys found in both pair their values (a key is the same object or an
                # equal value: its own equality is trusted, as for set members).
                pairs = []
                get = y.get
                for key, v in x.items():
                    w = get(key, missing)
                    if w is missing:
                        pairs = self.expand_dict(x, y)
                        break
                    pairs.append((v, w))
            elif k == _OBJECT_DICT:
                pairs = ((x.__dict__, y.__dict__),)
            elif k == _LIST:
                n = len(x)
                if n != len(y):
                    raise _NotSame
                budget -= n
                if budget < 0:
                    raise _NotSame
                self.expand_bag(x, y)
                pairs = ()
            else:
                self.budget = budget
                pairs = self.expand(x, y, k)
                budget = self.budget

    def kind(self, x: Any) -> int:
        """What pairing and expanding do with ``x``; kept for its type unless a class of
        its MRO may answer ``__class__`` with another type, as ``isinstance`` would
        then follow that (mocks, proxies)."""
        t = type(x)
        honest = all(c in _HONEST or not _answers_class(c) for c in t.__mro__)
        if isinstance(x, _ATOMS):
            k = _ATOM
        elif isinstance(x, types.BuiltinFunctionType):
            k = _BUILTIN
        elif isinstance(x, _IDENTITY):
            k = _IDENT
        elif isinstance(x, dict):
            k = _DICT
        elif isinstance(x, list):
            k = _LIST
        elif isinstance(x, tuple):
            k = _TUPLE
        elif isinstance(x, (set, frozenset)):
            k = _SET
        elif isinstance(x, types.MethodType):
            k = _METHOD
        elif not self.plain(t):
            k = _LEAF
        elif honest and not self.slot_names(t) and _own_dict(t):
            k = _OBJECT_DICT
        else:
            k = _OBJECT
        if _DICT <= k <= _SET and t not in _CONTAINERS:
            k += _SUBCLASS
        if honest:
            self.kinds[t] = k
        return k

    def plain(self, cls: type) -> bool:
        """Whether all of an instance's state is in its ``__dict__`` and ``__slots__``:
        every class of its MRO but ``object`` is defined in Python (types written in C,
        even heap types such as ``functools.partial``, have a ``__new__`` of their own)."""
        ok = self.plains.get(cls)
        if ok is None:
            ok = self.plains[cls] = all(
                k is object or (k.__flags__ & _HEAPTYPE and _python_new(k)) for k in cls.__mro__
            ) and (cls.__dictoffset__ != 0 or bool(self.slot_names(cls)))
        return ok

    def slot_names(self, cls: type) -> tuple[str, ...]:
        names = self.slots.get(cls)
        if names is None:
            names = self.slots[cls] = _slot_names(cls)
        return names

    def expand(self, x: Any, y: Any, k: int) -> list[tuple[Any, Any]]:
        """What ``x`` and ``y`` of the less common kinds refer to, paired up."""
        if k == _IDENT:
            # Twins (see _twins): what each definition made pairs.
            t = type(x)
            if t is types.FunctionType:
                names = (x.__name__, x.__qualname__, x.__doc__)
                return [
                    (names, (y.__name__, y.__qualname__, y.__doc__)),
                    (x.__defaults__, y.__defaults__),
                    (x.__kwdefaults__, y.__kwdefaults__),
                    (_cell_contents(x), _cell_contents(y)),
                    (x.__dict__, y.__dict__),
                ]
            if t is types.MemberDescriptorType:
                return [(x.__objclass__, y.__objclass__)]
            if t is types.ModuleType:
                return [(x.__dict__, y.__dict__)]
            return [(x.__bases__, y.__bases__), (_class_namespace(x), _class_namespace(y))]
        if k == _LEAF:
            parts = _DESCRIBED.get(type(x))
            if parts is not None:
                # A class's property or static/class method: what it wraps pairs.
                return [(parts(x), parts(y))]
            # A leaf with state of its own in C (decimals, dates, patterns, partials):
            # only its own equality can tell.
            if getattr(type(x), "__eq__", None) is object.__eq__ or not bool(x == y):
                if not _same_pattern(x, y):
                    raise _NotSame
            return []
        if k == _METHOD:
            if x.__func__ is not y.__func__:
                raise _NotSame
            return [(x.__self__, y.__self__)]
        if k == _BUILTIN:
            # Not one object: both must be bound to objects that pair (a function of a
            # module such as ``len`` is one object wherever it is found).
            sx, sy = x.__self__, y.__self__
            if (
                x.__name__ != y.__name__
                or sx is None
                or type(sx) is not type(sy)
                or isinstance(sx, types.ModuleType)
            ):
                raise _NotSame
            return [(sx, sy)]
        pairs: list[tuple[Any, Any]] = []
        if k != _OBJECT:
            if len(x) != len(y):
                raise _NotSame
            self.spend(len(x))
            container = k & ~_SUBCLASS
            if container == _DICT:
                pairs = self.expand_dict(x, y)
            elif container == _TUPLE:
                pairs = list(zip(x, y))
            elif container == _LIST:
                self.expand_bag(x, y)
            else:
                self.expand_set(x, y)
            if container == k:
                return pairs
        # An object, or an instance of a container's subclass: attributes pair by name.
        # (Read as object reads them: a class's __getattr__ is the project's code.  An
        # unset slot reads as _EMPTY, not _MISSING: pairs are looked up with that, and an
        # object paired with itself is stored as its own partner, so a second unset slot
        # would look unpaired.)
        da = _instance_dict(x, type(x))
        if isinstance(da, dict):
            db = _instance_dict(y, type(y))
            if not isinstance(db, dict):
                raise _NotSame
            pairs.append((da, db))
        for name in self.slot_names(type(x)):
            pairs.append((_slot_value(x, name), _slot_value(y, name)))
        return pairs

    def expand_dict(self, x: dict[Any, Any], y: dict[Any, Any]) -> list[tuple[Any, Any]]:
        """The values of keys found in both, to pair; the other items go to a group."""
        if getattr(x, "default_factory", None) is not getattr(y, "default_factory", None):
            raise _NotSame
        left: list[Any] = []
        found: list[tuple[Any, Any]] = []
        for k, v in x.items():
            w = y.get(k, _MISSING)
            if w is _MISSING:
                left.append((k, v))
            else:
                found.append((v, w))
        if left:
            if found:
                right = [(k, v) for k, v in y.items() if k not in x]
            else:
                right = list(y.items())
            if len(right) != len(left):
                raise _NotSame
            self.open_group(left, right, True)
        return found

    def expand_bag(self, x: list[Any], y: list[Any]) -> None:
        """A list whose objects may come in another order (the order of a computation
        over identity-hashed sets follows addresses); atoms keep their positions."""
        if not x:
            return
        kinds = self.kinds
        member_types = {*map(type, x), *map(type, y)}
        for t in member_types - kinds.keys():
            self.kind(next(m for m in chain(x, y) if type(m) is t))
        found = {kinds.get(t) for t in member_types}  # None: a kind not kept by type
        if found == {_ATOM}:
            # Atoms only, compared all at once: the same types, and equal by ``==``.
            if not all(map(operator.is_, map(type, x), map(type, y))) or not all(
                map(operator.eq, x, y)
            ):
                raise _NotSame
            return
        if _ATOM not in found and None not in found:
            self.open_group(list(x), list(y), False)  # no atoms (the usual case)
            return
        left: list[Any] = []
        right: list[Any] = []
        kind = self.kind
        for p, q in zip(x, y):
            kp, kq = kinds.get(type(p)), kinds.get(type(q))
            if kp is None:
                kp = kind(p)
            if kq is None:
                kq = kind(q)
            if kp == _ATOM or kq == _ATOM:
                if not (kp == kq and type(p) is type(q) and p == q):
                    raise _NotSame
                continue
            left.append(p)
            right.append(q)
        if left:
            self.open_group(left, right, False)

    def expand_set(self, x: Any, y: Any) -> None:
        left = [e for e in x if e not in y]
        if left:
            right = [e for e in y if e not in x]
            if len(right) != len(left):
                raise _NotSame
            if all(_identity_hashed(type(e)) for e in left):
                # Which objects a set of identity-hashed objects holds can follow from
                # choices made in address order (which of two equal states survives):
                # such sets agree on their size and member types only.
                if collections.Counter(map(type, left)) != collections.Counter(map(type, right)):
                    raise _NotSame
                return
            self.open_group(left, right, False)

    # --------------------------------------------------------- unordered groups

    def open_group(
        self, left: list[Any], right: list[Any], items: bool, tier: int = _FRESH
    ) -> None:
        self.order += 1
        heapq.heappush(self.groups, (tier, len(left), self.order, left, right, items, len(self.ab)))

    def settle(self, left: list[Any], right: list[Any], items: bool, tier: int, mark: int) -> None:
        """Pair the remaining members of one set, dict or list, or put the group back.

        A fresh group only takes the pairs that pairings made elsewhere imply; the rest
        waits until nothing else can move.  Then signatures part its members; members
        alike at every depth wait again, and are guessed only when nothing was paired
        since they were put back."""
        ab, addr = self.ab, _addr
        keys_l = map(_key, left) if items else left
        ids_r = list(map(addr, map(_key, right) if items else right))
        # The identities of the members' partners, where pairings made them already.
        got = list(map(addr, map(ab.get, map(addr, keys_l), repeat(_MISSING))))
        unpaired = got.count(addr(_MISSING))
        rest_l: list[Any]
        if not unpaired:
            # Every member has its partner (the usual case): only the values of dict
            # items are left to pair.
            if not items:
                if got != ids_r and sorted(got) != sorted(ids_r):
                    raise _NotSame
                return
            by_key = dict(zip(ids_r, right))
            if len(by_key) != len(got) or by_key.keys() != set(got):
                raise _NotSame
            self.pair_all([(kv[1], by_key[i][1]) for kv, i in zip(left, got)])
            return
        if unpaired == len(left) and len(set(ids_r)) == len(ids_r):
            rest_l, rest_r = left, right  # nothing to take yet, and no member twice
        else:
            rights: dict[int, list[Any]] = {}
            for kv, i in zip(right, ids_r):
                rights.setdefault(i, []).append(kv)
            rest_l = []
            # A value is paired as its key is met: a later key may be one of them.
            self.pair_all(self.implied(left, items, rights, rest_l))
            rest_r = [kv for kvs in rights.values() for kv in kvs]
        if len(rest_l) != len(rest_r):
            raise _NotSame
        if not rest_l:
            return
        if len(rest_l) == 1:
            self.pair_members(rest_l, rest_r, items)
            return
        if tier == _FRESH or (tier == _ALIKE and mark != len(self.ab) and len(rest_l) < len(left)):
            self.open_group(rest_l, rest_r, items, _WAITING)
            return
        self.sigs.clear()  # signatures see pairings, which have changed
        # Refine signatures deeper until the members part as far as they will.
        parts = steady = 0
        for depth in range(1, _SIG_DEPTH + 1):
            by_l = self.bucket(rest_l, items, depth)
            by_r = self.bucket(rest_r, items, depth)
            if by_l.keys() != by_r.keys() or any(len(v) != len(by_r[k]) for k, v in by_l.items()):
                raise _NotSame
            if len(by_l) == len(rest_l):
                break
            steady = steady + 1 if len(by_l) == parts else 0
            parts = len(by_l)
            if steady >= 2:
                break
        if len(by_l) < len(rest_l) and not (tier == _ALIKE and mark == len(self.ab)):
            # Pair the members that parted; the alike ones wait for other pairings.
            parted = [k for k, members in by_l.items() if len(members) == 1]
            self.pair_members([by_l[k][0] for k in parted], [by_r[k][0] for k in parted], items)
            alike_l = [m for ms in by_l.values() if len(ms) > 1 for m in ms]
            alike_r = [m for k, ms in by_l.items() if len(ms) > 1 for m in by_r[k]]
            self.open_group(alike_l, alike_r, items, _ALIKE)
            return
        # Members alike to the depth that parts them are paired in order: a wrong guess
        # ends in a contradiction later, never in a false "same".
        self.pair_members(
            [m for ms in by_l.values() for m in ms], [m for k in by_l for m in by_r[k]], items
        )

    def implied(
        self, left: list[Any], items: bool, rights: dict[int, list[Any]], rest_l: list[Any]
    ) -> Iterator[tuple[Any, Any]]:
        """The values of dict items whose keys are paired; members with no partner yet
        go to ``rest_l``, and their partners-to-be stay in ``rights``."""
        ab = self.ab
        for kv in left:
            partner = ab.get(_addr(kv[0] if items else kv), _MISSING)
            if partner is _MISSING:
                rest_l.append(kv)
                continue
            others = rights.get(_addr(partner))
            if not others:
                raise _NotSame
            other = others.pop()
            if items:
                yield kv[1], other[1]

    def pair_members(self, left: list[Any], right: list[Any], items: bool) -> None:
        """Pair members in order (the key, then the value, of dict items)."""
        if items:
            self.pair_all(chain.from_iterable(map(zip, left, right)))
        else:
            self.pair_all(zip(left, right))

    def bucket(self, members: list[Any], items: bool, depth: int) -> dict[int, list[Any]]:
        out: dict[int, list[Any]] = {}
        for m in members:
            if items:
                s = hash((self.sig(m[0], depth), self.sig(m[1], depth)))
            else:
                s = self.sig(m, depth)
            out.setdefault(s, []).append(m)
        return out

    def sig(self, node: Any, depth: int) -> int:
        """A hash of ``node``'s structure ``depth`` edges deep, blind to addresses."""
        t = type(node)
        k = self.kinds.get(t)
        if k is None:
            k = self.kind(node)
        if k == _ATOM:
            return hash((t, node))
        i = _addr(node)
        if k == _BUILTIN:
            owner = node.__self__
            if owner is None or isinstance(owner, types.ModuleType):
                return hash((t, i))
            return hash((t, node.__name__, self.sig(owner, depth)))
        if k == _IDENT:
            # Twins sign alike.
            if isinstance(node, type) and node.__flags__ & _HEAPTYPE:
                return hash((t, node.__module__, node.__qualname__))
            if t is types.FunctionType:
                return hash((t, _addr(node.__code__)))
            if t is types.MemberDescriptorType or t is types.ModuleType:
                return hash((t, node.__name__))
            return hash((t, i))
        # Already paired: both sides' mapped nodes must sign alike.
        if i in self.ab:
            return hash(("paired", i))
        other = self.ba.get(i, _MISSING)
        if other is not _MISSING:
            return hash(("paired", _addr(other)))
        if depth <= 0:
            return hash(t)
        memo = (i, depth)
        got = self.sigs.get(memo)
        if got is not None:
            return got
        self.spend()
        d = depth - 1
        k &= ~_SUBCLASS
        if k == _LIST or k == _TUPLE:
            s = hash((t, tuple(self.sig(c, d) for c in node)))
        elif k == _DICT:
            items = sorted(hash((self.sig(key, d), self.sig(v, d))) for key, v in node.items())
            s = hash((t, tuple(items)))
        elif k == _SET:
            s = hash((t, tuple(sorted(self.sig(e, d) for e in node))))
        else:
            da = _instance_dict(node, t)
            parts = [self.sig(da, depth) if isinstance(da, dict) else 0]
            parts += [self.sig(_slot_value(node, n), d) for n in self.slot_names(t)]
            s = hash((t, tuple(parts)))
        self.sigs[memo] = s
        return s

    # ---------------------------------------------------------------------- run

    def run(self, a: Any, b: Any) -> bool:
        self.pair_all(((a, b),), expand=True)
        while self.groups:
            # Fresh groups first, then the smallest waiting one (see settle).
            tier, _, _, left, right, items, mark = heapq.heappop(self.groups)
            self.settle(left, right, items, tier, mark)
            if self.work:
                self.pair_all((), expand=True)
        # An object reachable from both values must be paired with itself.
        for i in self.ab.keys() & self.ba.keys():
            if _addr(self.ab[i]) != i:
                return False
        return True


def _own_dict(cls: type) -> bool:
    """Whether ``x.__dict__`` is the instance's dict: the first ``__dict__`` of the MRO is
    the descriptor that ``type`` made for a class with instance dicts."""
    for c in cls.__mro__:
        attr = c.__dict__.get("__dict__")
        if attr is not None:
            return type(attr) is types.GetSetDescriptorType and attr.__objclass__ is c
    return False


def _answers_class(cls: type) -> bool:
    return "__class__" in cls.__dict__ or "__getattribute__" in cls.__dict__


def _identity_hashed(cls: type) -> bool:
    return getattr(cls, "__hash__", None) is object.__hash__


def _python_new(cls: type) -> bool:
    new = cls.__dict__.get("__new__")
    return new is None or isinstance(new, (staticmethod, types.FunctionType))
