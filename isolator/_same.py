"""Whether two object graphs are the same value: an isomorphism check, without recursion.

``learn_memo`` keeps a memo-cache entry once a fresh computation gives back "the same"
value.  Values such as parser grammars are graphs of plain objects that compare by
identity, hold sets of identity-hashed objects (whose iteration order follows memory
addresses) and dicts keyed by such objects, and have cycles and long paths.  Two such
values are the same when a one-to-one map between their reachable objects exists that
keeps every type, every atomic value and every edge:

* lists and tuples pair their items by position; dicts with keys found in both (by
  equality) pair the values; object attributes, ``__slots__`` and bound methods pair by
  name; objects with state in C (dates, decimals, patterns) compare with their own ``==``;
* the remaining items of sets and dicts (keys that are objects hashed by identity) pair
  by a structural signature, refined until the items part; items alike at every depth
  wait until other pairings tell them apart, and only then is one pairing guessed;
* objects reachable from both values (classes, functions, enum members, shared
  singletons) must map to themselves.

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
import heapq
import types
from collections import deque
from typing import Any, Final

from isolator._state import _slot_names

_ATOMS: Final = (int, float, complex, str, bytes, bool, type(None))
_ATOM_TYPES: Final = frozenset(_ATOMS)
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
_BUDGET: Final = 400_000
_SIG_DEPTH: Final = 40
_MISSING: Final = object()
# Tiers of open groups (sets, lists, dict items left to pair), settled in this order.
_FRESH, _WAITING, _ALIKE = 0, 1, 2
_HEAPTYPE: Final = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class defined by a class statement


class _NotSame(Exception):
    pass


def same_value(a: object, b: object, budget: int = _BUDGET) -> bool:
    """Whether ``a`` and ``b`` are isomorphic object graphs (see the module docstring)."""
    if a is b:
        return True
    try:
        return _Matcher(budget).run(a, b)
    except _NotSame:
        return False
    except Exception:  # a broken __eq__, __hash__ or property: cannot tell
        return False


class _Matcher:
    def __init__(self, budget: int):
        self.budget = budget
        self.ab: dict[int, Any] = {}
        self.ba: dict[int, Any] = {}
        self.work: deque[tuple[Any, Any]] = deque()
        # Groups left to pair: (tier, size, order, a items, b items, whether the items
        # are (key, value) pairs, number of pairs made when the group was opened).
        self.groups: list[tuple[int, int, int, list[Any], list[Any], bool, int]] = []
        self.sigs: dict[tuple[int, int], int] = {}
        self.slots: dict[type, tuple[str, ...]] = {}
        self.plains: dict[type, bool] = {}
        self.order = 0

    def spend(self, n: int = 1) -> None:
        self.budget -= n
        if self.budget < 0:
            raise _NotSame

    # ------------------------------------------------------------------ pairing

    def pair(self, x: Any, y: Any) -> None:
        t = type(x)
        if t in _ATOM_TYPES or isinstance(x, _ATOMS):
            # Equal atoms may or may not be one object: no identity is recorded for them.
            if t is not type(y) or not (x is y or x == y):
                raise _NotSame
            return
        ix, iy = id(x), id(y)
        mapped = self.ab.get(ix, _MISSING)
        if mapped is not _MISSING:
            if mapped is not y:
                raise _NotSame
            return
        if iy in self.ba:
            raise _NotSame
        if x is y:
            self.ab[ix] = x
            self.ba[iy] = y
            return
        if t is not type(y) or isinstance(x, _IDENTITY):
            raise _NotSame  # distinct code objects, types or modules
        self.budget -= 1
        if self.budget < 0:
            raise _NotSame
        self.ab[ix] = y
        self.ba[iy] = x
        self.work.append((x, y))

    def expand(self, x: Any, y: Any) -> None:
        """Pair what ``x`` and ``y`` refer to (they are already paired with each other)."""
        if isinstance(x, (list, tuple)):
            if len(x) != len(y):
                raise _NotSame
            self.spend(len(x))
            if isinstance(x, list):
                self.expand_bag(x, y)
            else:
                for p, q in zip(x, y):
                    self.pair(p, q)
        elif isinstance(x, dict):
            self.expand_dict(x, y)
        elif isinstance(x, (set, frozenset)):
            self.expand_set(x, y)
        elif isinstance(x, types.MethodType):
            if x.__func__ is not y.__func__:
                raise _NotSame
            self.pair(x.__self__, y.__self__)
            return
        elif not self.plain(type(x)):
            # A leaf with state of its own in C (decimals, dates, patterns, partials):
            # only its own equality can tell.
            if getattr(type(x), "__eq__", None) is object.__eq__ or not bool(x == y):
                raise _NotSame
            return
        da = getattr(x, "__dict__", None)
        if isinstance(da, dict):
            db = getattr(y, "__dict__", None)
            if not isinstance(db, dict):
                raise _NotSame
            self.pair(da, db)
        for name in self.slot_names(type(x)):
            self.pair(getattr(x, name, _MISSING), getattr(y, name, _MISSING))

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

    def expand_dict(self, x: dict[Any, Any], y: dict[Any, Any]) -> None:
        if len(x) != len(y):
            raise _NotSame
        if getattr(x, "default_factory", None) is not getattr(y, "default_factory", None):
            raise _NotSame
        self.spend(len(x))
        left: list[Any] = []
        found = 0
        for k, v in x.items():
            # A key found in both is the same object or an equal value (its own equality
            # is trusted, as for set members).
            w = y.get(k, _MISSING)
            if w is _MISSING:
                left.append((k, v))
                continue
            found += 1
            self.pair(v, w)
        if left:
            if found:
                right = [(k, v) for k, v in y.items() if k not in x]
            else:
                right = list(y.items())
            if len(right) != len(left):
                raise _NotSame
            self.open_group(left, right, True)

    def expand_bag(self, x: list[Any], y: list[Any]) -> None:
        """A list whose objects may come in another order (the order of a computation
        over identity-hashed sets follows addresses); atoms keep their positions."""
        left: list[Any] = []
        right: list[Any] = []
        for p, q in zip(x, y):
            pa, qa = isinstance(p, _ATOMS), isinstance(q, _ATOMS)
            if pa or qa:
                if not (pa and qa and type(p) is type(q) and p == q):
                    raise _NotSame
                continue
            left.append(p)
            right.append(q)
        if left:
            self.open_group(left, right, False)

    def expand_set(self, x: Any, y: Any) -> None:
        if len(x) != len(y):
            raise _NotSame
        self.spend(len(x))
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
        rights: dict[int, list[Any]] = {}
        for kv in right:
            rights.setdefault(id(kv[0] if items else kv), []).append(kv)
        rest_l: list[Any] = []
        for kv in left:
            partner = self.ab.get(id(kv[0] if items else kv), _MISSING)
            if partner is _MISSING:
                rest_l.append(kv)
                continue
            others = rights.get(id(partner))
            if not others:
                raise _NotSame
            other = others.pop()
            if items:
                self.pair(kv[1], other[1])
        rest_r = [kv for kvs in rights.values() for kv in kvs]
        if len(rest_l) != len(rest_r):
            raise _NotSame
        if not rest_l:
            return
        if len(rest_l) == 1:
            self.pair_member(rest_l[0], rest_r[0], items)
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
            for k, members in by_l.items():
                if len(members) == 1:
                    self.pair_member(members[0], by_r[k][0], items)
            alike_l = [m for ms in by_l.values() if len(ms) > 1 for m in ms]
            alike_r = [m for k, ms in by_l.items() if len(ms) > 1 for m in by_r[k]]
            self.open_group(alike_l, alike_r, items, _ALIKE)
            return
        # Members alike to the depth that parts them are paired in order: a wrong guess
        # ends in a contradiction later, never in a false "same".
        for k, members in by_l.items():
            for p, q in zip(members, by_r[k]):
                self.pair_member(p, q, items)

    def pair_member(self, p: Any, q: Any, items: bool) -> None:
        if items:
            self.pair(p[0], q[0])
            self.pair(p[1], q[1])
        else:
            self.pair(p, q)

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
        if t in _ATOMS or isinstance(node, _ATOMS):
            return hash((t, node))
        if isinstance(node, _IDENTITY):
            return hash((t, id(node)))
        partner = self.ab.get(id(node), _MISSING)
        if partner is not _MISSING or id(node) in self.ba:
            # Already paired: both sides' mapped nodes must sign alike.
            key = id(node) if partner is not _MISSING else id(self.ba[id(node)])
            return hash(("paired", key))
        if depth <= 0:
            return hash(t)
        memo = (id(node), depth)
        got = self.sigs.get(memo)
        if got is not None:
            return got
        self.spend()
        d = depth - 1
        if isinstance(node, (list, tuple)):
            s = hash((t, tuple(self.sig(c, d) for c in node)))
        elif isinstance(node, dict):
            items = sorted(hash((self.sig(k, d), self.sig(v, d))) for k, v in node.items())
            s = hash((t, tuple(items)))
        elif isinstance(node, (set, frozenset)):
            s = hash((t, tuple(sorted(self.sig(e, d) for e in node))))
        else:
            da = getattr(node, "__dict__", None)
            parts = [self.sig(da, depth) if isinstance(da, dict) else 0]
            parts += [self.sig(getattr(node, n, None), d) for n in self.slot_names(t)]
            s = hash((t, tuple(parts)))
        self.sigs[memo] = s
        return s

    # ---------------------------------------------------------------------- run

    def run(self, a: Any, b: Any) -> bool:
        self.pair(a, b)
        while True:
            while self.work:
                x, y = self.work.popleft()
                self.expand(x, y)
            if not self.groups:
                break
            # Fresh groups first, then the smallest waiting one (see settle).
            tier, _, _, left, right, items, mark = heapq.heappop(self.groups)
            self.settle(left, right, items, tier, mark)
        # An object reachable from both values must be paired with itself.
        for i in self.ab.keys() & self.ba.keys():
            if id(self.ab[i]) != i:
                return False
        return True


def _identity_hashed(cls: type) -> bool:
    return getattr(cls, "__hash__", None) is object.__hash__


def _python_new(cls: type) -> bool:
    new = cls.__dict__.get("__new__")
    return new is None or isinstance(new, (staticmethod, types.FunctionType))
