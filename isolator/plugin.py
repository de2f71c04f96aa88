"""The pytest plugin: ``pytest -p isolator --reset=minimal`` (entry point ``isolator``).

Hooks stay thin; the session's state lives in :class:`IsolatorPlugin`, registered as
``isolator-core``.
"""

from __future__ import annotations

import argparse
import collections
import functools
import gc
import importlib
import itertools
import json
import operator
import os
import sys
import tempfile
import time
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

import pytest

import isolator
from isolator import _config, _interop
from isolator._store import STORE_DIR, StoreError, read_json, update_json

# The resetter and its machinery are imported when a session starts resetting: pytest
# loads this plugin in every run of a project that has isolator installed, and a run
# that does not use it should not pay for importing it.
if TYPE_CHECKING:
    from _pytest.nodes import Node

    from isolator._files import FileGuard
    from isolator._fork import ForkRunner
    from isolator._types import ResetPlan
    from isolator.resetter import Resetter

_dumps = json.dumps  # our own reference: a test may monkeypatch json.dumps

# Sub-plugins, registered with us so that their options are known to pytest (by
# pytest_plugin_registered below, not ``pytest_plugins``: pytest would load those through its
# assertion rewriter, see isolator/__init__.py).
_SUB_PLUGINS = ("isolator._schedplugin", "isolator._depsplugin")


MODES = ("none", "minimal", "full", "fork")
# Per-test records in item.stash, as plain lists (a resetting run does not import the
# pipeline's record types): the sites a test left changed, and (site, reason) for what
# could not be restored after it; absent for a test that left nothing.
WRITES_KEY: pytest.StashKey[list[str]] = pytest.StashKey()
UNRESTORABLE_KEY: pytest.StashKey[list[tuple[str, str]]] = pytest.StashKey()
FORK_FILE = "fork.json"


def _perf_counter(clock: Callable[[], float] = time.perf_counter) -> float:
    """The original ``time.perf_counter``: a test may leave time frozen.  Held as a
    default, not as a module global, which freezegun's ``start()`` rebinds to its fake
    as it does every module global that is the real clock."""
    return clock()


MEMO_FILE = "memo.json"
MEMO_SCHEMA = "isolator.memo/4"  # 4: one section per code stamp (see _save_memo)
# Sections kept in memo.json: runs of different subsets of the tests import different
# project modules, so their code stamps differ; each keeps its own knowledge.
MEMO_SECTIONS = 8


def pytest_plugin_registered(plugin: object, manager: pytest.PytestPluginManager) -> None:
    # Right after this module's registration, where pytest would load ``pytest_plugins``:
    # the sub-plugins' hooks keep their place relative to ours.
    if plugin is sys.modules[__name__]:
        # Under `isolator run` this package was imported before pytest marked it for
        # assertion rewriting, so isolator/__init__.py found nothing to unmark: unmark it now,
        # before the rest of isolator is imported.
        isolator._no_assertion_rewriting()
        for name in _SUB_PLUGINS:
            if manager.get_plugin(name) is None and not manager.is_blocked(name):
                manager.register(importlib.import_module(name), name)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("isolator", "isolator: unit test virtualization")
    group.addoption(
        "--reset",
        dest="isolator_reset",
        choices=MODES,
        default=None,
        help="after each test, restore: none (plain pytest), minimal (only what the test "
        "dirtied), full (every tracked site), fork (run each test in a forked child). "
        "Default: [tool.isolator] reset, else minimal when isolator is asked for with "
        "-p isolator or `isolator run`, else none.",
    )
    group.addoption(
        "--isolator-fork",
        dest="isolator_fork",
        action="append",
        default=[],
        metavar="NODEID",
        help="always run this test in a forked child (repeatable).",
    )
    group.addoption("--isolator-supervised", dest="isolator_supervised", help=argparse.SUPPRESS)
    # Where a child of `isolator run` writes JUnit XML asked for by its configuration.
    group.addoption("--isolator-junit-part", dest="isolator_junit_part", help=argparse.SUPPRESS)
    # Failures of the parts of an `isolator run` before this one (for --maxfail).
    group.addoption(
        "--isolator-failed-before", dest="isolator_failed_before", type=int, default=0,
        help=argparse.SUPPRESS,
    )  # fmt: skip
    group.addoption("--isolator-resume", dest="isolator_resume", help=argparse.SUPPRESS)


def _asked_for(config: pytest.Config) -> bool:
    if os.environ.get("ISOLATOR_RUN") == "1":
        return True
    args = list(config.invocation_params.args)
    for i, a in enumerate(args):
        if a in ("-pisolator", "-p=isolator") or (
            a == "-p" and args[i + 1 : i + 2] == ["isolator"]
        ):
            return True
    return False


