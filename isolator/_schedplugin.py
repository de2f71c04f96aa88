"""The scheduler's pytest plugin: ``--order``, selection pull-in and the order summary.

It works on the final item list in ``pytest_collection_finish`` (tryfirst), after every
``pytest_collection_modifyitems`` implementation (``-k``/``-m`` deselection, ``--lf``,
pytest-randomly's shuffle) has run, so its order is the last word, with or without those
plugins.  Tests deselected or filtered out during collection are still known: a wrapper
around ``pytest_make_collect_report`` records every item collectors produce, which is
where a deselected state-setter is pulled back from.

Every pytest process that loads isolator loads this plugin, most of them with nothing to
do (no dependency graph, no ``--order``): the scheduler stage is imported only when one of
those is in use (issue 2: a plain run pays for nothing it does not use).
"""

from __future__ import annotations

import ast
import atexit
import gc
import random
import subprocess
from collections.abc import Generator, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

from isolator._store import DEPS_FILE, StoreError, load_graph, store_dir

if TYPE_CHECKING:
    from isolator import scheduler
    from isolator._types import DependencyGraph, NodeId

PLUGIN_NAME: Final = "isolator-sched"
CORE_NAME: Final = "isolator-core"
WORKERINPUT_KEY: Final = "isolator_sched"
WORKEROUTPUT_KEY: Final = "isolator_order"
FILES_CACHE_KEY: Final = "isolator/files"
# Orders that express priorities; xdist keeps their unit order instead of longest-first.
PRIORITY_MODES: Final = frozenset({"failed-first", "changed-first"})
# ``scheduler.ORDER_MODES``, spelled out so that declaring the option imports nothing.
ORDER_CHOICES: Final = ("declared", "reverse", "random", "failed-first", "changed-first")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("isolator-order", "isolator: dependency-aware test order")
    group.addoption(
        "--order",
        choices=ORDER_CHOICES,
        default=None,
        help="run tests in this order, repaired to respect the dependency graph "
        "(default: the order pytest and its plugins produce, repaired).",
    )
    group.addoption(
        "--seed",
        type=int,
        default=None,
        help="seed for --order=random (default: pytest-randomly's seed or a fresh one).",
    )
    group.addoption(
        "--changed-since",
        metavar="REF",
        default=None,
        help="with --order=changed-first: files changed since this git ref "
        "(default: since the last run).",
    )
    group.addoption(
        "--explain-order",
        action="store_true",
        default=False,
        help="print every order decision in the 'isolator order' summary.",
    )


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    plugin = SchedPlugin(config)
    # Only a distributing controller needs the xdist scheduler (and to import xdist's
    # internals); workers and plain runs skip it.
    distributing = config.getoption("dist", "no") != "no"
    worker = hasattr(config, "workerinput")
    if not (plugin.active or plugin.explain or plugin.warnings or distributing or worker):
        # Nothing to order, pull in or report: its hooks (one wraps every collector)
        # would only find that out again and again (issue 2).
        return
    config.pluginmanager.register(plugin, PLUGIN_NAME)
    if distributing and not worker:
        from isolator._xdist import XdistHooks

        config.pluginmanager.register(XdistHooks(plugin), PLUGIN_NAME + "-xdist")
    elif WORKERINPUT_KEY in getattr(config, "workerinput", {}):
        from isolator._xdist import install_worker_events

        install_worker_events(config)


def _grouped_by_fixture_params(items: list[pytest.Item]) -> list[pytest.Item]:
    """The collection order as pytest itself runs it: grouped by the parameters of class-,
    module- and session-scoped fixtures (``test_a[x], test_b[x], test_a[y], ...``).
    Taken in raw collection order, those alternate, and each test set such a fixture up
    again (typeguard's module fixture re-instruments a module for each of its 100 tests)."""
    try:
        from _pytest.fixtures import reorder_items
    except ImportError:  # pragma: no cover (pytest's own function, there since 3.0)
        return items
    return list(reorder_items(items))


def reset_mode(config: pytest.Config) -> str:
    """The core plugin's reset mode; "none" when the core plugin is not active."""
    core = config.pluginmanager.get_plugin(CORE_NAME)
    if core is None:
        return "none"
    value = getattr(core, "mode", None)
    return value if isinstance(value, str) else "none"


