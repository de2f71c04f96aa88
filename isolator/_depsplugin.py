"""The pytest side of ``isolator deps``: the recording run and the confirmation runs.

Both modes talk to the ``isolator deps`` command through files only (JSON lines, flushed
as they are produced, so a crash or Ctrl-C keeps everything finished before it):

* ``--isolator-record=FILE``: a normal run under ``--reset=minimal``; for every test one
  line ``{"type": "test", nodeid, outcome, duration, reads, writes, touched}`` with the
  net writes the core recorded (``WRITES_KEY``) and the reads from the tracer.
* ``--isolator-plan=PLAN --isolator-plan-out=OUT``: instead of the normal loop, run the
  plan's sequences of tests in one process.  Inside a sequence the core keeps the state
  between tests (``keep_state_after``); between sequences it resets.  One line per
  sequence: ``{"type": "result", "id", "tests", "outcomes"}``.
* Both: the recording run, then, in the same process, the plans (a directory of them):
  its ``finished`` line says ``"serving": true``, and the tracer is gone by then.  The
  confirmation gets a process that has started and collected already.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
import types
import warnings
from collections.abc import Callable, Generator, Sequence
from typing import IO, Any

import pytest
from _pytest.doctest import DoctestItem  # (pytest's own doctest items)

from isolator._store import STORE_DIR

RECORD_SCHEMA = "isolator.record/1"


def _perf_counter(clock: Callable[[], float] = time.perf_counter) -> float:
    """The original ``time.perf_counter``: a test may leave time frozen.  Held as a
    default, not as a module global, which freezegun's ``start()`` rebinds to its fake
    as it does every module global that is the real clock."""
    return clock()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("isolator", "isolator: unit test virtualization")
    group.addoption("--isolator-record", dest="isolator_record", help=argparse.SUPPRESS)
    group.addoption("--isolator-plan", dest="isolator_plan", help=argparse.SUPPRESS)
    group.addoption("--isolator-plan-out", dest="isolator_plan_out", help=argparse.SUPPRESS)
    # Each sequence in a child forked from the collected process: as in a fresh process.
    group.addoption(
        "--isolator-plan-fork", dest="isolator_plan_fork", action="store_true",
        help=argparse.SUPPRESS,
    )  # fmt: skip
    group.addoption(
        "--isolator-tracer",
        dest="isolator_tracer",
        default="auto",
        choices=("auto", "profile", "settrace", "none"),
        help=argparse.SUPPRESS,
    )


def pytest_configure(config: pytest.Config) -> None:
    record = config.getoption("isolator_record", None)
    plan = config.getoption("isolator_plan", None)
    if (record or plan) and getattr(config.option, "numprocesses", None) not in (None, 0):
        # Workers would each run part of the suite; the record needs every test in one
        # process, in order.
        raise pytest.UsageError(
            "isolator deps runs the tests in one process: remove -n/--numprocesses "
            "(or add -n0 to override it from your configuration)"
        )
    out = config.getoption("isolator_plan_out", None)
    if plan and not out:
        raise pytest.UsageError("--isolator-plan needs --isolator-plan-out=FILE")
    if record:
        recording = Recording(config, record)
        config.pluginmanager.register(recording, "isolator-deps")
        if plan:
            if not os.path.isdir(plan):
                raise pytest.UsageError("--isolator-record with --isolator-plan: a directory")
            runner = PlanRunner(config, plan, out, after=True)
            config.pluginmanager.register(runner, "isolator-deps-plans")
            config.pluginmanager.register(_ServeAfter(recording, runner), "isolator-deps-serve")
    elif plan:
        config.pluginmanager.register(PlanRunner(config, plan, out), "isolator-deps")


def outcome_of(reports: Sequence[pytest.TestReport]) -> str:
    """One word for a test's three phases: passed, failed, error, skipped, xfailed, xpassed."""
    call = None
    for rep in reports:
        if rep.when in ("setup", "teardown") and rep.failed:
            return "error"
        if rep.when == "call":
            call = rep
    if call is None:
        for rep in reports:
            if rep.when == "setup" and rep.skipped:
                return "xfailed" if hasattr(rep, "wasxfail") else "skipped"
        return "error" if reports else "missing"
    if hasattr(call, "wasxfail"):
        return "xfailed" if call.skipped else "xpassed"
    return call.outcome