# The sessions resetting in this process (at most one: see pytest_configure).
_RESETTING: list[IsolatorPlugin] = []


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "isolator_fork: always run this test in a forked child process"
    )
    _junit_to_part(config)
    try:
        settings = _config.load(config.rootpath)
    except _config.ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    mode = config.getoption("isolator_reset") or settings.reset
    if mode is None:
        mode = "minimal" if _asked_for(config) else "none"
    if _RESETTING:
        # A session that a test runs in this process (pytester's inline runs) is part of
        # that test, whose state the outer session resets: a second resetter would take
        # over the process-wide hooks (import finder, library-module watch) and remove
        # them when it stops, and no later test of the outer session would be isolated.
        mode = "none"
    if mode != "none":
        # Imported now, not when the tests start: the allocations of an import after
        # collection would bring on a garbage collection that a plain run does not have.
        # (Unmarked again: a plugin loaded after ours may have marked the package.)
        isolator._no_assertion_rewriting()
        importlib.import_module("isolator.resetter")
    core = IsolatorPlugin(config, mode, settings)
    config.pluginmanager.register(core, "isolator-core")


def _junit_to_part(config: pytest.Config) -> None:
    """Under ``isolator run``, JUnit XML that the configuration asks for (``addopts``; one
    given on the command line the supervisor has replaced already) goes to this part's
    file, and its path to the supervisor, which merges the parts there: each process of
    the run would otherwise replace the file with its own tests.  (Before pytest's junitxml
    plugin reads the option: plugins loaded from entry points configure first.)"""
    part = config.getoption("isolator_junit_part", None)
    sup = config.getoption("isolator_supervised", None)
    xml = getattr(config.option, "xmlpath", None)
    if not (part and sup and xml) or hasattr(config, "workerinput"):
        return
    target = os.path.abspath(os.path.expanduser(os.path.expandvars(xml)))
    _handoff(os.path.join(sup, "junit_target.json"), target)
    config.option.xmlpath = part
    # Every report streamed: a crashed part's XML is rebuilt from them.
    open(os.path.join(sup, "results.jsonl"), "a").close()