class SchedPlugin:
    """Per-session scheduler state.

    ``pool`` maps every item collectors produced (also the deselected ones) to itself, in
    collection order; ``lines`` and ``decisions`` are what the summary prints.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.order: scheduler.OrderMode | None = config.getoption("order")
        self.changed_since: str | None = config.getoption("changed_since")
        if self.changed_since and self.order is None:
            self.order = "changed-first"
        self.explain: bool = config.getoption("explain_order")
        self.workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
        self.pool: dict[NodeId, pytest.Item] = {}
        self.seen: set[NodeId] = set()
        self.expanded: set[NodeId] = set()
        self.extra_args: set[NodeId] = set()
        self.lines: list[str] = []
        self.notes: list[str] = []
        self.warnings: list[str] = []
        self.decisions: list[str] = []
        self.pulled: dict[NodeId, NodeId] = {}
        self.worker_chains: dict[str, list[list[NodeId]]] = {}
        self.collected_ids: list[NodeId] = []
        self.graph: DependencyGraph | None = None
        self.graph_json: dict[str, Any] | None = None
        self.changed_files: set[Path] | None = None
        self._load_graph()
        self.seed = self._pick_seed()
        if self.changed_since and self.workerinput is None:
            self.changed_files = _git_changed_files(config.rootpath, self.changed_since)
        self._maybe_unblock_lf()

    @property
    def active(self) -> bool:
        return self.graph is not None or self.order is not None

    # -- set-up ---------------------------------------------------------------------------

    def _load_graph(self) -> None:
        if self.workerinput is not None and WORKERINPUT_KEY in self.workerinput:
            data = self.workerinput[WORKERINPUT_KEY]
            self.graph_json = data.get("graph")
            if self.graph_json is not None:
                from isolator._types import DependencyGraph

                self.graph = DependencyGraph.from_json(self.graph_json)
            if data.get("changed") is not None:
                self.changed_files = {Path(p) for p in data["changed"]}
            return
        if not (store_dir(self.config.rootpath) / DEPS_FILE).exists():
            return
        try:
            self.graph = load_graph(self.config.rootpath)
        except StoreError as exc:
            self.warnings.append(f"{exc}; running without the dependency graph")
            return
        self.graph_json = self.graph.to_json()

    def _pick_seed(self) -> int:
        if self.workerinput is not None and WORKERINPUT_KEY in self.workerinput:
            return int(self.workerinput[WORKERINPUT_KEY]["seed"])
        seed = self.config.getoption("seed")
        if seed is not None:
            return int(seed)
        randomly = self.config.getoption("randomly_seed", None)
        if isinstance(randomly, int):
            return randomly
        return random.Random().getrandbits(32)

    def _maybe_unblock_lf(self) -> None:
        """With ``--lf``, keep files holding needed state-setters from being skipped.

        pytest's ``--lf`` skips collecting files without recorded failures (plugin
        "lfplugin-collskip"); a brittle test's setter may live in such a file.
        """
        if self.graph is None or not self.config.getoption("lf", False):
            return
        from isolator import scheduler

        cache = getattr(self.config, "cache", None)
        lastfailed = cache.get("cache/lastfailed", {}) if cache is not None else {}
        if scheduler.needed_setters(self.graph, [t for t in lastfailed if isinstance(t, str)]):
            self.config.pluginmanager.set_blocked("lfplugin-collskip")

    def workerinput_data(self) -> dict[str, Any]:
        changed = None
        if self.changed_files is not None:
            changed = sorted(str(p) for p in self.changed_files)
        return {"graph": self.graph_json, "seed": self.seed, "changed": changed}

    # -- collection -----------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> None:
        """Add the setters of brittle tests selected by node id to the collection args."""
        if self.graph is None or self.config.getoption("pyargs", False):
            return
        from isolator import scheduler

        args = self.config.args
        covers = [_arg_prefix(self.config, a) for a in args]
        prefixes = [c for c in covers if c is not None]
        if len(prefixes) != len(covers):
            return  # an argument we cannot map to node ids: leave the collection alone
        targets = {
            d.target
            for d in self.graph.confirmed()
            if d.kind == "state-setter" and _covered(d.target, prefixes)
        }
        for setter in scheduler.needed_setters(self.graph, sorted(targets)):
            if not _covered(setter, prefixes):
                path, _, rest = setter.partition("::")
                if (self.config.rootpath / path).exists():
                    args.append(str(self.config.rootpath / path) + ("::" + rest if rest else ""))
                    self.extra_args.add(setter)

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_make_collect_report(
        self, collector: pytest.Collector
    ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
        # Innermost wrapper: sees the result before --lf filters it.
        rep = yield
        if self.active and rep.passed:
            self.expanded.add(collector.nodeid)
            for node in rep.result:
                self.seen.add(node.nodeid)
                if isinstance(node, pytest.Item):
                    self.pool.setdefault(node.nodeid, node)
        return rep

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not self.active:
            return
        from isolator import scheduler

        items = session.items
        # Node ids are not always unique (a plugin's items named alike, docopt-ng's test
        # cases): the order is planned over distinct ids, and the items sharing one travel
        # together, in collection order (reversed by --order=reverse).
        same_id: dict[NodeId, list[pytest.Item]] = {}
        for i in items:
            same_id.setdefault(i.nodeid, []).append(i)
        self.collected_ids = list(same_id)
        by_id = {t: group[0] for t, group in same_id.items()}
        user = [t for t in self.collected_ids if t not in self.extra_args]
        current = list(user)
        if self.graph is not None:
            needed = scheduler.needed_setters(self.graph, user)
            for setter, target in needed.items():
                item = by_id.get(setter) or self.pool.get(setter)
                if item is None:
                    if not self._exists(setter):
                        continue  # renamed or deleted: the stale-graph warning covers it
                    self.warnings.append(
                        f"cannot pull in {setter} (state-setter of {target}): not collected"
                    )
                    continue
                by_id[setter] = item
                self.pulled[setter] = target
                current.append(setter)
            self._fix_deselected_stats(self.pulled)
        collected = _grouped_by_fixture_params([by_id[t] for t in self.pool if t in by_id])
        declared = [i.nodeid for i in collected] + [t for t in current if t not in self.pool]
        requested = scheduler.requested_order(
            current,
            self.order,
            declared=declared,
            seed=self.seed,
            first=self._first_tests(current),
        )
        if (
            self.order == "random"
            and all(t in by_id for t in requested)
            and len(set(requested)) == len(requested)
        ):
            # Within a module, the tests of one parameter of its higher-scoped fixtures
            # together again, as pytest groups them.
            requested = [
                i.nodeid for i in _grouped_by_fixture_params([by_id[t] for t in requested])
            ]
        rep = self.plan(requested, declared, exists=self._exists)
        ordered: list[pytest.Item] = []
        for t in rep.order:
            group = same_id.get(t)
            if group is None or len(group) == 1:
                ordered.append(by_id[t])
            else:
                ordered += reversed(group) if self.order == "reverse" else group
        items[:] = ordered
        self.collected_ids = list(rep.order)
        self._apply_keep_state(rep.keep_state_after)
        if self.workerinput is not None:
            out: dict[str, Any] = getattr(self.config, "workeroutput", {})
            out[WORKEROUTPUT_KEY] = {
                "lines": self.lines,
                "warnings": self.warnings,
                "decisions": self.decisions,
            }

    def plan(
        self,
        requested: Sequence[NodeId],
        declared: Sequence[NodeId],
        exists: Any = None,
    ) -> scheduler.Repair:
        """Repair ``requested`` under the graph's constraints and note the decisions."""
        from isolator import scheduler

        reset = reset_mode(self.config)
        if self.graph is None:
            constraints = scheduler.Constraints()
        else:
            constraints = scheduler.build_constraints(
                self.graph, requested, reset, requested=requested, declared=declared,
                exists=exists,
            )  # fmt: skip
        rep = scheduler.repair(requested, constraints)
        mode: str = self.order or "as collected"
        if self.order is None and self.config.pluginmanager.hasplugin("randomly"):
            if self.config.getoption("randomly_reorganize", True):
                mode = "pytest-randomly's"
        seed = f" (seed {self.seed})" if self.order == "random" else ""
        kinds: dict[str, int] = {}
        for e in constraints.edges:
            kinds[e.kind] = kinds.get(e.kind, 0) + 1
        ctext = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "none"
        graph_note = "" if self.graph is not None else "; no dependency graph"
        self.lines = [f"order: {mode}{seed}; constraints: {ctext}; reset={reset}{graph_note}"]
        self.lines.extend(self.notes)
        self.warnings.extend(constraints.warnings)
        for setter, target in self.pulled.items():
            self.lines.append(f"pulled in {setter} (state-setter of {target})")
        if rep.blocks:
            self.lines.append(f"{len(rep.blocks)} state-setter chain(s) kept together")
        moved = [t for t in rep.moved if t not in self.pulled]
        if moved:
            self.lines.append(f"moved {len(moved)} test(s) to satisfy the constraints")
        for e in rep.broken:
            self.warnings.append(
                f"cannot satisfy {e.kind} {e.before} -> {e.after}: dependency cycle"
            )
        self.decisions = list(rep.decisions)
        return rep

    def controller_units(
        self, collection: Sequence[NodeId], scope: scheduler.ScopeFn | None
    ) -> list[list[NodeId]]:
        """xdist work units for ``collection`` (already in the workers' repaired order).

        The controller does not collect, so it cannot tell a deselected test from a
        renamed one: the partners of every dependency end not in the collection join the
        stale unit (declared order, one worker), which is safe and at worst less parallel.
        """
        from isolator import scheduler

        assert self.graph is not None
        constraints = scheduler.build_constraints(
            self.graph, collection, reset_mode(self.config), exists=lambda t: False
        )
        return scheduler.work_units(collection, constraints, scope)

    def _apply_keep_state(self, keep: Iterable[NodeId]) -> None:
        core = self.config.pluginmanager.get_plugin(CORE_NAME)
        if core is None or reset_mode(self.config) == "none":
            return  # plain pytest keeps state between tests anyway
        keep_set = getattr(core, "keep_state_after", None)
        if isinstance(keep_set, set):
            keep_set.update(keep)

    def _fix_deselected_stats(self, pulled: Iterable[NodeId]) -> None:
        """Pulled-in tests run: do not count them as deselected in the header line."""
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        stats = getattr(tr, "stats", None)
        if not isinstance(stats, dict) or "deselected" not in stats:
            return
        ids = set(pulled)
        stats["deselected"] = [
            i for i in stats["deselected"] if getattr(i, "nodeid", None) not in ids
        ]
        if not stats["deselected"]:
            del stats["deselected"]

    def _exists(self, nodeid: NodeId) -> bool:
        """False when ``nodeid`` was renamed or deleted (not merely deselected)."""
        parts = nodeid.split("::")
        for i in range(len(parts) - 1, 0, -1):
            parent = "::".join(parts[:i])
            if parent in self.expanded:
                return nodeid in self.seen
        return (self.config.rootpath / parts[0]).exists()

    def _first_tests(self, tests: Sequence[NodeId]) -> set[NodeId]:
        if self.order == "failed-first":
            cache = getattr(self.config, "cache", None)
            lastfailed = cache.get("cache/lastfailed", {}) if cache is not None else {}
            failed = {t for t in tests if t in lastfailed}
            self.notes.append(f"failed-first: {len(failed)} test(s) failed last time")
            return failed
        if self.order == "changed-first":
            return self._changed_tests(tests)
        return set()

    def _changed_tests(self, tests: Sequence[NodeId]) -> set[NodeId]:
        root = self.config.rootpath
        graph = _ImportGraph(root, self._import_cache())
        changed = self.changed_files
        if changed is None:
            recorded = self._recorded_files()
            if recorded is None:
                self.notes.append(
                    "changed-first: no previous run recorded; nothing counts as changed"
                )
                return set()
            changed = set()
            for test_file in {t.split("::")[0] for t in tests}:
                for path in graph.closure(root / test_file):
                    rel = _rel(path, root)
                    if recorded.get(rel) != _stat_key(path):
                        changed.add(path)
        result = set()
        for t in tests:
            if any(p in changed for p in graph.closure(root / t.split("::")[0])):
                result.add(t)
        self.notes.append(f"changed-first: {len(result)} test(s) cover changed files")
        return result

    # -- changed-first bookkeeping ----------------------------------------------------------

    def _recorded_files(self) -> dict[str, list[int]] | None:
        cache = getattr(self.config, "cache", None)
        if cache is None:
            return None
        data = cache.get(FILES_CACHE_KEY, None)
        if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
            return None
        return {str(k): v for k, v in data["files"].items()}

    def _import_cache(self) -> dict[str, Any]:
        cache = getattr(self.config, "cache", None)
        data = cache.get(FILES_CACHE_KEY, None) if cache is not None else None
        imports = data.get("imports") if isinstance(data, dict) else None
        return imports if isinstance(imports, dict) else {}

    def record_files(self, nodeids: Iterable[NodeId]) -> None:
        """Remember the state of the files the collected tests cover, for changed-first."""
        cache = getattr(self.config, "cache", None)
        if cache is None:
            return
        root = self.config.rootpath
        graph = _ImportGraph(root, self._import_cache())
        files: dict[str, list[int]] = {}
        for test_file in sorted({t.split("::")[0] for t in nodeids}):
            for path in graph.closure(root / test_file):
                key = _stat_key(path)
                if key is not None:
                    files[_rel(path, root)] = key
        old = cache.get(FILES_CACHE_KEY, None)
        new = {"files": files, "imports": graph.cache}
        if old != new:
            cache.set(FILES_CACHE_KEY, new)

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.workerinput is not None and (self.active or reset_mode(config) != "none"):
            # An xdist worker process ends after this and the controller waits for it: the
            # interpreter's garbage collections while it shuts down walk every object the
            # session made (a quarter to half a second on a suite of 2,000 tests).  Frozen
            # at exit, after pytest's own last collections (unraisable exceptions of
            # cycles are still reported), they leave those passes nothing to walk.
            atexit.register(gc.freeze)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.workerinput is None and self.collected_ids and not _is_collect_only(self.config):
            try:
                self.record_files(self.collected_ids)
            except OSError:
                pass  # best effort: a read-only checkout just has no changed-first history

    # -- reporting --------------------------------------------------------------------------

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        lines = []
        if self.order == "random":
            lines.append(f"isolator order: random, --seed={self.seed}")
        for w in self.warnings:
            lines.append(f"isolator: warning: {w}")
        return lines

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        # Quiet when there is nothing to report beyond "no constraints, nothing moved".
        if not (self.order or self.explain or self.warnings or self.worker_chains):
            if len(self.lines) <= 1:
                return
        tr = terminalreporter
        tr.write_sep("=", "isolator order")
        for w in dict.fromkeys(self.warnings):
            tr.write_line(f"warning: {w}", yellow=True)
        for line in self.lines:
            tr.write_line(line)
        for worker, chains in sorted(self.worker_chains.items()):
            for chain in chains:
                tr.write_line(f"{worker}: chain " + " -> ".join(chain))
        if self.explain:
            for d in self.decisions:
                tr.write_line(f"  {d}")
        elif self.decisions:
            tr.write_line(f"({len(self.decisions)} decisions; --explain-order lists them)")