# Set by pytest itself in every phase of every test.
IGNORED_SITES = frozenset({"<env>:PYTEST_CURRENT_TEST"})


# isolator's own files (its store: the copy-on-write journal and backups), which it writes
# during tests: ``<file>:`` sites under it are no test's state.  Set by Recording.
_OWN_FILES: tuple[str, ...] = ()


def _own(sites: Any) -> list[str]:
    return [s for s in sites if not _ignored(s)]


def _ignored(site: str) -> bool:
    return site in IGNORED_SITES or site.startswith(_OWN_FILES)


def _project_files(rootdir: str) -> list[str]:
    """The source files of the project's modules imported by now (collection imported
    the tests, their conftests and what they import); modules imported later during a
    test fall back to the tracer's name-level reads."""
    from isolator._tracer import is_project_path

    root = os.path.join(os.path.abspath(rootdir), "")
    out: list[str] = []
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if isinstance(f, str) and f.endswith(".py"):
            f = os.path.abspath(f)
            if is_project_path(f, root) and f not in out:
                out.append(f)
    return sorted(out)


def _scoped_fixturedefs(item: pytest.Item) -> list[Any]:
    """The higher-scoped fixture definitions a test uses (private pytest API, guarded)."""
    info = getattr(item, "_fixtureinfo", None)
    defs = getattr(info, "name2fixturedefs", None)
    if not isinstance(defs, dict):
        return []
    out = []
    for name in getattr(item, "fixturenames", ()):
        fds = defs.get(name)
        if fds:
            fd = fds[-1]
            if getattr(fd, "scope", "function") != "function":
                out.append(fd)
    return out


def _is_doctest(item: pytest.Item) -> bool:
    return isinstance(item, DoctestItem)


class _AliveFixtures:
    """Higher-scoped fixtures set up since the last full teardown, and where they live.

    ``fds``: [(fixturedef, scope, node id of the module/class/package they belong to)]
    """

    def __init__(self) -> None:
        self.fds: list[tuple[Any, str, str]] = []

    def add(self, item: pytest.Item) -> None:
        for fd in _scoped_fixturedefs(item):
            func = getattr(fd, "func", None)
            if str(getattr(func, "__module__", "")).startswith("_pytest"):
                continue  # tmp_path_factory and friends hold no test state
            scope = str(getattr(fd, "scope", "session"))
            key = _scope_node(item.nodeid, scope)
            if not any(f is fd and k == key for f, _s, k in self.fds):
                self.fds.append((fd, scope, key))

    def clear(self) -> None:
        self.fds.clear()

    def must_tear_down_for(self, nxt: pytest.Item) -> bool:
        """Would a fixture the next test does not use stay alive for it?"""
        uses = _scoped_fixturedefs(nxt)
        for fd, scope, key in self.fds:
            if any(u is fd for u in uses):
                continue
            if scope == "session" or _inside(nxt.nodeid, key, scope):
                return True
        return False


def _scope_node(nodeid: str, scope: str) -> str:
    path, _, rest = nodeid.partition("::")
    if scope == "module":
        return path
    if scope == "class":
        parts = rest.split("::")
        return "::".join([path, *parts[:-1]]) if len(parts) > 1 else path
    if scope == "package":
        return os.path.dirname(path)
    return ""


