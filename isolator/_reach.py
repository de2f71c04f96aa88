"""Which modules' state a test can reach: its module, and every project module that one
refers to (runtime references of its globals and its import statements, at any depth),
transitively.  The resetter checks only those after a test; a full check runs whenever the
test module changes, so that anything reached by other paths is still put back."""

from __future__ import annotations

import array
import bisect
import collections
import itertools
import operator
import os
import re
from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Final

from isolator._state import (
    CACHES,
    CELLS,
    DEFAULTS,
    LIVES,
    OPAQUE,
    SLOTS,
    TAGS,
    _ClassOf,
    any_subclassed,
    image_epoch,
    lengths,
    moved_entries,
    ne_all,
    parts_epoch,
    sizes_epoch,
    views_epoch,
)

if TYPE_CHECKING:
    from isolator._state import StateTable


_IMPORT_RE = re.compile(
    r"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]+)"
    r"|import[ \t]+([^\n#;]+))",
    re.MULTILINE,
)


@lru_cache(maxsize=4096)
def _imports(filename: str, mtime_ns: int, package: str) -> frozenset[str]:
    """Module names imported anywhere in a source file (relative imports resolved).

    A regular expression, not a parse: this runs once per module at session start, and
    over-approximating (an import inside a string) only widens what gets checked.
    """
    try:
        with open(filename, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return frozenset()
    out: set[str] = set()
    for m in _import_matches(text):
        frm, names, plain = m.group(1), m.group(2), m.group(3)
        if plain is not None:
            for part in plain.split(","):
                name = part.split(" as ")[0].strip()
                if name:
                    out.add(name)
            continue
        base = frm or ""
        level = len(base) - len(base.lstrip("."))
        base = base.lstrip(".")
        if level:
            parts = package.split(".") if package else []
            if level > 1:
                parts = parts[: len(parts) - level + 1]
            base = ".".join(p for p in (*parts, base) if p)
        out.add(base)
        for part in names.strip("()").replace("\\", " ").split(","):
            name = part.split(" as ")[0].strip()
            if name and name != "*":
                out.add(f"{base}.{name}")
    return frozenset(out)


def _import_matches(text: str) -> list[re.Match[str]]:
    """What ``_IMPORT_RE.finditer(text)`` finds, found faster.

    Every match has the word ``import`` on its first line, so the pattern is tried only at
    the starts of such lines (a literal search runs at C speed; trying a pattern that
    starts with ``^`` at every position of a long module takes a millisecond), and, as
    ``finditer`` does, never inside the previous match (a parenthesized name list)."""
    out: list[re.Match[str]] = []
    end = 0
    last_start = -1
    pos = text.find("import")
    while pos >= 0:
        start = text.rfind("\n", 0, pos) + 1
        if start != last_start and start >= end:
            last_start = start
            m = _IMPORT_RE.match(text, start)
            if m is not None:
                out.append(m)
                end = m.end()
        pos = text.find("import", max(pos + 6, end))
    return out


# Our own reference: asked inside a test's import, where a test may have replaced os.stat
# (a checker of blocking calls).
_os_stat: Final = os.stat


def imports_of(modname: str, filename: str | None, package: str | None) -> frozenset[str]:
    if not filename or not filename.endswith(".py"):
        return frozenset()
    try:
        mtime = _os_stat(filename).st_mtime_ns
    except OSError:
        return frozenset()
    return _imports(filename, mtime, package or "")


class Scope:
    """The tables one test can reach, laid out so that a clean test costs a few C-level
    passes (``map`` over parallel lists), not a Python loop per watch: dicts are checked
    through their version tags (one read each, whatever their size; see ``_versions``),
    slot-only objects through their referents, table by table (see ``_state._SlotCheck``),
    other watches by comparing with their snapshots."""

    # The flat lists: the tables' parts end to end (_PART_NAMES), and their segments
    # (_SEG_NAMES, see _segments).
    lives: list[Any]
    snaps: list[Any]
    cells: list[Any]
    cell_old: list[Any]
    fns: list[Any]
    fn_defaults: list[Any]
    fn_kwdefaults: list[Any]
    caches: list[Any]
    cache_sizes: list[Any]
    plain_lives: list[Any]
    plain_snaps: list[Any]
    odd_lives: list[Any]
    odd_snaps: list[Any]
    plain_cells: list[Any]
    plain_old: list[Any]
    class_objs: list[Any]
    subclassed: bool
    class_old: list[Any]

    def __init__(self, tables: list[StateTable]):
        self.tables = tables
        self.hits: dict[StateTable, int] | None = None
        self._layout()

    def _layout(self) -> None:
        """The flat lists, joined from the tables' own (``StateTable.parts``, and their
        :func:`_segments`) in C: made again, without copying any table's parts, when many
        tables' parts were (else :meth:`_splice` puts the few new ones in place)."""
        tables = self.tables
        parts = list(map(_PARTS, tables))
        if None in parts:  # a table's parts were dropped: made again
            parts = [t.parts() for t in tables]
        self._parts = parts
        self._segs = list(map(_table_segments, tables, parts))
        self._parts_epoch = parts_epoch[0]
        self._sizes_epoch = sizes_epoch[0]
        for name, get in zip(_PART_NAMES, _PART):
            setattr(self, name, list(_cat(map(get, parts))))
        for name, get in zip(_SEG_NAMES, _SEG):
            setattr(self, name, list(_cat(map(get, self._segs))))
        self._per_table()

    def _splice(self) -> bool:
        """Put the parts made again of a few tables (a learned memo entry's watches were
        added to one) in place of their old ones in the flat lists: a scope of hundreds of
        tables is not joined again after each test that learned an entry.  False: too many
        changed (:meth:`_layout` then)."""
        tables = self.tables
        old = self._parts
        changed = [j for j, t in enumerate(tables) if t._parts is not old[j]]
        if len(changed) > _FEW_SPLICED:
            return False
        flats = [getattr(self, name) for name in _PART_NAMES]
        seg_flats = [getattr(self, name) for name in _SEG_NAMES]
        segs = self._segs
        # (``old`` and ``segs`` follow each splice: the next one's offsets hold.)
        for j in changed:
            p = tables[j].parts()
            sp = _table_segments(tables[j], p)
            for flat, get in zip(flats, _PART):
                a = sum(map(len, map(get, old[:j])))
                flat[a : a + len(get(old[j]))] = get(p)
            for flat, get in zip(seg_flats, _SEG):
                a = sum(map(len, map(get, segs[:j])))
                flat[a : a + len(get(segs[j]))] = get(sp)
            old[j] = p
            segs[j] = sp
        self._per_table()
        return True

    def _per_table(self) -> None:
        """What is read table by table (tags, slots, opaque objects), after the flat
        lists were made or spliced."""
        tables = self.tables
        # Whether a compared object is of a container subclass (compared as its built-in
        # base compares: see _state.ne_all); only odd lives can be.
        self.subclassed = any_subclassed(self.odd_lives)
        self.tagged = list(itertools.compress(tables, map(_VCELLS, tables)))
        self.slotted = list(
            itertools.compress(tables, map(operator.is_not, map(_SLOTS, tables), _NONES))
        )
        self.opaque = (
            [(t, i) for t in tables if t.opaque for i in range(len(t.opaque))]
            if any(map(_OPAQUE, tables))
            else []
        )
        self._epoch = -1
        self._views_epoch = -1
        self.views: list[memoryview] = []
        self.ends: list[int] = []
        self.image = b""

    def _fresh(self) -> None:
        if self._parts_epoch != parts_epoch[0]:
            if any(map(operator.is_not, map(_PARTS, self.tables), self._parts)):
                if not self._splice():
                    self._layout()
            self._parts_epoch = parts_epoch[0]
        if self._sizes_epoch != sizes_epoch[0]:
            # A cache's sizer or count changed in its table's parts (in place).
            parts = self._parts
            self.caches = list(_cat(map(_PART[_CACHE_SIZERS], parts)))
            self.cache_sizes = list(_cat(map(_PART[_CACHE_SIZES], parts)))
            self._sizes_epoch = sizes_epoch[0]

    def compared(self) -> list[Any]:
        """The live objects of the watches compared with their snapshots, tables in scope
        order (``tagged`` is up to date after this call, too)."""
        self._fresh()
        return self.lives

    def _owners(self, k: int) -> Iterator[StateTable]:
        """The table of each entry of the flat list of part ``k`` (slow path only)."""
        return _cat(map(itertools.repeat, self.tables, map(len, map(_PART[k], self._parts))))

    def _sync_views(self) -> None:
        """The tagged tables' views laid end to end (hundreds: joined again only when a
        table's were made again)."""
        if self._views_epoch != views_epoch[0]:
            tagged = self.tagged
            self.views = list(_cat(map(_VVIEWS, tagged)))
            # Where each tagged table's tags end in the image, counted in tags.
            self.ends = list(itertools.accumulate(map(len, map(_VVIEWS, tagged))))
            self._views_epoch = views_epoch[0]

    def _sync_image(self) -> None:
        """The tagged tables' views and images laid end to end (the image made again
        whenever a table's image changed: after a test that wrote a tagged dict)."""
        self._sync_views()
        self.image = b"".join(map(_VIMAGE, self.tagged))
        self._epoch = image_epoch[0]

    def tags(self) -> bytes:
        """Every tagged dict's version tag as it is now, in ``tagged`` order (one C call
        over the joined views)."""
        self._fresh()
        self._sync_views()
        return b"".join(self.views)

    def lengths(self) -> list[int]:
        """The length of every compared object: the builtin containers' in C, whatever
        the others are (one container subclass among them must not send thousands of
        lists through :func:`length` one Python call each)."""
        self._fresh()
        return [*map(len, self.plain_lives), *lengths(self.odd_lives, self.subclassed)]

    def dirty_tables(self, defaults: bool = True, classes: bool = True) -> list[StateTable]:
        """The tables in scope that may have changed (in scope order); [] when none did.

        One pass over the flat lists, at C speed except for the tables' own checks; after
        a clean test, one comparison per kind of watch.  ``self.hits`` tells, for each
        table returned, which kinds of its watches may have changed (None: any).
        ``defaults=False`` skips functions' defaults (known not rebound since the last
        check: reading them raises an audit event, which costs a Python call per hook).
        ``classes=False`` skips the classes of watched instances (known not assigned since
        the last check: assigning ``__class__`` raises an audit event too)."""
        hits: dict[StateTable, int] = {}
        self.hits = hits
        try:
            self._fresh()
            if self._epoch != image_epoch[0]:
                self._sync_image()
            now = b"".join(self.views)
            if now != self.image:
                tagged, ends = self.tagged, self.ends
                if len(tagged) <= _FEW_TABLES or len(now) != len(self.image):
                    # Each table's part of the tags just read (a slice: a memcmp, where a
                    # memoryview would compare byte by byte).
                    a = 0
                    for t, end in zip(tagged, ends):
                        b = 8 * end
                        if now[a:b] != t.vimage:
                            hits[t] = TAGS
                        a = b
                else:
                    # Many tables: the tags that moved, found by halves, name theirs.
                    for j in moved_entries(now, self.image):
                        hits[tagged[bisect.bisect_right(ends, j)]] = TAGS
            for t in self.slotted:
                if t.dirty_slots():
                    hits[t] = hits.get(t, 0) | SLOTS
            # The two lists compared as lists: pair by pair in C, identity first, ending at
            # the first difference (a third faster than any() over map(ne)).
            if self.plain_lives != self.plain_snaps or (
                self.odd_lives and any(ne_all(self.odd_lives, self.odd_snaps, self.subclassed))
            ):
                differ = ne_all(self.lives, self.snaps, self.subclassed)
                for t in itertools.compress(self._owners(_LIVES), differ):
                    hits[t] = hits.get(t, 0) | LIVES
            if self.cells and (
                any(map(operator.is_not, map(_CELL, self.plain_cells), self.plain_old))
                or (
                    classes
                    and any(map(operator.is_not, map(type, self.class_objs), self.class_old))
                )
            ):
                flags = map(operator.is_not, map(_CELL, self.cells), self.cell_old)
                for t in itertools.compress(self._owners(_CELLS), flags):
                    hits[t] = hits.get(t, 0) | CELLS
            if self.caches and any(map(operator.ne, map(len, self.caches), self.cache_sizes)):
                flags = map(operator.ne, map(len, self.caches), self.cache_sizes)
                for t in itertools.compress(self._owners(_CACHE_SIZERS), flags):
                    hits[t] = hits.get(t, 0) | CACHES
            if defaults and self.fns:
                fns = self.fns
                for got, old in (
                    (map(_DEFAULTS, fns), self.fn_defaults),
                    (map(_KWDEFAULTS, fns), self.fn_kwdefaults),
                ):
                    flags_l = list(map(operator.is_not, got, old))
                    if any(flags_l):
                        for t in itertools.compress(self._owners(_FNS), flags_l):
                            hits[t] = hits.get(t, 0) | DEFAULTS
            for t, i in self.opaque:
                u = t.opaque[i]
                if u.fingerprint(u.obj) != t.opaque_fps[i]:
                    hits[t] = hits.get(t, 0) | OPAQUE
        except Exception:
            self.hits = None
            return list(self.tables)  # an __eq__ raised, an empty cell: look at everything
        if not hits:
            return []
        return [t for t in self.tables if t in hits]  # tables hash by identity


_PARTS = operator.attrgetter("_parts")
# Types whose == runs no code of the project's or a library's (only their elements').
_PLAIN_LIVES: Final = frozenset({list, set, collections.deque, bytearray, array.array})
# Up to this many tagged tables a scope compares each one's tags; beyond, moved_entries
# finds the few tags that moved among hundreds faster than a slice per table.
_FEW_TABLES = 16
_VCELLS = operator.attrgetter("vcells")
_VVIEWS = operator.attrgetter("vviews")
_VIMAGE = operator.attrgetter("vimage")
_SLOTS = operator.attrgetter("slots")
_OPAQUE = operator.attrgetter("opaque")
_NONES = itertools.repeat(None)
# The positions in a table's parts (StateTable.parts).
(
    _LIVES,
    _SNAPS,
    _CELLS,
    _CELL_OLD,
    _FNS,
    _FN_DEFAULTS,
    _FN_KWDEFAULTS,
    _CACHE_SIZERS,
    _CACHE_SIZES,
) = range(9)
_PART = [operator.itemgetter(k) for k in range(9)]
# The scope's flat list of each part, in that order.
_PART_NAMES: Final = (
    "lives", "snaps", "cells", "cell_old", "fns", "fn_defaults", "fn_kwdefaults", "caches",
    "cache_sizes",
)  # fmt: skip
# The positions in a table's segments (_segments), and the scope's flat list of each.
_SEG = [operator.itemgetter(k) for k in range(8)]
_SEG_NAMES: Final = (
    "plain_lives", "plain_snaps", "odd_lives", "odd_snaps", "plain_cells", "plain_old",
    "class_objs", "class_old",
)  # fmt: skip
# Up to this many tables whose parts were made again are spliced into a scope's lists.
_FEW_SPLICED = 8
_cat = itertools.chain.from_iterable
_CELL = operator.attrgetter("cell_contents")
_DEFAULTS = operator.attrgetter("__defaults__")
_KWDEFAULTS = operator.attrgetter("__kwdefaults__")


def _segments(p: Any) -> tuple[list[Any], ...]:
    """A table's compared watches and cells as a scope checks them: builtin containers
    (compared as two lists in one C call, pair by pair, identity first) apart from objects
    of other types (a list subclass whose __eq__ warns, importlib.metadata's EntryPoints:
    pair by pair with !=, as their tables do); and the watched classes of instances
    (``_ClassOf``, a Python property each, read in C as ``type(obj)``: a test module's
    thousands of objects cost a pass, not a Python call apiece) apart from other cells.
    The combined lists (the parts) still name the owners.  A table with none of the odd
    kind shares its parts' lists."""
    lives, snaps, cells, old = p[_LIVES], p[_SNAPS], p[_CELLS], p[_CELL_OLD]
    plain = list(map(_PLAIN_LIVES.__contains__, map(type, lives)))
    if all(plain):
        plain_lives, plain_snaps, odd_lives, odd_snaps = lives, snaps, [], []
    else:
        odd = list(map(operator.not_, plain))
        plain_lives = list(itertools.compress(lives, plain))
        plain_snaps = list(itertools.compress(snaps, plain))
        odd_lives = list(itertools.compress(lives, odd))
        odd_snaps = list(itertools.compress(snaps, odd))
    is_class = list(map(operator.is_, map(type, cells), itertools.repeat(_ClassOf)))
    if any(is_class):
        other = list(map(operator.not_, is_class))
        plain_cells = list(itertools.compress(cells, other))
        plain_old = list(itertools.compress(old, other))
        class_objs = [c.obj for c in itertools.compress(cells, is_class)]
        class_old = list(itertools.compress(old, is_class))
    else:
        plain_cells, plain_old, class_objs, class_old = cells, old, [], []
    return (
        plain_lives,
        plain_snaps,
        odd_lives,
        odd_snaps,
        plain_cells,
        plain_old,
        class_objs,
        class_old,
    )


def _table_segments(t: StateTable, p: Any) -> tuple[list[Any], ...]:
    """:func:`_segments` of a table's parts, kept on the table while those parts stay: a
    fixture that changed one table makes every scope anew, and hundreds of unchanged
    tables are not split again (a scope changes its lists only when parts change)."""
    got = t.segs
    if got is not None and got[0] is p:
        return got[1]
    segs = _segments(p)
    t.segs = (p, segs)
    return segs


class Reach:
    """Transitive reach between the tracked modules' tables."""

    def __init__(self, tables: dict[str, StateTable], previous: Reach | None = None):
        self.tables = tables
        self._closure: dict[tuple[str, ...], Scope] = {}
        self._all: Scope | None = None
        self._edges: dict[str, set[str]] = {}
        self._names: dict[tuple[str, ...], list[str]] = {}
        if previous is not None and previous.tables.keys() == tables.keys():
            # Same modules (a fixture's changes joined the baseline): the edges and the
            # modules each scope holds are unchanged.
            self._edges = previous._edges
            self._names = previous._names
            if all(map(operator.is_, tables.values(), previous.tables.values())):
                # The same tables, too: the scopes are kept, and lay out again the parts
                # of those tables that changed when next checked (Scope._layout).
                self._closure = previous._closure
                self._all = previous._all

    def _neighbours(self, name: str) -> set[str]:
        got = self._edges.get(name)
        if got is not None:
            return got
        import sys

        t = self.tables.get(name)
        mod = sys.modules.get(name)
        names: set[str] = set(t.refs) if t is not None else set()
        exported: set[str] = t.obj_refs if t is not None else set()
        if mod is not None:
            names |= imports_of(
                name, getattr(mod, "__file__", None), getattr(mod, "__package__", None)
            )
        out: set[str] = set()
        is_package = mod is not None and hasattr(mod, "__path__")
        for n in names:
            if is_package and n.startswith(name + ".") and n not in exported:
                # A package that imports its submodules does not reach their state for a
                # caller (the caller names the submodules it uses in its own imports),
                # unless it re-exports their functions, classes or objects: a caller of
                # ``pkg.code()`` runs ``pkg.api``'s code.
                continue
            # `import a.b.c` reaches a, a.b and a.b.c.
            parts = n.split(".")
            for i in range(1, len(parts) + 1):
                prefix = ".".join(parts[:i])
                if prefix in self.tables:
                    out.add(prefix)
        self._edges[name] = out
        return out

    def all(self) -> Scope:
        if self._all is None:
            self._all = Scope(list(self.tables.values()))
        return self._all

    def tables_for(self, modname: str, also: list[str]) -> Scope:
        key = (modname, *also)
        got = self._closure.get(key)
        if got is not None:
            return got
        names = self._names.get(key)
        if names is None:
            seen: set[str] = set()
            todo = [modname, *also]
            while todo:
                n = todo.pop()
                if n in seen:
                    continue
                seen.add(n)
                todo.extend(self._neighbours(n) - seen)
            names = self._names[key] = [n for n in sorted(seen) if n in self.tables]
        got = Scope([self.tables[n] for n in names])
        self._closure[key] = got
        return got