class IsolatorPlugin:
    """Session state of isolator.

    ``keep_state_after``: node ids after which no reset happens (chains that must share
    state).  ``dirty_tests``/``forked`` and the resetter's counters feed the summary.
    """

    def __init__(self, config: pytest.Config, mode: str, settings: _config.Settings):
        self.config = config
        self.mode = mode
        self.settings = settings
        self.keep_state_after: set[str] = set()
        self.resetter: Resetter | None = None
        self.active = False
        self.dirty_tests = 0
        self.tests = 0
        self.overhead = 0.0
        self.unrestorable: dict[str, list[tuple[str, str]]] = {}
        self.child_files: dict[str, list[tuple[str, str]]] = {}  # see Outcome.child_files
        self.forked: dict[str, str] = {}
        self.fork_plan: dict[str, str] = {}
        self.fork_reasons: dict[str, str] = {}
        # Tests to fork run here instead, with the threads left running that a child
        # would not have (nodeid -> their names).
        self.unforkable: dict[str, list[str]] = {}
        # Tests whose garbage held open resources, with its ResourceWarnings' messages.
        self.garbage: dict[str, list[str]] = {}
        self.unforked: list[str] = []  # forked as fork.json said, and left nothing unreset
        self.forks: ForkRunner | None = None  # when the session starts resetting
        self.scoped: set[int] = set()
        self.recovered: list[str] = []
        self.worker_summary: dict[str, Any] | None = None  # xdist controller: the workers'
        self.store = config.rootpath / STORE_DIR
        self.conftests: list[str] = []
        self._results: Any = None
        self.memo_code: str | None = None  # Resetter.code_stamp() when memo knowledge was loaded
        self._index = 0
        self._progress: Any = None  # the supervisor's progress file, mapped (see _Progress)
        self._fake_patcher: Any = None  # pyfakefs's Patcher class, when it is loaded
        # item.module by parent node (nodes hash and compare by identity).
        self.module_of: dict[Node, Any] = {}

    # ----------------------------------------------------------------- session

    def _supervised(self) -> str | None:
        """The supervisor's directory, in the process the supervisor started (xdist passes
        the option on to its workers, which must leave the supervisor's files alone)."""
        if hasattr(self.config, "workerinput"):
            return None
        return self.config.getoption("isolator_supervised")  # type: ignore[no-any-return]

    def _is_controller(self) -> bool:
        return self.config.pluginmanager.has_plugin("dsession")

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        resume = config.getoption("isolator_resume")
        if resume:
            try:
                done = collections.Counter(map(str, read_json(resume)))
            except (StoreError, TypeError) as exc:
                raise pytest.UsageError(f"isolator: {exc}") from None
            # As many of each id as ran before (pytest allows a repeated id: the same file
            # given twice with --keep-duplicates, a custom collector's items).
            left = []
            for it in items:
                if done[it.nodeid] > 0:
                    done[it.nodeid] -= 1
                else:
                    left.append(it)
            items[:] = left

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        sup = self._supervised()
        if sup:
            _handoff(os.path.join(sup, "collected.json"), [i.nodeid for i in session.items])
            _handoff(
                os.path.join(sup, "part.json"), {"maxfail": session.config.getoption("maxfail")}
            )
            self._progress = _Progress(os.path.join(sup, "progress"))
            # The earlier parts' failures count towards --maxfail, as in one process.
            before = session.config.getoption("isolator_failed_before") or 0
            self._progress.set_failed(before)
            self.config.pluginmanager.register(_FailureCounter(self._progress, session, before))
            results = os.path.join(sup, "results.jsonl")
            if os.path.exists(results):
                # The supervisor wants every report kept (to rebuild a crashed part's JUnit
                # XML).  Line-buffered: what a test reported survives the process dying in
                # the next.
                self._results = open(results, "a", buffering=1, encoding="utf-8")  # noqa: SIM115
                writer = _ResultsWriter(self._results)
                self.config.pluginmanager.register(writer, "isolator-results")
        if (
            self.mode != "none"
            and not self._is_controller()
            and not session.config.option.collectonly
        ):
            self._start(session)
        try:
            return (yield)
        finally:
            if self.resetter is not None:
                self.resetter.stop()
                self.active = False
                if self in _RESETTING:
                    _RESETTING.remove(self)
                self._save_forks()
                self._save_memo()
                self.resetter.save_static()
                out = getattr(self.config, "workeroutput", None)
                if out is not None:  # an xdist worker: the controller prints the summary
                    from isolator._summary import WORKEROUTPUT_KEY, collect

                    out[WORKEROUTPUT_KEY] = collect(self)

    def _start(self, session: pytest.Session) -> None:
        from isolator._files import recover_journal
        from isolator.resetter import Resetter, settle_gc

        # (After collection: test modules may import pyfakefs.)
        self._fake_patcher = _interop.spare_isolator()

        backup = str(self.store / "cow" / str(os.getpid()))
        self.recovered = _recover_dead_journals(self.store / "cow")
        self.recovered += recover_journal(backup)
        made = _basetemp(self.config)
        exempt = [
            *([made] if made is not None else []),
            str(self.store),
            str(self.config.rootpath / ".pytest_cache"),
            *self.settings.exempt,
        ]
        basetemp = self.config.option.basetemp
        if basetemp:
            exempt.append(str(basetemp))
        cache = getattr(self.config, "cache", None)
        if cache is not None:
            exempt.append(str(cache._cachedir))
        xml = getattr(self.config.option, "xmlpath", None)
        if xml:
            exempt.append(os.path.dirname(os.path.abspath(xml)))
        # The test modules, in collection order: asked once per parent node (``item.module``
        # walks up the tree), which also fills the cache the per-test scope lookups use.
        items = session.items
        first = dict(zip(map(_PARENT, reversed(items)), reversed(items)))
        by_id: dict[int, Any] = {}
        for parent in dict.fromkeys(map(_PARENT, items)):
            mod = _module_of(self.module_of, first[parent])
            if mod is not None:
                by_id.setdefault(id(mod), mod)
        modules = list(by_id.values())
        self.resetter = Resetter(
            str(self.config.rootpath),
            backup,
            exempt,
            track=self.settings.track,
            exclude=self.settings.exclude,
            learn_memo=self.settings.learn_memo,
            keep=self.settings.keep,
        )
        if made is None:
            _exempt_basetemp_when_made(self.config, self.resetter.files)
        self.forked = self._load_forks()
        self.fork_plan = self._fork_plan(session.items)
        can_fork = hasattr(os, "fork")
        if made is None and self.fork_plan and can_fork:
            # Forked children must share one directory, made here, not one each (before
            # the baseline: what making it imports is no test's).
            self.config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
        # No collection while the baseline is built: one would collect the garbage that
        # collection left young, which plain pytest collects only later (a test may expect
        # it alive); settle_gc then moves it all to the oldest generation.
        collecting = gc.isenabled()
        gc.disable()
        try:
            self.resetter.start(modules)
            settle_gc()
        finally:
            if collecting:
                gc.enable()
        self.conftests = [
            n for n in self.resetter.project if n == "conftest" or n.endswith(".conftest")
        ]
        if self.resetter.learn_memo:
            self._load_memo()
        self.active = True
        _RESETTING.append(self)
        if self.fork_plan and can_fork:
            # Only a session with tests to fork needs the fork runner (nothing else can
            # start a chain in a child).
            from isolator._fork import ForkRunner

            self.forks = ForkRunner()

    # ----------------------------------------------------------------- per test

    def _fork_plan(self, items: list[pytest.Item]) -> dict[str, str]:
        """Node id -> why it runs in a forked child, decided once for the session."""
        plan = dict(self.forked)
        option = set(self.config.getoption("isolator_fork"))
        patterns = self.settings.fork
        marked: dict[Node, bool] = {}  # by collector: most items share theirs
        todo = items
        if self.mode != "fork" and not option and not patterns:
            # Only a mark can give a reason: only items with marks of their own, or under
            # a marked collector, are looked at one by one.
            under = {
                p
                for p in dict.fromkeys(map(_PARENT, items))
                if p is not None and _marked(p, marked)
            }
            if under:
                todo = [it for it in items if it.own_markers or it.parent in under]
            else:
                todo = list(itertools.compress(items, map(_OWN_MARKERS, items)))
        parent: object = None
        parent_marked = False
        for item in todo:
            nodeid = item.nodeid
            if self.mode == "fork":
                plan[nodeid] = "--reset=fork"
                continue
            if item.parent is not parent:
                parent = item.parent
                parent_marked = _marked(parent, marked) if parent is not None else False
            if parent_marked or (
                item.own_markers and any(m.name == "isolator_fork" for m in item.own_markers)
            ):
                plan[nodeid] = "marked isolator_fork"
            elif nodeid in option:
                plan[nodeid] = "--isolator-fork"
            elif patterns and any(_match(nodeid, p) for p in patterns):
                plan[nodeid] = "[tool.isolator] fork"
        if not plan or not self.keep_state_after:
            return plan
        # A state-setter chain with a forked test runs whole in one child (ForkRunner), from
        # its first test on, so that the chain's state never reaches this process.
        chain: list[str] = []
        for item in items:
            chain.append(item.nodeid)
            if item.nodeid in self.keep_state_after:
                continue
            if len(chain) > 1 and any(t in plan for t in chain):
                for t in chain:
                    plan.setdefault(t, "state-setter chain of a forked test")
            chain = []
        return plan

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> object:
        forks = self.forks
        if not self.active or forks is None:
            return None
        why = self.fork_plan.get(item.nodeid)
        r = self.resetter
        assert r is not None
        if not why:
            if not forks.chained:
                return None
            # The previous test kept its state for this one, in a forked child: run there.
            why = "state-setter chain of a forked test"
        elif not forks.chained and self.mode != "fork":
            running = r.threads_left_running()
            if running:
                # Threads earlier tests left here would be missing in the child: this
                # process shares them with the test (as with the tests after the leak).
                self.unforkable[item.nodeid] = running
                return None
        self.fork_reasons[item.nodeid] = why
        ihook = item.ihook
        ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        keep = item.nodeid in self.keep_state_after
        # A test forked because an earlier run could not reset what it left: the child
        # checks again, and a test that left nothing of the kind runs here next time.
        remembered = self.forked.get(item.nodeid) == why
        check = functools.partial(_left_clean, r) if remembered else None
        for rep in forks.run(item, nextitem, keep, r.begin_test, r.restore_files, check):
            ihook.pytest_runtest_logreport(report=rep)
        if remembered and forks.last_clean:
            self.unforked.append(item.nodeid)
        if not forks.chained:
            # A child that crashed left its journal: its files are put back before the
            # next test, not only by the next run.
            self.recovered += r.files.recover_children()
        ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        if item.session.shouldfail or item.session.shouldstop:
            forks.close()  # -x: the rest of the chain will not run
        return True

    def _restart_after(self, item: pytest.Item, unrestorable: list[tuple[str, str]]) -> None:
        """Under ``isolator run``: a thread, process or asyncio task that the test left
        running stays in this process (a lock it holds, a port it serves, a task on a
        session-scoped event loop), so the remaining tests continue
        in a new one, which the supervisor starts (as after a crash).  Next time the test
        runs in a forked child instead (fork.json)."""
        sup = self._supervised()
        session = item.session
        if not sup or session.shouldstop or session.shouldfail:
            return
        from isolator._supervise import MAX_LEAK_RESTARTS, PART_ENV, RESTART_FILE

        if int(os.environ.get(PART_ENV, "0") or 0) >= MAX_LEAK_RESTARTS:
            return  # enough new processes for one run: the rest share it (reported)
        running = [
            s
            for s, _ in unrestorable
            if s.startswith(("<thread>:", "<process>:", "<asyncio task>:"))
        ]
        if not running:
            return
        _handoff(
            os.path.join(sup, RESTART_FILE),
            {"next": self._index, "failed": session.testsfailed},
        )
        session.shouldstop = (
            f"isolator: {item.nodeid} left {', '.join(running)} running; the remaining "
            "tests continue in a new process"
        )

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.unforked:
            self._forget_forks()
        sup = self._supervised()
        if sup:
            from isolator._supervise import COUNTS_FILE

            # The supervisor adds up the parts of a run that went on in a new process.
            _handoff(os.path.join(sup, COUNTS_FILE), _outcome_counts(session))
            with open(os.path.join(sup, "finished"), "w", encoding="ascii") as f:
                f.write("1\n")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from isolator._summary import write_summary

        write_summary(self, terminalreporter)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        """An xdist worker finished: add its part of the summary."""
        from isolator._summary import WORKEROUTPUT_KEY, merge

        part = getattr(node, "workeroutput", {}).get(WORKEROUTPUT_KEY)
        if isinstance(part, dict):
            self.worker_summary = merge(self.worker_summary, part)

    def reset_now(self) -> ResetPlan:
        """Restore everything that differs from the baseline now (between test sequences)."""
        from isolator._types import ResetPlan

        r = self.resetter
        if r is None:
            return ResetPlan(nodeid="")
        out = r.check_and_reset()
        return ResetPlan(nodeid="", reset=tuple(out.reset), unrestorable=tuple(out.unrestorable))

    # ----------------------------------------------------------------- fork memory

    def _load_forks(self) -> dict[str, str]:
        path = self.store / FORK_FILE
        if not path.exists():
            return {}
        try:
            data = read_json(path)
        except StoreError as exc:
            sys.stderr.write(f"isolator: ignoring {exc}\n")
            return {}
        if not isinstance(data, dict):
            return {}
        return {str(k): str(v) for k, v in data.items()}

    def _load_memo(self) -> None:
        """Memo entries verified by an earlier run of the same code (see
        ``Resetter.code_stamp``) are kept at first sight: no second computation, no
        comparison.  Knowledge from other code or another interpreter is ignored."""
        r = self.resetter
        assert r is not None
        self.memo_code = r.code_stamp()
        path = self.store / MEMO_FILE
        if not path.exists():
            return
        try:
            data = read_json(path)
        except StoreError as exc:
            sys.stderr.write(f"isolator: ignoring {exc}\n")
            return
        data = _memo_section(data, self.memo_code)
        if data is None:
            return
        r.memo_prior = {
            str(site): {str(k) for k in keys}
            for site, keys in data["sites"].items()
            if isinstance(keys, list)
        }
        writers = data.get("writers")
        if isinstance(writers, dict):
            r.writers = {
                str(site): w
                for site, w in writers.items()
                if w is None
                or (
                    isinstance(w, list)
                    and all(isinstance(x, list) and all(isinstance(y, str) for y in x) for x in w)
                )
            }
        verdicts = data.get("verdicts")
        if isinstance(verdicts, list):
            r.memo_verdicts = {
                (v[0], v[1], v[2]): v[3]
                for v in verdicts
                if isinstance(v, list)
                and len(v) == 4
                and isinstance(v[0], str)
                and isinstance(v[1], str)
                and isinstance(v[2], bool)
                and isinstance(v[3], bool)
            }

    def _save_memo(self) -> None:
        r = self.resetter
        if r is None or self.memo_code is None:
            return
        if not (r.memo_verified or r.memo_verdicts_new or r.writers_new):
            return
        sites = {site: set(keys) for site, keys in r.memo_prior.items()}
        grew = bool(r.memo_verdicts_new or r.writers_new)
        for site, keys in r.memo_verified.items():
            known = sites.setdefault(site, set())
            grew = grew or not keys <= known
            known |= keys
        if not grew:
            return
        code = self.memo_code
        verdicts = dict(r.memo_verdicts)
        writers = dict(r.writers)

        def add(current: Any) -> dict[str, Any]:
            # What other workers of this run (same code) saved meanwhile is kept too.
            mine = _memo_section(current, code)
            if mine is not None:
                for site, keys in mine["sites"].items():
                    if isinstance(keys, list):
                        sites.setdefault(str(site), set()).update(str(k) for k in keys)
                found = mine.get("verdicts")
                for v in found if isinstance(found, list) else ():
                    if isinstance(v, list) and len(v) == 4:
                        verdicts.setdefault((str(v[0]), str(v[1]), bool(v[2])), bool(v[3]))
                theirs = mine.get("writers")
                for site, w in theirs.items() if isinstance(theirs, dict) else ():
                    writers.setdefault(str(site), w)
            section = {
                "code": code,
                "sites": {site: sorted(keys) for site, keys in sorted(sites.items())},
                # The static pass's verdicts on learning (see Resetter._may_learn).
                "verdicts": [[*key, ok] for key, ok in sorted(verdicts.items())],
                # What the functions writing a memo write besides (Resetter._kept_together).
                "writers": dict(sorted(writers.items())),
            }
            # This code's section first, then the others most recent first (a run of one
            # test file does not make the next run of the whole suite learn again).
            kept = current["sections"] if _memo_file(current) else []
            others = [sec for sec in kept if isinstance(sec, dict) and sec.get("code") != code]
            return {"schema": MEMO_SCHEMA, "sections": [section, *others][:MEMO_SECTIONS]}

        try:
            update_json(self.store / MEMO_FILE, add)
        except OSError as exc:
            sys.stderr.write(f"isolator: cannot write {self.store / MEMO_FILE}: {exc}\n")

    def _save_forks(self) -> None:
        new = {
            nodeid: "could not reset: " + ", ".join(s for s, _ in probs)
            for nodeid, probs in self.unrestorable.items()
        }
        if not new:
            return

        def add(current: Any) -> dict[str, str]:
            # Read again under the lock: other workers of this run may have added theirs.
            merged = dict(current) if isinstance(current, dict) else dict(self.forked)
            merged.update(new)
            return merged

        try:
            update_json(self.store / FORK_FILE, add)
        except OSError as exc:
            sys.stderr.write(f"isolator: cannot write {self.store / FORK_FILE}: {exc}\n")

    def _forget_forks(self) -> None:
        """Drop from fork.json the tests whose forked run left nothing that cannot be
        reset (code or a flaky leak that changed since): they run here next time, and are
        remembered again if they leave such state then."""
        gone = set(self.unforked).difference(self.unrestorable)

        def drop(current: Any) -> dict[str, str]:
            merged = dict(current) if isinstance(current, dict) else dict(self.forked)
            for nodeid in gone:
                merged.pop(nodeid, None)
            return merged

        try:
            update_json(self.store / FORK_FILE, drop)
        except OSError as exc:
            sys.stderr.write(f"isolator: cannot write {self.store / FORK_FILE}: {exc}\n")


