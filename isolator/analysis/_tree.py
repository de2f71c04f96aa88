"""Analyse files and whole project trees: module names, the on-disk cache, and the links
between modules (re-exports, submodules, state one module changes in another)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from typing import Any, Final

from isolator._store import StoreError, read_json, store_dir, update_json, write_json_atomic
from isolator.analysis._ast_state import Extra, _analyze
from isolator.analysis._model import (
    CodeAccess,
    FrozenMap,
    ModuleState,
    StateDecl,
    sites_overlap,
    split_site_path,
)

CACHE_FILE: Final = "static-cache.json"
_CACHE_SCHEMA: Final = "isolator.static-cache/1"
# Bump when the analysis changes what it reports, so old cache entries are not reused.
_ANALYZER_VERSION: Final = 4
_PY_KEY: Final = (
    f"{sys.implementation.name}-{sys.version_info[0]}.{sys.version_info[1]}-a{_ANALYZER_VERSION}"
)
_MAX_CANON_STEPS: Final = 8


def analyze_file(path: str | os.PathLike[str], modname: str) -> ModuleState:
    """Analyse one source file; never raises: unreadable or invalid source gives a
    ModuleState with ``error`` set and nothing else."""
    return _analyze_path(os.fspath(path), modname)[0]


def _analyze_path(path: str, modname: str) -> tuple[ModuleState, Extra]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        error = f"{path}: {exc.strerror or exc}"
        return ModuleState(modname, path, error=error), Extra([], {}, cacheable=False)
    # Bytes let ast.parse honour a coding cookie and a BOM like the import system does.
    return _analyze(data, modname, path)


def modname_for_path(
    path: str | os.PathLike[str],
    rootdir: str | os.PathLike[str],
    importmode: str = "prepend",
) -> str:
    """Best guess of the name ``path`` is imported under.

    Inside a package (directories with ``__init__.py``) the dotted package path.  Outside
    one, what pytest does for ``importmode``: ``prepend``/``append`` import test files and
    conftests by their bare name; ``importlib`` names them after their path relative to
    ``rootdir``.  Other rootless modules are named relative to the longest ``sys.path``
    entry (or ``rootdir``) holding them.
    """
    p = os.path.abspath(os.fspath(path))
    d, base = os.path.split(p)
    stem = base[:-3] if base.endswith(".py") else base.rpartition(".")[0] or base
    parts = [] if stem == "__init__" else [stem]
    top = d
    while os.path.isfile(os.path.join(top, "__init__.py")):
        parts.insert(0, os.path.basename(top))
        parent = os.path.dirname(top)
        if parent == top:
            break
        top = parent
    if top != d or stem == "__init__":
        return ".".join(parts) or stem
    root = os.path.abspath(os.fspath(rootdir))
    is_test = base.startswith("test_") or base.endswith("_test.py") or base == "conftest.py"
    if importmode == "importlib":
        bases = [root]
    elif is_test:
        return stem
    else:
        bases = sorted({os.path.abspath(e) for e in sys.path if e} | {root}, key=len, reverse=True)
    for b in bases:
        if p.startswith(b.rstrip(os.sep) + os.sep):
            rel = os.path.relpath(p, b)[: -len(base)] + stem
            names = rel.split(os.sep)
            if importmode == "importlib":
                names = [n.replace(".", "_") for n in names]
            if all(n.isidentifier() for n in names):
                return ".".join(names)
    return stem


def analyze_tree(
    paths: Iterable[str | os.PathLike[str]],
    rootdir: str | os.PathLike[str],
    importmode: str = "prepend",
    use_cache: bool = True,
) -> dict[str, ModuleState]:
    """Analyse many files as one project and return their ModuleStates by module name.

    Results per file are cached in ``rootdir/.isolator/static-cache.json`` keyed by
    (path, mtime_ns, size); a missing or corrupt cache is rebuilt.  The modules are then
    linked: sites reached through a re-export or a submodule attribute are rewritten to
    the module that owns them, state that one module changes in another becomes a
    declaration of the owner, and reads of other modules are narrowed to their state.
    When two files map to the same module name, the first one wins.
    """
    cache_path = store_dir(rootdir) / CACHE_FILE
    doc = _load_cache(cache_path) if use_cache else {}
    section: dict[str, Any] = doc.get(_PY_KEY, {}) if use_cache else {}
    fresh: dict[str, Any] = {}
    raw: dict[str, tuple[ModuleState, Extra]] = {}
    changed = False
    for path in paths:
        p = os.path.abspath(os.fspath(path))
        modname = modname_for_path(p, rootdir, importmode)
        if modname in raw:
            continue
        try:
            st = os.stat(p)
        except OSError:
            raw[modname] = _analyze_path(p, modname)
            continue
        entry = section.get(p)
        hit = _cache_hit(entry, st, modname)
        if hit is None:
            hit = _analyze_path(p, modname)
            raw[modname] = hit
            if not hit[1].cacheable:
                continue
            entry = _entry_to_json(hit, st.st_mtime_ns, st.st_size)
            changed = True
        fresh[p] = entry
        raw[modname] = hit
    if use_cache and (changed or len(fresh) != len(section)):
        # Keep entries for other files that still exist: other runs analyse other subsets.
        for p, entry in section.items():
            if p not in fresh and os.path.exists(p):
                fresh[p] = entry
        if changed or len(fresh) != len(section):
            doc[_PY_KEY] = fresh
            try:
                write_json_atomic(cache_path, {"schema": _CACHE_SCHEMA, "entries": doc})
            except OSError:
                pass  # a read-only tree only loses the cache
    return _link(raw)


class FileCache:
    """Single files analysed through the same on-disk cache as :func:`analyze_tree`
    (``rootdir/.isolator/static-cache.json``, keyed by path, mtime and size): the runner
    reads a few files while tests run, and the next run finds them analysed."""

    def __init__(self, rootdir: str | os.PathLike[str]) -> None:
        self.path = store_dir(rootdir) / CACHE_FILE
        self.section: dict[str, Any] | None = None
        self.new: dict[str, Any] = {}

    def analyze(self, path: str, modname: str) -> ModuleState:
        if self.section is None:
            self.section = _load_cache(self.path).get(_PY_KEY, {})
        p = os.path.abspath(path)
        try:
            st = os.stat(p)
        except OSError:
            return analyze_file(p, modname)
        hit = _cache_hit(self.section.get(p), st, modname)
        if hit is not None:
            return hit[0]
        hit = _analyze_path(p, modname)
        if hit[1].cacheable:
            self.new[p] = _entry_to_json(hit, st.st_mtime_ns, st.st_size)
        return hit[0]

    def save(self) -> None:
        """Add what was analysed to the cache file (merged with what others wrote)."""
        if not self.new:
            return
        new = self.new

        def add(current: Any) -> dict[str, Any]:
            entries: dict[str, Any] = {}
            if isinstance(current, dict) and current.get("schema") == _CACHE_SCHEMA:
                found = current.get("entries")
                if isinstance(found, dict):
                    entries = found
            section = entries.get(_PY_KEY)
            if not isinstance(section, dict):
                section = entries[_PY_KEY] = {}
            section.update(new)
            return {"schema": _CACHE_SCHEMA, "entries": entries}

        try:
            update_json(self.path, add)
        except OSError:
            pass  # a read-only tree only loses the cache
        self.new = {}


def _cache_hit(entry: Any, st: os.stat_result, modname: str) -> tuple[ModuleState, Extra] | None:
    """The cached analysis of a file, if ``entry`` was made from it as it is now."""
    if (
        isinstance(entry, dict)
        and entry.get("mtime_ns") == st.st_mtime_ns
        and entry.get("size") == st.st_size
        and entry.get("modname") == modname
    ):
        return _entry_from_json(entry)
    return None


def _load_cache(path: os.PathLike[str]) -> dict[str, Any]:
    try:
        data = read_json(path)
    except StoreError:
        return {}
    if not isinstance(data, dict) or data.get("schema") != _CACHE_SCHEMA:
        return {}
    entries = data.get("entries")
    if not isinstance(entries, dict):
        return {}
    return {k: v for k, v in entries.items() if isinstance(v, dict)}


def _entry_to_json(hit: tuple[ModuleState, Extra], mtime_ns: int, size: int) -> dict[str, Any]:
    state, extra = hit
    return {
        "mtime_ns": mtime_ns,
        "size": size,
        "modname": state.modname,
        "state": state.to_json(),
        "dropped": extra.dropped,
        "lines": extra.lines,
    }


def _entry_from_json(entry: dict[str, Any]) -> tuple[ModuleState, Extra] | None:
    try:
        state = ModuleState.from_json(entry["state"])
        dropped = [[str(s) for s in d] for d in entry["dropped"]]
        lines = {str(k): int(v) for k, v in dict(entry["lines"]).items()}
    except (KeyError, TypeError, ValueError):
        return None  # a damaged entry is analysed again
    if dropped and len(dropped) != len(state.code):
        return None
    return state, Extra(dropped, lines)


class _Linker:
    """Rewrites sites to their owning module and narrows reads across modules."""

    def __init__(self, raw: Mapping[str, tuple[ModuleState, Extra]]) -> None:
        self.raw = raw
        self.exports = {m: dict(st.exports) for m, (st, _) in raw.items()}
        self._canon: dict[tuple[str, bool], str | None] = {}

    def canon(self, site: str, rebind: bool = False) -> str | None:
        """The owner's site for ``site``; None when it names a module object.

        A bare rebinding of a re-exported name (``pkg.X = 1``) stays with the re-exporter:
        it changes that module's binding, not the original object.
        """
        key = (site, rebind)
        if key in self._canon:
            return self._canon[key]
        mod, sep, path = site.partition(":")
        result: str | None = site
        if sep and not site.startswith("<"):
            for _ in range(_MAX_CANON_STEPS):
                first, rest = split_site_path(path)
                sub = f"{mod}.{first}"
                if sub in self.raw:
                    if not rest:
                        result = None
                        break
                    if rest[0] == ".":
                        mod, path = sub, rest[1:]
                        continue
                target = self.exports.get(mod, {}).get(first)
                if target is None or (rebind and not rest):
                    result = f"{mod}:{path}"
                    break
                if ":" in target:
                    tmod, _, tattr = target.partition(":")
                    mod, path = tmod, tattr + rest
                    continue
                if not rest:
                    result = None
                    break
                if rest[0] != ".":
                    result = f"{mod}:{path}"
                    break
                mod, path = target, rest[1:]
            else:
                result = f"{mod}:{path}"
        self._canon[key] = result
        return result


def _link(raw: Mapping[str, tuple[ModuleState, Extra]]) -> dict[str, ModuleState]:
    linker = _Linker(raw)
    # 1. Writes of every code object, with other modules' sites made canonical (a module's
    # own sites already are), and which sites are rebound rather than mutated.
    writes_of: dict[str, list[Mapping[str, int]]] = {}
    rebinds: set[str] = set()
    for mod, (st, _) in raw.items():
        prefix = mod + ":"
        per_code: list[Mapping[str, int]] = []
        for access in st.code:
            w: Mapping[str, int] = access.writes
            if any(not site.startswith(prefix) for site in w):
                canon_w: dict[str, int] = {}
                for site, line in w.items():
                    c: str | None = site
                    if not site.startswith(prefix):
                        c = linker.canon(site, rebind=site in st.rebinds)
                    if c is not None and (c not in canon_w or canon_w[c] > line):
                        canon_w[c] = line
                w = canon_w
            per_code.append(w)
        writes_of[mod] = per_code
        for site in st.rebinds:
            rc = site if site.startswith(prefix) else linker.canon(site, rebind=True)
            if rc is not None:
                rebinds.add(rc)
    # 2. Declarations the owner gets from writes made in other modules.
    decls: dict[str, list[StateDecl]] = {m: list(st.decls) for m, (st, _) in raw.items()}
    written: set[str] = set()
    for mod, per_code in writes_of.items():
        prefix = mod + ":"
        for w in per_code:
            for site in w:
                written.add(site)
                if not site.startswith(prefix):
                    owner = site.partition(":")[0]
                    if owner in raw:
                        _declare_foreign(site, raw[owner], decls[owner], site in rebinds)
    # 3. Roots: what counts as state, by owning module and first name.
    roots: dict[tuple[str, str], list[str]] = {}

    def add_root(site: str) -> None:
        owner, _, path = site.partition(":")
        roots.setdefault((owner, split_site_path(path)[0]), []).append(site)

    for ds in decls.values():
        for d in ds:
            add_root(d.site)
    for site in written:
        if ".<closure>." not in site:
            add_root(site)
    state_memo: dict[str, bool] = {}

    def is_state(site: str) -> bool:
        found = state_memo.get(site)
        if found is None:
            owner, _, path = site.partition(":")
            cands = roots.get((owner, split_site_path(path)[0]), ())
            found = state_memo[site] = any(sites_overlap(site, r) for r in cands)
        return found

    cache_sites = {d.site for ds in decls.values() for d in ds if d.kind == "cache"}
    # 4. Rebuild each module with canonical, narrowed accesses.
    out: dict[str, ModuleState] = {}
    for mod, (st, extra) in raw.items():
        prefix = mod + ":"
        codes = []
        changed = False
        for i, access in enumerate(st.code):
            reads = access.reads
            if any(not site.startswith(prefix) for site in reads):
                kept = set()
                for site in reads:
                    if site.startswith(prefix):
                        kept.add(site)  # judged by the module's own analysis
                    else:
                        cs = linker.canon(site)
                        if cs is not None and is_state(cs):
                            kept.add(cs)
                reads = frozenset(kept)
            if i < len(extra.dropped) and extra.dropped[i]:
                more = [site for site in extra.dropped[i] if is_state(site)]
                if more:
                    reads = reads.union(more)
            w = writes_of[mod][i]
            fills = [s for s in reads if s in cache_sites and s not in w]
            if fills:
                w = dict(w)
                for site in fills:
                    w[site] = access.firstlineno  # calling a memoized function fills it
            if reads is access.reads and w is access.writes:
                codes.append(access)
            else:
                changed = True
                clears = frozenset(c for c in access.clears if c in w)
                codes.append(
                    CodeAccess(
                        access.qualname, access.firstlineno, frozenset(reads), FrozenMap(w), clears
                    )
                )
        new_decls = decls[mod]
        own_rebinds = st.rebinds | {s for s in rebinds if s.startswith(prefix)}
        if not changed and len(new_decls) == len(st.decls) and own_rebinds == st.rebinds:
            out[mod] = st
            continue
        new_decls.sort(key=lambda d: (d.lineno, d.site, d.kind))
        out[mod] = ModuleState(
            modname=st.modname,
            filename=st.filename,
            decls=tuple(new_decls),
            code=tuple(codes),
            error=st.error,
            exports=st.exports,
            classes=st.classes,
            rebinds=frozenset(own_rebinds),
        )
    return out


def _declare_foreign(
    site: str,
    owner: tuple[ModuleState, Extra],
    decls: list[StateDecl],
    rebind: bool,
) -> None:
    """Add to the owner's declarations the state another module writes in it."""
    for d in decls:
        if len(d.site) <= len(site) and sites_overlap(d.site, site):
            return
    st, extra = owner
    prefix = st.modname + ":"
    path = site[len(prefix) :]
    if ".<closure>." in path:
        return
    cls = None
    for c in st.classes:
        if (path == c or path.startswith((c + ".", c + "["))) and (
            cls is None or len(c) > len(cls)
        ):
            cls = c
    if cls is not None:
        rest = path[len(cls) :]
        attr = split_site_path(rest[1:])[0] if rest.startswith(".") else ""
        target = f"{cls}.{attr}" if attr else cls
        decls.append(StateDecl(prefix + target, "class-attr", extra.lines.get(target, 0)))
        return
    first, rest = split_site_path(path)
    kind = "rebound-global" if rebind and not rest else "global"
    # Line 0: the owner never binds the name (another module creates it).
    decls.append(StateDecl(prefix + first, kind, extra.lines.get(first, 0)))