def _is_collect_only(config: pytest.Config) -> bool:
    return bool(config.getoption("collectonly", False))


def _arg_prefix(config: pytest.Config, arg: str) -> str | None:
    """The node-id prefix a collection argument selects ("" for the whole rootdir)."""
    path_part, sep, rest = arg.partition("::")
    path = Path(path_part)
    if not path.is_absolute():
        path = config.invocation_params.dir / path
    try:
        rel = path.resolve().relative_to(config.rootpath.resolve())
    except (ValueError, OSError):
        return None
    prefix = rel.as_posix() if rel.parts else ""
    if path.is_dir():
        return prefix + "/" if prefix else ""
    return prefix + (sep + rest if sep else "")


def _covered(nodeid: NodeId, prefixes: Sequence[str]) -> bool:
    for p in prefixes:
        if p == "" or nodeid == p or (p.endswith("/") and nodeid.startswith(p)):
            return True
        if nodeid.startswith(p) and nodeid[len(p)] in ":[":
            return True
    return False


def _git_changed_files(root: Path, ref: str) -> set[Path]:
    """Files changed since ``ref`` (committed, staged, unstaged and untracked)."""

    def git(*args: str) -> str:
        try:
            proc = subprocess.run(
                ["git", *args], cwd=root, capture_output=True, text=True, timeout=60
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise pytest.UsageError(f"--changed-since: cannot run git ({exc})") from None
        if proc.returncode != 0:
            msg = (proc.stderr.strip().splitlines() or ["git failed"])[-1]
            raise pytest.UsageError(f"--changed-since {ref}: {msg}")
        return proc.stdout

    top = Path(git("rev-parse", "--show-toplevel").strip())
    git("rev-parse", "--verify", "--quiet", ref + "^{commit}")
    names = git("diff", "--name-only", ref, "--").splitlines()
    names += git("ls-files", "--others", "--exclude-standard").splitlines()
    return {(top / n).resolve() for n in names if n}


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _stat_key(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


class _ImportGraph:
    """Static import graph of the project files under ``root``.

    ``cache`` maps a relative path to ``[mtime_ns, size, [imported module names...]]`` so
    that unchanged files are not parsed again; it is stored in pytest's cache.
    """

    def __init__(self, root: Path, cache: dict[str, Any]) -> None:
        self.root = root.resolve()
        self.cache: dict[str, Any] = {}
        self._old = cache
        self._closure: dict[Path, frozenset[Path]] = {}
        self.roots = [self.root, self.root / "src"]

    def imports(self, path: Path) -> list[tuple[str, int]]:
        rel = _rel(path, self.root)
        key = _stat_key(path)
        old = self._old.get(rel)
        if key is not None and isinstance(old, list) and old[:2] == key:
            names = [(str(n), int(lv)) for n, lv in old[2]]
        else:
            try:
                tree = ast.parse(path.read_bytes(), filename=str(path))
            except (OSError, SyntaxError, ValueError):
                tree = ast.Module(body=[], type_ignores=[])
            names = []
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names.extend((a.name, 0) for a in node.names)
                elif isinstance(node, ast.ImportFrom):
                    base = node.module or ""
                    names.append((base, node.level))
                    names.extend(
                        (f"{base}.{a.name}" if base else a.name, node.level)
                        for a in node.names
                        if a.name != "*"
                    )
        if key is not None:
            self.cache[rel] = [*key, [[n, lv] for n, lv in names]]
        return names

    def _resolve(self, name: str, level: int, origin: Path) -> Path | None:
        parts = [p for p in name.split(".") if p]
        if level:
            base = origin.parent
            for _ in range(level - 1):
                base = base.parent
            bases = [base]
        else:
            # rootdir-relative imports ("prepend" mode puts the test's own dir first)
            bases = [origin.parent, *self.roots]
        for b in bases:
            cand = b.joinpath(*parts) if parts else b
            for f in (cand.with_suffix(".py") if parts else None, cand / "__init__.py"):
                if f is not None and f.is_file():
                    return f.resolve()
        return None

    def closure(self, start: Path) -> frozenset[Path]:
        """``start`` and every project file it imports, transitively."""
        start = start.resolve()
        if start in self._closure:
            return self._closure[start]
        seen: set[Path] = set()
        todo = [start]
        while todo:
            f = todo.pop()
            if f in seen or not f.is_file():
                continue
            if self.root not in f.parents or any(
                p in {".venv", "venv", "site-packages", ".tox"} for p in f.parts
            ):
                continue
            seen.add(f)
            for name, level in self.imports(f):
                target = self._resolve(name, level, f)
                if target is not None:
                    todo.append(target)
                    # a package import also runs the package's __init__
                    pkg = target.parent / "__init__.py"
                    if target.name != "__init__.py" and pkg.is_file():
                        todo.append(pkg.resolve())
        result = frozenset(seen)
        self._closure[start] = result
        return result