def _left_clean(r: Resetter) -> bool:
    """In a forked child after its test: whether the test left only state that a reset
    puts back."""
    return not r.check_and_reset().unrestorable


def _memo_file(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and data.get("schema") == MEMO_SCHEMA
        and isinstance(data.get("sections"), list)
    )


def _memo_section(data: Any, code: str) -> dict[str, Any] | None:
    """The section of memo.json for the code stamp ``code`` (see Resetter.code_stamp)."""
    if not _memo_file(data):
        return None
    for sec in data["sections"]:
        if isinstance(sec, dict) and sec.get("code") == code and isinstance(sec.get("sites"), dict):
            return sec
    return None


def _wrap_protocol(
    self: IsolatorPlugin, item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    __tracebackhide__ = True
    r = self.resetter
    if not self.active or r is None:
        return (yield)
    index = self._index
    if self._progress is not None:
        self._progress.set(index)
    self._index += 1
    mod = _module_of(self.module_of, item)
    r.test_module = mod  # (begin_test hides memos from it; the check judges with it)
    t0 = _perf_counter()
    r.begin_test()
    self.overhead += _perf_counter() - t0
    try:
        return (yield)
    finally:
        t0 = _perf_counter()
        r.end_test()
        if self.keep_state_after and item.nodeid in self.keep_state_after:
            r.chained = True
            self.overhead += _perf_counter() - t0
        else:
            scope = None
            # Items of one parent node share their module (most neighbours in a run).
            same = nextitem is not None and (
                nextitem.parent is item.parent or _module_of(self.module_of, nextitem) is mod
            )
            if mod is not None and same:
                # Within a test module only the state it can reach; at the boundary, all.
                scope = r.scope_for(str(getattr(mod, "__name__", "")), self.conftests)
            fake = None
            if self._fake_patcher is not None:
                fake = _interop.paused_patcher(self._fake_patcher)
            if fake is not None:
                fake.resume()  # the scope's fake filesystem, as the test had it
            try:
                out = r.check_and_reset(force=self.mode == "full", scope=scope)
            finally:
                if fake is not None:
                    fake.pause()
            self.overhead += _perf_counter() - t0
            self.tests += 1
            if out.writes:
                self.dirty_tests += 1
            if out.child_files:
                self.child_files.setdefault(item.nodeid, []).extend(out.child_files)
            if out.garbage:
                self.garbage[item.nodeid] = out.garbage
            if out.unrestorable:
                self.unrestorable.setdefault(item.nodeid, []).extend(out.unrestorable)
                # Saved at once: a run that never ends (a later test deadlocks on what
                # this one left) still forks this test next time.
                self._save_forks()
                if nextitem is not None:
                    self._restart_after(item, out.unrestorable)
            # Only tests that left something behind get records: a record per clean test
            # would be thousands of long-lived objects for the cyclic GC to walk.
            if out.writes:
                item.stash[WRITES_KEY] = out.writes
            if out.unrestorable:
                item.stash[UNRESTORABLE_KEY] = out.unrestorable
        if self._progress is not None:
            self._progress.set(-2 - index)  # that test is over, checked and reset


_PARENT = operator.attrgetter("parent")
_OWN_MARKERS = operator.attrgetter("own_markers")


def _module_of(cache: dict[Node, Any], item: pytest.Item) -> Any:
    """``item.module`` (a walk up the collection tree each time), cached by parent node."""
    parent = item.parent
    if parent is None:
        return getattr(item, "module", None)
    try:
        return cache[parent]
    except KeyError:
        mod = cache[parent] = getattr(item, "module", None)
        return mod


class _Progress:
    """The index of the running test, for the supervisor to read after a crash: an
    8-byte little-endian integer in a shared mapping of the file (a store to memory per
    test; the kernel keeps the page when the process dies), -1 before the first test,
    ``-2 - i`` once test ``i`` is over (checked and reset) and the next has not started.
    ``_supervise._progress`` reads it."""

    def __init__(self, path: str):
        import mmap
        import struct

        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, struct.pack("<qq", -1, 0))
            self._map = mmap.mmap(fd, 16)
        finally:
            os.close(fd)
        self._pack = struct.Struct("<q").pack_into

    def set(self, index: int) -> None:
        self._pack(self._map, 0, index)

    def set_failed(self, n: int) -> None:
        """The run's failed reports so far, this part's and the earlier parts' (bytes 8-15)."""
        self._pack(self._map, 8, n)