def _scope_keys(item: pytest.Item) -> set[tuple[int, str, str]]:
    """The higher-scoped fixtures ``item`` needs set up, each as (fixturedef, scope node,
    parameter): xunit ``setup_class``/``setup_module`` too (pytest's autouse fixtures)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    out = set()
    for fd in _scoped_fixturedefs(item):
        scope = str(getattr(fd, "scope", "session"))
        name = getattr(fd, "argname", "")
        out.add((id(fd), _scope_node(item.nodeid, scope), repr(params.get(name, None))))
    return out


def _sets_up_scope_late(seq: Sequence[pytest.Item]) -> bool:
    """Would a test after the first of ``seq`` set up a higher-scoped fixture (one that
    the test before it did not use)?

    Such a fixture starts from the state the tests before it left (kept within the
    sequence), and the core takes what is dirty then into the fixture's baseline: a file
    an earlier test (or an earlier fixture's teardown) wrote is not saved again, so the
    reset after the sequence puts it back under the live fixture (two classes building
    one directory in ``setup_class``: wcmatch's test_glob.py), and module state the
    earlier test changed survives the reset as the fixture's.  The next sequence must not
    inherit such a fixture: it is torn down with the sequence.
    """
    for prev, item in zip(seq, seq[1:]):
        if _scope_keys(item) - _scope_keys(prev):
            return True
    return False


def _inside(nodeid: str, key: str, scope: str) -> bool:
    if scope == "package":
        return nodeid.startswith(key + "/") if key else True
    return nodeid == key or nodeid.startswith(key + "::")


def _open_lines(path: str, mode: str) -> IO[str]:
    return open(path, mode, encoding="utf-8", buffering=1)  # noqa: SIM115 - lives for the run


def _write(f: IO[str], obj: dict[str, Any]) -> None:
    f.write(json.dumps(obj, separators=(",", ":")) + "\n")
    f.flush()


def _core(config: pytest.Config) -> Any:
    return config.pluginmanager.get_plugin("isolator-core")


class _Reports:
    """Reports of the test that is running, from ``pytest_runtest_logreport``."""

    def __init__(self) -> None:
        self.reports: list[pytest.TestReport] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.reports.append(report)


class Recording(_Reports):
    """The recording run: one JSON line per test (see the module docstring)."""

    def __init__(self, config: pytest.Config, path: str) -> None:
        super().__init__()
        self.config = config
        self.file = _open_lines(path, "w")
        global _OWN_FILES
        store = os.path.join(str(config.rootpath), STORE_DIR, "")
        _OWN_FILES = ("<file>:" + store, "<file>:" + os.path.realpath(store) + os.sep)
        self.tracer: Any = None
        self.subclass_reads: Any = None
        self.fixture_writes: dict[int, dict[str, str]] = {}
        self._keep: list[object] = []  # fixturedefs whose id() keys fixture_writes
        self.t0 = _perf_counter()
        self.index = 0
        self.ended = False  # the last test is recorded; the process may serve plans now
        _write(
            self.file,
            {
                "type": "header",
                "schema": RECORD_SCHEMA,
                "rootdir": str(config.rootpath),
                "python": sys.version.split()[0],
                "pid": os.getpid(),
            },
        )

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        collect_time = _perf_counter() - self.t0
        _write(
            self.file,
            {
                "type": "collected",
                "tests": [it.nodeid for it in session.items],
                "collect_time": round(collect_time, 4),
            },
        )
        if session.config.option.collectonly or not session.items:
            return
        self.tracer = self._make_tracer()

    def _make_tracer(self) -> Any:
        prefer = self.config.getoption("isolator_tracer", "auto")
        if prefer == "none":
            return None
        from isolator._tracer import ReadTracer, SubclassReads, static_by_filename

        rootdir = str(self.config.rootpath)
        t0 = _perf_counter()
        static: dict[str, Any] = {}
        note = ""
        try:
            analyze_tree = importlib.import_module("isolator.analysis").analyze_tree
            importmode = self.config.getoption("importmode", "prepend") or "prepend"
            files = _project_files(rootdir)
            static = static_by_filename(analyze_tree(files, rootdir, importmode=importmode))
        except (ImportError, AttributeError):
            note = "static pass unavailable: reads of module state come from the tracer only"
        except Exception as exc:  # the user's run must go on without static read sets
            note = f"static pass failed ({exc.__class__.__name__}: {exc})"
        tracer = ReadTracer(rootdir, static, prefer=prefer)
        self.subclass_reads = SubclassReads()
        static_time = _perf_counter() - t0
        tracer.install()  # probes the project's functions (the default backend)
        info: dict[str, Any] = {
            "type": "tracer",
            "backend": tracer.backend.name,
            "static_modules": len(static),
            "static_time": round(static_time, 4),
            "install_time": round(_perf_counter() - t0 - static_time, 4),
        }
        stats = getattr(tracer.backend, "stats", None)
        if stats:
            info["probes"] = dict(stats)
        if note:
            info["note"] = note
        _write(self.file, info)
        return tracer

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, object, object]:
        # Outermost wrapper: the core's wrapper has stored the net writes when we resume.
        __tracebackhide__ = True
        if self.ended:
            return (yield)
        _write(self.file, {"type": "start", "nodeid": item.nodeid})
        self.reports = []
        if self.tracer is not None:
            self.tracer.begin_test()
        t0 = _perf_counter()
        try:
            return (yield)
        finally:
            self._finish(item, _perf_counter() - t0)

    def _finish(self, item: pytest.Item, elapsed: float) -> None:
        from isolator.plugin import WRITES_KEY

        reads: set[str] = set()
        touched: dict[str, str] = {}
        got = None
        if self.tracer is not None:
            got = self.tracer.end_test()
            reads.update(got.reads)
            # A helper of a base class run on the test's own class reads its attributes.
            reads.update(self.subclass_reads.sites(got.reads, getattr(item, "cls", None)))
            touched.update(got.touched)
        scoped: dict[str, str] = {}
        for fd in _scoped_fixturedefs(item):
            for site, where in self.fixture_writes.get(id(fd), {}).items():
                scoped.setdefault(site, where)
        if _is_doctest(item):
            # pytest copies doctest_namespace into every doctest's globals (library code,
            # not traced).
            reads.add("<fixture>:doctest_namespace")
        recorded = item.stash.get(WRITES_KEY, None)
        writes: dict[str, str] = dict.fromkeys(recorded or (), "")
        if got is not None:
            from isolator.detector import sites_overlap

            for site, where in writes.items():
                if not where:
                    writes[site] = got.locate(site, sites_overlap)
        duration = sum(r.duration for r in self.reports) or elapsed
        _write(
            self.file,
            {
                "type": "test",
                "nodeid": item.nodeid,
                "index": self.index,
                "outcome": outcome_of(self.reports),
                "duration": round(duration, 6),
                "reads": sorted(_own(reads)),
                "writes": {k: v for k, v in sorted(writes.items()) if not _ignored(k)},
                "scoped_writes": {k: v for k, v in sorted(scoped.items()) if not _ignored(k)},
                "touched": sorted(_own(touched)),
                "touched_at": {k: v for k, v in sorted(touched.items()) if v},
                "recorded": recorded is not None,
            },
        )
        self.index += 1

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(
        self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
    ) -> Generator[None, object, object]:
        # What a higher-scoped fixture writes while it sets up is baseline for the core,
        # but it may leak past the fixture: every test that uses the fixture becomes a
        # candidate writer of it (confirmation runs tear such fixtures down in between).
        __tracebackhide__ = True
        tracer = self.tracer
        if tracer is None or fixturedef.scope == "function":
            return (yield)
        before = tracer.touched_now()
        try:
            return (yield)
        finally:
            new = {k: v for k, v in tracer.touched_now().items() if k not in before}
            self.fixture_writes[id(fixturedef)] = new
            self._keep.append(fixturedef)

    def pytest_fixture_post_finalizer(
        self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
    ) -> None:
        # The teardown of a higher-scoped yield fixture resumes a generator started in
        # an earlier test; a probing backend only sees functions start.
        tracer = self.tracer
        if tracer is None or fixturedef.scope == "function":
            return
        code = getattr(getattr(fixturedef, "func", None), "__code__", None)
        if isinstance(code, types.CodeType):
            tracer.credit(code)

    def _phase(self) -> Generator[None, object, object]:
        __tracebackhide__ = True
        tracer = self.tracer
        if tracer is None:
            return (yield)
        tracer.resume()
        try:
            return (yield)
        finally:
            tracer.pause()

    # Innermost wrappers: trace only the fixtures and the test, not pytest's reporting.
    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, object, object]:
        __tracebackhide__ = True
        return (yield from self._phase())

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        __tracebackhide__ = True
        return (yield from self._phase())

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_teardown(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, object, object]:
        __tracebackhide__ = True
        return (yield from self._phase())

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not self.ended:
            self.reports.append(report)

    def end(self, exitstatus: int, serving: bool = False) -> None:
        """The last line of the record; the tracer is removed."""
        if self.ended:
            return
        self.ended = True
        if self.tracer is not None:
            self.tracer.close()
            self.tracer = None
        _write(self.file, {"type": "finished", "exitstatus": exitstatus, "serving": serving})

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.end(int(session.exitstatus))

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.file.close()


class _ServeAfter:
    """After the recording run's loop, the same process serves the plans.

    Pytest tore everything down after the last test (it had no next one), and the core
    reset what each test left, so the process is in the state a fresh one would reach
    after collection.  Not after an interruption, ``-x`` and the like, nor after a
    restart (``--isolator-resume`` leaves tests out of the session).
    """

    def __init__(self, recording: Recording, runner: PlanRunner) -> None:
        self.recording = recording
        self.runner = runner

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        result = yield
        config = session.config
        if (
            session.shouldfail
            or session.shouldstop
            or config.option.collectonly
            or not session.items
            or config.getoption("isolator_resume", None)
        ):
            return result
        self.recording.end(int(pytest.ExitCode.OK), serving=True)
        # The failures provoked from now on are the data, not worth a traceback.
        config.option.tbstyle = "no"
        self.runner.serve(session)
        return result


def _flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass


def _fast_exit() -> None:
    """End a serving process without interpreter finalization (a second or more with
    isolator's watched modules): every result is on disk and pytest has cleaned up."""
    _flush_streams()
    os._exit(0)


def _save_warnings() -> tuple[Any, list[Any]]:
    return warnings.filters, list(warnings.filters)


def _restore_warnings(saved: tuple[Any, list[Any]]) -> None:
    """Until the core offers ``reset_now()``: the core re-takes its warnings snapshot at
    the start of every test, so a filter set by the first test of a sequence would
    outlive the sequence."""
    obj, items = saved
    obj[:] = items
    warnings.filters = obj
    warnings._filters_mutated()  # type: ignore[attr-defined]


class PlanRunner(_Reports):
    """Runs the plan's sequences (see the module docstring).

    ``--isolator-plan`` names a JSON file ``{"ids": [...], "sequences": [[nodeid...]...]}``,
    or a directory served until a file ``stop`` appears in it: the plans ``plan-0.json``,
    ``plan-1.json``... are run as they appear, so that the rounds of a confirmation share
    one process (one start-up, one collection).
    """

    def __init__(
        self, config: pytest.Config, plan_path: str, out_path: str, after: bool = False
    ) -> None:
        super().__init__()
        self.config = config
        self.plan_path = plan_path
        self.after = after  # the recording run comes first (see _ServeAfter)
        self.serving = os.path.isdir(plan_path)
        if not self.serving:
            self._read_plan(plan_path)  # fail early, as a usage error
        self.out = _open_lines(out_path, "a")
        self.ran = 0
        self.served = False
        self.parent = os.getppid()

    @staticmethod
    def _read_plan(path: str) -> list[tuple[int, list[str]]]:
        try:
            with open(path, encoding="utf-8") as f:
                plan = json.load(f)
            seqs = [[str(t) for t in seq] for seq in plan["sequences"]]
            ids = [int(i) for i in plan.get("ids", range(len(seqs)))]
            return list(zip(ids, seqs, strict=True))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise pytest.UsageError(f"isolator: cannot read plan {path}: {exc}") from None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        if self.after:
            return None  # pytest's own loop runs the recording run
        if session.config.option.collectonly:
            return True
        if not self.serving:
            items = {it.nodeid: it for it in session.items}
            self._run_plan(self._read_plan(self.plan_path), items)
            return True
        self.serve(session)
        return True

    def serve(self, session: pytest.Session) -> None:
        """Run the plans of the directory as they appear, until it holds ``stop``."""
        # Cleanups run last-registered first: this one runs after all of pytest's.  Only
        # once serving: a usage error (a test id not found) must still reach the user.
        session.config.add_cleanup(_fast_exit)
        self.served = True
        items = {it.nodeid: it for it in session.items}
        self.reports = []
        # The provoked failures must not become the user's ``--lf`` selection.
        lf: Any = session.config.pluginmanager.get_plugin("lfplugin")
        saved = getattr(lf, "lastfailed", None)
        saved = dict(saved) if isinstance(saved, dict) else None
        k = 0
        try:
            while True:
                path = os.path.join(self.plan_path, f"plan-{k}.json")
                if os.path.exists(path):
                    self._run_plan(self._read_plan(path), items)
                    _write(self.out, {"type": "idle", "plan": k})
                    k += 1
                elif os.path.exists(os.path.join(self.plan_path, "stop")):
                    break
                elif os.getppid() != self.parent:  # the command died: do not linger
                    break
                else:
                    time.sleep(0.01)
        finally:
            if saved is not None:
                lf.lastfailed = saved

    def _run_plan(self, plan: list[tuple[int, list[str]]], items: dict[str, pytest.Item]) -> None:
        core = _core(self.config)
        keep: set[str] = getattr(core, "keep_state_after", set())
        reset_now = getattr(core, "reset_now", None)
        runnable = []
        for sid, seq in plan:
            missing = [t for t in seq if t not in items]
            if missing:
                _write(self.out, {"type": "missing", "id": sid, "tests": seq, "missing": missing})
            else:
                runnable.append((sid, seq))
        if self.config.getoption("isolator_plan_fork", False) and hasattr(os, "fork"):
            self._run_forked(runnable, items, keep, reset_now)
            return
        alive = _AliveFixtures()
        for k, (sid, seq) in enumerate(runnable):
            _write(self.out, {"type": "start", "id": sid})
            saved_warnings = _save_warnings()
            for nodeid in seq:
                alive.add(items[nodeid])
            # The next sequence must start as in a fresh process: keep the higher-scoped
            # fixtures it will use anyway, tear down the rest.
            following = items[runnable[k + 1][1][0]] if k + 1 < len(runnable) else None
            # The same test next (a repeat): pytest would keep it set up and the rerun
            # would get none of its function-scoped fixtures.
            if (
                following is None
                or following is items[seq[-1]]
                or alive.must_tear_down_for(following)
                or _sets_up_scope_late([items[t] for t in seq])
            ):
                following = None
                alive.clear()
            outcomes = self._run_seq(seq, items, keep, following)
            if callable(reset_now):
                reset_now()
            else:
                _restore_warnings(saved_warnings)
            _write(self.out, {"type": "result", "id": sid, "tests": seq, "outcomes": outcomes})
            self.ran += 1

    def _run_seq(
        self,
        seq: list[str],
        items: dict[str, pytest.Item],
        keep: set[str],
        following: pytest.Item | None,
    ) -> list[str]:
        """Run ``seq`` keeping the state between its tests; ``following``: the next
        item after it, whose higher-scoped fixtures stay set up (None: all torn down)."""
        outcomes: list[str] = []
        for pos, nodeid in enumerate(seq):
            item = items[nodeid]
            last = pos == len(seq) - 1
            nextitem = following if last else items[seq[pos + 1]]
            if not last:
                keep.add(nodeid)
            self.reports = []
            item._report_sections = []  # grows with every rerun otherwise
            try:
                item.ihook.pytest_runtest_protocol(item=item, nextitem=nextitem)
            finally:
                if not last:
                    keep.discard(nodeid)
            outcomes.append(outcome_of(self.reports))
        return outcomes

    def _run_forked(
        self,
        runnable: list[tuple[int, list[str]]],
        items: dict[str, pytest.Item],
        keep: set[str],
        reset_now: Any,
    ) -> None:
        """Each sequence in a child of this process, which runs no test itself: every
        sequence starts from the state right after collection, as in a fresh process
        (for checking what runs sharing one process found)."""
        for sid, seq in runnable:
            _write(self.out, {"type": "start", "id": sid})
            _flush_streams()
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    outcomes = self._run_seq(seq, items, keep, None)
                    if callable(reset_now):
                        reset_now()  # (the files it wrote: put back before it ends)
                    _write(
                        self.out, {"type": "result", "id": sid, "tests": seq, "outcomes": outcomes}
                    )
                except BaseException:
                    code = 70
                finally:
                    _flush_streams()
                    os._exit(code)
            os.waitpid(pid, 0)
            self.ran += 1

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.after and not self.served:
            return  # the recording run ended without serving: its status stands
        # Failures are the data here, not a problem of the run.
        if session.exitstatus == pytest.ExitCode.TESTS_FAILED:
            session.exitstatus = pytest.ExitCode.OK
        _write(self.out, {"type": "finished", "ran": self.ran})

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.out.close()
