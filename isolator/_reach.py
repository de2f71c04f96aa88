"""Which modules' state a test can reach: its module, and every project module that one
refers to (runtime references of its globals and its import statements, at any depth),
transitively.  The resetter checks only those after a test; a full check runs whenever the
test module changes, so that anything reached by other paths is still put back."""

from __future__ import annotations

import itertools
import operator
import os
import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from isolator._state import (
    CACHES,
    CELLS,
    DEFAULTS,
    LIVES,
    OPAQUE,
    SLOTS,
    TAGS,
    cache_sizer,
    image_epoch,
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


def imports_of(modname: str, filename: str | None, package: str | None) -> frozenset[str]:
    if not filename or not filename.endswith(".py"):
        return frozenset()
    try:
        mtime = os.stat(filename).st_mtime_ns
    except OSError:
        return frozenset()
    return _imports(filename, mtime, package or "")


class Scope:
    """The tables one test can reach, laid out so that a clean test costs a few C-level
    passes (``map`` over parallel lists), not a Python loop per watch: dicts are checked
    through their version tags (one read each, whatever their size; see ``_versions``),
    slot-only objects through their referents, table by table (see ``_state._SlotCheck``),
    other watches by comparing with their snapshots."""

    def __init__(self, tables: list[StateTable], sizers: dict[Any, tuple[Any, Any]]):
        self.tables = tables
        for t in tables:
            t.split()
        self.tagged = [t for t in tables if t.vcells]
        self.slotted = [t for t in tables if t.slots is not None]
        self.lives = [t.lives[i] for t in tables for i in t.cidx]
        self.snaps = [t.snaps[i] for t in tables for i in t.cidx]
        self.cells = [c for t in tables for _, c, _ in t.cells]
        self.cell_old = [old for t in tables for _, _, old in t.cells]
        self.fns = [fn for t in tables for _, fn, _, _ in t.defaults]
        self.fn_defaults = [d for t in tables for _, _, d, _ in t.defaults]
        self.fn_kwdefaults = [kw for t in tables for _, _, _, kw in t.defaults]
        self.caches = [_sizer(sizers, fn) for t in tables for _, fn, _ in t.caches]
        self.cache_sizes = [n for t in tables for _, _, n in t.caches]
        self.opaque = [(t, i) for t in tables for i in range(len(t.opaque))]
        # The table each flat entry belongs to, to find the dirty tables (slow path only).
        self._live_owner = [t for t in tables for _ in t.cidx]
        self._cell_owner = [t for t in tables for _ in t.cells]
        self._fn_owner = [t for t in tables for _ in t.defaults]
        self._cache_owner = [t for t in tables for _ in t.caches]
        self.hits: dict[StateTable, int] | None = None
        self._epoch = -1
        self._views_epoch = -1
        self.views: list[memoryview] = []
        self.spans: list[tuple[int, int]] = []
        self.image = b""

    def _sync_image(self) -> None:
        """The tagged tables' views and images laid end to end (the image made again
        whenever a table's image changed: after a test that wrote a tagged dict; the views,
        hundreds, only when a table's were made again)."""
        if self._views_epoch != views_epoch[0]:
            self.views = [v for t in self.tagged for v in t.vviews]
            ends = list(itertools.accumulate(8 * len(t.vviews) for t in self.tagged))
            self.spans = list(zip([0, *ends], ends))  # each tagged table's bytes in the image
            self._views_epoch = views_epoch[0]
        self.image = b"".join([t.vimage for t in self.tagged])
        self._epoch = image_epoch[0]

    def dirty_tables(self, defaults: bool = True) -> list[StateTable]:
        """The tables in scope that may have changed (in scope order); [] when none did.

        One pass over the flat lists, at C speed except for the tables' own checks; after
        a clean test, one comparison per kind of watch.  ``self.hits`` tells, for each
        table returned, which kinds of its watches may have changed (None: any).
        ``defaults=False`` skips functions' defaults (known not rebound since the last
        check: reading them raises an audit event, which costs a Python call per hook)."""
        hits: dict[StateTable, int] = {}
        self.hits = hits
        try:
            if self._epoch != image_epoch[0]:
                self._sync_image()
            now = b"".join(self.views)
            if now != self.image:
                # Each table's part of the tags just read (a slice: a memcmp, where a
                # memoryview would compare byte by byte).
                for t, (a, b) in zip(self.tagged, self.spans):
                    if now[a:b] != t.vimage:
                        hits[t] = TAGS
            for t in self.slotted:
                if t.dirty_slots():
                    hits[t] = hits.get(t, 0) | SLOTS
            if any(map(operator.ne, self.lives, self.snaps)):
                flags = list(map(operator.ne, self.lives, self.snaps))
                for t in itertools.compress(self._live_owner, flags):
                    hits[t] = hits.get(t, 0) | LIVES
            if self.cells and any(map(operator.is_not, map(_CELL, self.cells), self.cell_old)):
                flags = list(map(operator.is_not, map(_CELL, self.cells), self.cell_old))
                for t in itertools.compress(self._cell_owner, flags):
                    hits[t] = hits.get(t, 0) | CELLS
            if self.caches and any(map(operator.ne, map(len, self.caches), self.cache_sizes)):
                flags = list(map(operator.ne, map(len, self.caches), self.cache_sizes))
                for t in itertools.compress(self._cache_owner, flags):
                    hits[t] = hits.get(t, 0) | CACHES
            if defaults and self.fns:
                fns, owners = self.fns, self._fn_owner
                for got, old in (
                    (map(_DEFAULTS, fns), self.fn_defaults),
                    (map(_KWDEFAULTS, fns), self.fn_kwdefaults),
                ):
                    flags = list(map(operator.is_not, got, old))
                    if any(flags):
                        for t in itertools.compress(owners, flags):
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


def _sizer(sizers: dict[Any, tuple[Any, Any]], fn: Any) -> Any:
    """``cache_sizer(fn)``, made once per cache: the mapping a cache wrapper holds is never
    replaced (clearing empties it), and finding it walks the wrapper's referents.  Keyed
    by the cache itself (cache wrappers hash by identity; id() would raise an audit event
    per cache per scope), or by its id when it is not hashable."""
    try:
        got = sizers.get(fn)
        key = fn
    except TypeError:
        key = id(fn)
        got = sizers.get(key)
    if got is None or got[0] is not fn:
        got = sizers[key] = (fn, cache_sizer(fn))
    return got[1]


_CELL = operator.attrgetter("cell_contents")
_DEFAULTS = operator.attrgetter("__defaults__")
_KWDEFAULTS = operator.attrgetter("__kwdefaults__")


class Reach:
    """Transitive reach between the tracked modules' tables."""

    def __init__(self, tables: dict[str, StateTable], previous: Reach | None = None):
        self.tables = tables
        self._closure: dict[tuple[str, ...], Scope] = {}
        self._all: Scope | None = None
        self._edges: dict[str, set[str]] = {}
        self._names: dict[tuple[str, ...], list[str]] = {}
        # Memo caches' sizers by cache (or its id): (cache, sizer).
        self._sizers: dict[Any, tuple[Any, Any]] = {} if previous is None else previous._sizers
        if previous is not None and previous.tables.keys() == tables.keys():
            # Same modules (a fixture's changes joined the baseline): the edges and the
            # modules each scope holds are unchanged; only the scopes' flat copies of the
            # snapshots are made again.
            self._edges = previous._edges
            self._names = previous._names

    def _neighbours(self, name: str) -> set[str]:
        got = self._edges.get(name)
        if got is not None:
            return got
        import sys

        t = self.tables.get(name)
        mod = sys.modules.get(name)
        names: set[str] = set(t.refs) if t is not None else set()
        if mod is not None:
            names |= imports_of(
                name, getattr(mod, "__file__", None), getattr(mod, "__package__", None)
            )
        out: set[str] = set()
        is_package = mod is not None and hasattr(mod, "__path__")
        for n in names:
            if is_package and n.startswith(name + "."):
                # A package that imports its submodules does not reach their state for a
                # caller: the caller names the submodules it uses in its own imports.
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
            self._all = Scope(list(self.tables.values()), self._sizers)
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
        got = Scope([self.tables[n] for n in names], self._sizers)
        self._closure[key] = got
        return got