class _FailureCounter:
    """Counts failed reports as pytest's session does (for --maxfail), into the progress
    file: after a crash the supervisor knows how many failed before it.  The earlier
    parts' failures join the session's count when the first test starts (before, pytest
    would take them for collection errors)."""

    def __init__(self, progress: _Progress, session: pytest.Session, before: int):
        self.progress = progress
        self.session: pytest.Session | None = session
        self.failed = before

    def pytest_runtest_logstart(self) -> None:
        session = self.session
        if session is not None:
            self.session = None
            session.testsfailed += self.failed

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed and not hasattr(report, "wasxfail"):
            self.failed += 1
            self.progress.set_failed(self.failed)


class _ResultsWriter:
    """Streams each test's reports to the supervisor's results file (registered only when
    the supervisor asks for them)."""

    def __init__(self, out: Any):
        self.out = out

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or report.outcome != "passed":
            self.out.write(
                _dumps(
                    {
                        "nodeid": report.nodeid,
                        "when": report.when,
                        "outcome": report.outcome,
                        "duration": report.duration,
                        "message": report.longreprtext[-2000:] if report.failed else "",
                    }
                )
                + "\n"
            )


# The hooks that run around every test and every fixture, registered only in a session
# that resets (a run without isolator's resets pays for none of them).  The core already
# implements pytest_runtest_protocol (the fork path); the wrapper around every test is on
# this second object, as a class holds one attribute of a name.
class _ProtocolWrapper:
    def __init__(self, core: IsolatorPlugin):
        self.core = core

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, object, object]:
        __tracebackhide__ = True  # (a frame between pytest and the test: not the user's)
        return (yield from _wrap_protocol(self.core, item, nextitem))

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(
        self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
    ) -> Generator[None, object, object]:
        # A fixture's error shows the fixture, not this frame (as in plain pytest).
        __tracebackhide__ = True
        core = self.core
        r = core.resetter
        if not core.active or r is None or fixturedef.scope == "function":
            return (yield)
        from isolator import _modules

        t0 = _perf_counter()
        _modules.collect_writes()
        marks = (len(_modules.LOG.entries), len(r.files.order))
        pre = r.probe_diffs()
        pre_snaps = r.phase_snaps()
        chain = r.chain_marks()  # (None unless an earlier test kept its state for this one)
        core.overhead += _perf_counter() - t0
        value: object = None
        try:
            value = yield
            return value
        finally:
            t0 = _perf_counter()
            if r.push_scope(id(fixturedef), *marks, pre, chain, pre_snaps):
                core.scoped.add(id(fixturedef))
            if r.watch_value(id(fixturedef), fixturedef.argname, value):
                core.scoped.add(id(fixturedef))
            core.overhead += _perf_counter() - t0

    def pytest_fixture_post_finalizer(
        self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
    ) -> None:
        core = self.core
        key = id(fixturedef)
        if key in core.scoped and core.resetter is not None:
            core.scoped.discard(key)
            core.resetter.pop_scope(key)


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    core = session.config.pluginmanager.get_plugin("isolator-core")
    if isinstance(core, IsolatorPlugin) and core.mode != "none":
        session.config.pluginmanager.register(_ProtocolWrapper(core), "isolator-protocol")


def _outcome_counts(session: pytest.Session) -> dict[str, int]:
    """This process's outcome counts as pytest's last line gives them (``passed``,
    ``failed``, ``warnings`` ...: the terminal reporter's categories)."""
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    stats = getattr(tr, "stats", None)
    if not isinstance(stats, dict):
        return {}
    from isolator._supervise import PART_ENV

    if int(os.environ.get(PART_ENV, "0") or 0) > 0:
        # A later part collected the whole suite again: what collection itself reported
        # (a module skipped at import, ``pytest.skip(allow_module_level=True)``) the first
        # part counted already.
        stats = {
            k: [r for r in v if not isinstance(r, pytest.CollectReport)]
            for k, v in stats.items()
            if isinstance(v, list)
        }
    return {k: len(v) for k, v in stats.items() if k and isinstance(k, str) and v}


def _handoff(path: str, data: object) -> None:
    """A file for the supervisor: complete or absent if this process dies (rename), with no
    fsync, which would guard against the machine stopping, not this process."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(_dumps(data))
    os.replace(tmp, path)


def _recover_dead_journals(cow: Any) -> list[str]:
    from isolator._files import alive, recover_journal, remove_empty_dir

    out: list[str] = []
    if not os.path.isdir(cow):
        return out
    for name in os.listdir(cow):
        if not name.isdigit():
            continue
        pid = int(name)
        if pid != os.getpid() and alive(pid):
            continue
        out += recover_journal(os.path.join(cow, name))
        if pid != os.getpid():
            remove_empty_dir(os.path.join(cow, name))  # a dead run's
    return out


def _basetemp(config: pytest.Config) -> str | None:
    """pytest's temporary directory for this session (files under it are the tests' own), or
    None when pytest has not made it yet: it makes it when a test first asks for one."""
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is None:
        return os.path.join(tempfile.gettempdir(), f"pytest-of-{_user()}")
    made = getattr(factory, "_basetemp", None)
    return None if made is None else str(made)


def _exempt_basetemp_when_made(config: pytest.Config, files: FileGuard) -> None:
    """Let pytest make its temporary directory when a test first asks for one, as it does
    without isolator, instead of in every session: making it (and pruning old ones) is
    pytest's bookkeeping, not the test's writes, and the directory is exempt from then on.

    Not exempting the parent of all ``pytest-N`` directories instead: a project can itself
    live in another session's temporary directory (pytester), and keeps its protection.
    """
    factory: Any = config._tmp_path_factory  # type: ignore[attr-defined]
    original = factory.getbasetemp

    def getbasetemp() -> Any:
        base = files.unguarded(original)
        files.exempt_dir(str(base))
        factory.__dict__.pop("getbasetemp", None)  # made: pytest's own method again
        return base

    factory.getbasetemp = getbasetemp


def _marked(node: Node, memo: dict[Node, bool]) -> bool:
    """Whether ``node`` or a collector above it carries the isolator_fork mark (what
    ``get_closest_marker`` of an item below tells), with each collector's answer kept."""
    chain = []
    found = False
    cur: Node | None = node
    while cur is not None:
        got = memo.get(cur)
        if got is not None:
            found = got
            break
        chain.append(cur)
        if any(m.name == "isolator_fork" for m in cur.own_markers):
            found = True
            break
        cur = cur.parent
    for n in chain:
        memo[n] = found
    return found


def _user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except Exception:
        return "unknown"


def _match(nodeid: str, pattern: str) -> bool:
    import fnmatch

    return nodeid == pattern or fnmatch.fnmatchcase(nodeid, pattern)
