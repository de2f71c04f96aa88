"""pytest-xdist integration: a scheduler that keeps dependent tests on one worker, in order.

Registered only on a distributing xdist controller; the scheduler only takes over when a
dependency graph exists (else xdist's own scheduler runs).  It builds work units from the
graph and the collection the workers report (already in the repaired order, since the
workers run ``_schedplugin``'s collection hooks): each connected component of constraint
edges is one unit, sent to one worker in a single batch so that its tests run back to back;
all other tests are single-test units, balanced across workers like ``--dist load``.
Workers it schedules send their per-test events in batches (``WorkerEvents``).  The
durations of the tests it ran are kept in ``.isolator/durations.json``: the next run starts
the long tests first, spread over the workers (``DependencyScheduling.schedule``).
"""

from __future__ import annotations

import io
import json
import os
import pickle
import shutil
import struct
import tempfile
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest
from xdist.report import report_collection_diff  # type: ignore[import-untyped]
from xdist.workermanage import parse_tx_spec_config  # type: ignore[import-untyped]

from isolator import scheduler
from isolator._schedplugin import PRIORITY_MODES, WORKERINPUT_KEY, WORKEROUTPUT_KEY
from isolator._store import StoreError, read_json, store_dir
from isolator._types import NodeId

if TYPE_CHECKING:
    from isolator._schedplugin import SchedPlugin


def _perf_counter(clock: Callable[[], float] = time.perf_counter) -> float:
    """The original ``time.perf_counter``: a test may leave time frozen, and the batch's
    delay would then never pass (reports would wait for a full batch).  Held as a default,
    not as a module global, which freezegun's ``start()`` rebinds to its fake as it does
    every module global that is the real clock."""
    return clock()


def _cost_key(nodeid: str) -> str:
    """Tests that cost alike: a function's parametrized variants."""
    return nodeid.partition("[")[0]


def _scope_fn(dist: str) -> scheduler.ScopeFn | None:
    """The grouping xdist's own ``--dist`` mode would impose, merged into the units."""
    if dist == "loadscope":
        return lambda nodeid: nodeid.rsplit("::", 1)[0]
    if dist == "loadfile":
        return lambda nodeid: nodeid.split("::", 1)[0]
    return None


# -- recorded durations ----------------------------------------------------------------------
#
# Stealing evens the workers out at the end of a run, but it can only move tests a worker has
# not started: a few long tests that both sit early in one worker's queue (parso's nine
# ``test_on_itself`` variants, 5.7 s of its 7.3 s; mpmath's three polynomial-root and
# elliptic tests) still run one after the other there.  Known durations let the first
# distribution deal them out, longest first, before any test has run.

DURATIONS_FILE: Final = "durations.json"
DURATIONS_SCHEMA: Final = "isolator.durations/1"
_MAX_DURATIONS: Final = 100_000  # entries kept at most (renamed tests otherwise pile up)
# A unit counts as long when it is expected to take at least this share of one worker's
# part of the run; shorter ones keep their collection order (module locality).  Low enough
# that a cluster of similar long tests is dealt out whole: at 1/8, parso's nine
# ``test_on_itself`` variants (each ~1/6 of a worker's part) straddled the limit.
_LONG_SHARE: Final = 1 / 32


def load_durations(root: Path) -> dict[NodeId, float]:
    """Seconds per test from earlier runs; empty when there is no valid record."""
    try:
        data = read_json(store_dir(root) / DURATIONS_FILE)
    except StoreError:
        return {}
    if not isinstance(data, dict) or data.get("schema") != DURATIONS_SCHEMA:
        return {}
    tests = data.get("tests")
    if not isinstance(tests, dict):
        return {}
    return {str(t): float(d) for t, d in tests.items() if isinstance(d, (int, float)) and d >= 0}


def save_durations(root: Path, old: Mapping[NodeId, float], new: Mapping[NodeId, float]) -> None:
    """Record ``new`` over ``old`` (best effort: a read-only checkout records nothing).

    A hint for the next run, not a result: compact JSON and no ``fsync`` (what
    ``write_json_atomic`` spends on 2,000 tests is some 30 ms at the end of every run);
    the rename still leaves readers the old file or the new one, never half of one.
    """
    merged = {**old, **new} if len(old) + len(new) <= _MAX_DURATIONS else dict(new)
    data = {"schema": DURATIONS_SCHEMA, "tests": {t: round(d, 6) for t, d in merged.items()}}
    path = store_dir(root) / DURATIONS_FILE
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(exist_ok=True)
        tmp.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass


# --dist modes this scheduler replaces; "each" runs everything everywhere and "loadgroup"
# rewrites node ids on the workers, so those keep xdist's scheduler.
_REPLACED = frozenset({"load", "loadscope", "loadfile", "worksteal"})


# -- batched worker events -------------------------------------------------------------------
#
# An xdist worker sends six pickled messages per test (logstart, three reports, logfinish,
# runtest_protocol_complete), each serialized by execnet in pure Python, read by the
# controller's receiver thread and handed to its main thread through a queue: about 0.5 ms
# of CPU per test on two processes, as much as a small test itself costs.  Once isolator's
# scheduler is in charge it asks its workers to buffer those events and send them as one
# message of plain data, pickled in C.  What must not wait still goes at once: a failed
# report (-x/--maxfail stop the other workers), every other event (collection, warnings,
# answers to steal requests, "workerfinished", errors), and the buffer before the worker
# waits for tests.  A worker that crashes loses its buffer; the test that crashed it is
# known from a breadcrumb file the worker writes at each test's start (local workers), or
# because the buffer goes out at each test's start (remote workers: one message per test).

BATCH_COMMAND: Final = "isolator_batch"  # controller -> worker: start batching
BATCH_EVENT: Final = "isolator_events"  # worker -> controller: events in one message
_GROUP_EVENT: Final = "isolator_calls"  # controller queue item: one batch's calls
_BATCHED: Final = frozenset({"logstart", "testreport", "logfinish", "runtest_protocol_complete"})
_PROTOCOL: Final = 4  # every supported Python reads it, whichever side is newer
_CRUMB: Final = struct.Struct("<q")
MAX_TESTS: Final = 64  # tests per message at most
MAX_DELAY: Final = 0.2  # seconds an event may wait (checked as tests start and end)


class _PlainPickler(pickle.Pickler):
    """Pickles what execnet could send (containers, strings, numbers, ``None``), no more."""

    def reducer_override(self, obj: Any) -> Any:
        raise pickle.PicklingError(f"not plain data: {type(obj).__name__}")


class _PlainUnpickler(pickle.Unpickler):
    """Loads plain data only: a pickle naming any class or function is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused global {module}.{name}")


def dump_events(events: list[tuple[str, dict[str, Any]]]) -> bytes | None:
    """``events`` pickled, or None when they hold more than plain data."""
    buf = io.BytesIO()
    try:
        _PlainPickler(buf, protocol=_PROTOCOL).dump(events)
    except (pickle.PicklingError, TypeError, ValueError, RecursionError):
        return None
    return buf.getvalue()


def load_events(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    events = _PlainUnpickler(io.BytesIO(data)).load()
    if not isinstance(events, list) or not all(
        type(e) is tuple and len(e) == 2 and isinstance(e[1], dict) for e in events
    ):
        raise pickle.UnpicklingError("not a list of (name, kwargs) events")
    return events


class WorkerEvents:
    """Worker side: xdist's per-test events, buffered and shipped in one message.

    Wraps the ``WorkerInteractor``'s ``sendevent``, ``handle_command`` and test queue.
    Off until the controller sends ``BATCH_COMMAND``.  Shape::

        events = [(name, kwargs), ...]   # in the order xdist produced them
        crumb  = file descriptor | None  # the running test's index, for crash reports
    """

    def __init__(self, interactor: Any) -> None:
        self.interactor = interactor
        self._sendevent: Callable[..., None] = interactor.sendevent
        self._handle_command: Callable[[Any], None] = interactor.handle_command
        self._get: Callable[[], Any] = interactor.torun.get
        # sendevent also runs in execnet's receiver thread (answers to steal requests)
        self.lock = interactor.channel.gateway.execmodel.RLock()
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.tests = 0
        self.since = 0.0
        self.enabled = False
        self.max_tests = 1
        self.max_delay = 0.0
        self.crumb: int | None = None
        interactor.sendevent = self.sendevent
        interactor.handle_command = self.handle_command
        interactor.torun.get = self.next_test

    def handle_command(self, command: Any) -> None:
        if type(command) is tuple and command[0] == BATCH_COMMAND:
            self.enable(**command[1])
        else:
            self._handle_command(command)

    def enable(self, max_tests: int = 1, max_delay: float = 0.0, crumb: str | None = None) -> None:
        with self.lock:
            self.max_tests = max(1, int(max_tests))
            self.max_delay = float(max_delay)
            if crumb is not None and self.crumb is None and hasattr(os, "pwrite"):
                try:
                    self.crumb = os.open(crumb, os.O_WRONLY)
                except OSError:
                    pass  # then the buffer goes out at each test's start
            self.enabled = True

    def sendevent(self, name: str, **kwargs: Any) -> None:
        with self.lock:
            if not self.enabled or name not in _BATCHED:
                self.flush()
                self._sendevent(name, **kwargs)
                return
            now = _perf_counter()
            if name == "logstart":
                if self.events and now - self.since >= self.max_delay:
                    self.flush()
                if not self._drop_crumb():
                    self.events.append((name, kwargs))
                    self.flush()
                    return
            if not self.events:
                self.since = now
            self.events.append((name, kwargs))
            if name == "runtest_protocol_complete":
                self.tests += 1
                if (
                    self.tests >= self.max_tests
                    or now - self.since >= self.max_delay
                    or not isinstance(self.interactor.nextitem_index, int)  # the last test
                ):
                    self.flush()
            elif name == "testreport" and kwargs["data"].get("outcome") == "failed":
                self.flush()

    def _drop_crumb(self) -> bool:
        """Note the running test's index in the breadcrumb file; False if there is none."""
        if self.crumb is None:
            return False
        try:
            os.pwrite(self.crumb, _CRUMB.pack(self.interactor.item_index), 0)
        except OSError:
            os.close(self.crumb)
            self.crumb = None
            return False
        return True

    def next_test(self) -> Any:
        with self.interactor.torun.lock() as items:
            idle = not items
        if idle:  # the controller hears about the finished tests before sending more
            with self.lock:
                self.flush()
        return self._get()

    def flush(self) -> None:
        events, self.events, self.tests = self.events, [], 0
        if not events:
            return
        data = dump_events(events) if len(events) > 1 else None
        if data is None:
            for name, kwargs in events:  # as xdist sends them (and fails where it fails)
                self._sendevent(name, **kwargs)
            return
        self._sendevent(BATCH_EVENT, data=data)


def install_worker_events(config: pytest.Config) -> None:
    """Wrap this xdist worker's event sending (see ``WorkerEvents``)."""
    for plugin in config.pluginmanager.get_plugins():
        if all(hasattr(plugin, a) for a in ("sendevent", "handle_command", "torun", "channel")):
            if hasattr(plugin.torun, "lock"):  # xdist >= 3.6; older ones do not batch
                WorkerEvents(plugin)
            return


class EventBatches:
    """Controller side: unpacks batched events, and tells workers to batch.

    Each node's ``process_from_remote`` (run in execnet's receiver thread) is wrapped:
    the events of one message go through xdist's own handling one by one, and reach the
    main thread as one queue item, which ``DSession.worker_isolator_events`` dispatches.
    Shape::

        crumbs = {node: breadcrumb file path}   # local workers only
    """

    def __init__(self) -> None:
        self.dsession: Any = None
        self.crumbs: dict[Any, str] = {}
        self._dir: str | None = None

    def install(self, config: pytest.Config) -> None:
        """Group the calls of one message into one item of the controller's queue."""
        dsession = config.pluginmanager.getplugin("dsession")
        if dsession is not None and not hasattr(dsession, "worker_" + _GROUP_EVENT):

            def dispatch(calls: list[tuple[str, dict[str, Any]]]) -> None:
                for name, kwargs in calls:
                    getattr(dsession, "worker_" + name)(**kwargs)

            setattr(dsession, "worker_" + _GROUP_EVENT, dispatch)
            self.dsession = dsession

    def wrap(self, node: Any) -> None:
        process: Callable[[Any], None] = node.process_from_remote
        put: Callable[[Any], None] = node.putevent

        def process_from_remote(eventcall: Any) -> None:
            if type(eventcall) is not tuple or eventcall[0] != BATCH_EVENT:
                process(eventcall)
                return
            try:
                events = load_events(eventcall[1]["data"])
            except Exception:
                # What xdist does with an event it cannot handle: that worker goes down.
                excinfo = pytest.ExceptionInfo.from_current()
                node.config.notify_exception(excinfo)
                node.shutdown()
                node.notify_inproc("errordown", node=node, error=excinfo)
                return
            if self.dsession is None:
                for event in events:
                    process(event)
                return
            calls: list[tuple[str, dict[str, Any]]] = []
            node.putevent = calls.append
            try:
                for event in events:
                    process(event)
            finally:
                node.putevent = put
            put((_GROUP_EVENT, {"calls": calls}))

        node.process_from_remote = process_from_remote

    def enable(self, node: Any) -> None:
        """Ask ``node`` to batch its events (once the scheduler sends it tests)."""
        if not hasattr(node, "sendcommand"):
            return
        crumb = self._crumb_file(node)
        node.sendcommand(BATCH_COMMAND, max_tests=MAX_TESTS, max_delay=MAX_DELAY, crumb=crumb)

    def _crumb_file(self, node: Any) -> str | None:
        spec = getattr(getattr(node, "gateway", None), "spec", None)
        if spec is None or not spec.popen or spec.via or not hasattr(os, "pwrite"):
            return None  # a worker on another host cannot write our files
        try:
            if self._dir is None:
                self._dir = tempfile.mkdtemp(prefix="isolator-xdist-")
            path = os.path.join(self._dir, str(node.gateway.id))
            with open(path, "wb"):
                pass
        except OSError:
            return None
        self.crumbs[node] = path
        return path

    def running(self, node: Any) -> int | None:
        """The index of the test ``node`` last started, from its breadcrumb file."""
        path = self.crumbs.pop(node, None)
        if path is None:
            return None
        try:
            with open(path, "rb") as fh:
                data = fh.read(_CRUMB.size)
            os.unlink(path)
        except OSError:
            return None
        return int(_CRUMB.unpack(data)[0]) if len(data) == _CRUMB.size else None

    def cleanup(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


class XdistHooks:
    """Controller-side xdist hooks (workers only need the collection hooks)."""

    def __init__(self, plugin: SchedPlugin) -> None:
        self.plugin = plugin
        self._have_worker_output = False
        self.batches = EventBatches()
        self.sched: DependencyScheduling | None = None

    @pytest.hookimpl
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKERINPUT_KEY] = self.plugin.workerinput_data()
        self.batches.wrap(node)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.batches.cleanup()
        sched = self.sched
        if sched is not None and sched.finished:
            save_durations(session.config.rootpath, sched.recorded, sched.finished)

    @pytest.hookimpl
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if self.plugin.graph is None:
            return None
        dist = str(config.getvalue("dist"))
        if dist not in _REPLACED:
            self.plugin.warnings.append(
                f"--dist {dist}: xdist's own scheduler is used; dependency chains are not kept"
            )
            return None
        lpt = self.plugin.order not in PRIORITY_MODES
        self.batches.install(config)
        self.sched = DependencyScheduling(
            config, log, self.plugin, _scope_fn(dist), lpt=lpt, batches=self.batches,
            recorded=load_durations(config.rootpath),
        )  # fmt: skip
        return self.sched

    @pytest.hookimpl
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Sequence[str]) -> None:
        if not self.plugin.collected_ids:
            self.plugin.collected_ids = list(ids)

    @pytest.hookimpl
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        out = getattr(node, "workeroutput", {}).get(WORKEROUTPUT_KEY)
        if not out or self._have_worker_output:
            return
        self._have_worker_output = True
        self.plugin.lines = list(out.get("lines", []))
        self.plugin.warnings.extend(out.get("warnings", []))
        self.plugin.decisions = list(out.get("decisions", []))


class DependencyScheduling:
    """xdist ``Scheduling`` protocol: dependency units to one worker each, the rest balanced.

    When the queue is empty and a worker runs dry, it steals whole units that another
    worker has not started (xdist's ``steal`` command, all or nothing), so that a batch of
    slow tests sent to one worker does not leave the other idle at the end.

    Shape of the state::

        node2collection = {worker: [nodeid, ...]}     # as reported, all identical
        node2pending    = {worker: [item index, ...]} # sent, not yet completed
        node2units      = {worker: deque([[item index, ...], ...])}  # the same, by unit
        queue           = deque([[item index, ...], ...])  # units not yet sent
        stealing        = (worker, [unit, ...]) | None     # steal request in flight
        recorded        = {nodeid: seconds}   # earlier runs' durations (read-only)
        finished        = {nodeid: seconds}   # this run's
    """

    def __init__(
        self,
        config: pytest.Config,
        log: Any,
        plugin: SchedPlugin,
        scope: scheduler.ScopeFn | None = None,
        *,
        lpt: bool = True,
        numnodes: int | None = None,
        batches: EventBatches | None = None,
        recorded: Mapping[NodeId, float] | None = None,
    ) -> None:
        self.config = config
        self.log = log.isolatorsched if log is not None else (lambda *a: None)
        self.plugin = plugin
        self.scope = scope
        self.lpt = lpt
        self.numnodes = len(parse_tx_spec_config(config)) if numnodes is None else numnodes
        self.node2collection: dict[Any, list[str]] = {}
        self.node2pending: dict[Any, list[int]] = {}
        self.node2units: dict[Any, deque[list[int]]] = {}
        self.stealing: tuple[Any, list[list[int]]] | None = None
        self.queue: deque[list[int]] = deque()
        self.queued_tests = 0
        self.collection: list[str] | None = None
        self.handed_back: set[int] = set()  # ids of units requeued from a crashed worker
        self.batches = batches
        self.batching: set[Any] = set()  # workers told to batch their events
        # Finished tests' durations by function, for stealing about half the work left.
        self.durations: dict[str, tuple[float, int]] = {}
        self.duration_sum = 0.0
        self.duration_n = 0
        self.recorded: Mapping[NodeId, float] = recorded or {}
        self.finished: dict[NodeId, float] = {}
        self._mean: float | None = None

    # -- protocol properties -------------------------------------------------------------

    @property
    def nodes(self) -> list[Any]:
        return list(self.node2pending)

    @property
    def collection_is_completed(self) -> bool:
        return len(self.node2collection) >= self.numnodes

    @property
    def tests_finished(self) -> bool:
        if not self.collection_is_completed or self.queue or self.stealing is not None:
            return False
        # A worker runs its last test only once told what comes next (or to shut down).
        return all(len(p) < 2 for p in self.node2pending.values())

    @property
    def has_pending(self) -> bool:
        return bool(self.queue) or any(self.node2pending.values())

    # -- protocol methods ----------------------------------------------------------------

    def add_node(self, node: Any) -> None:
        assert node not in self.node2pending
        self.node2pending[node] = []
        self.node2units[node] = deque()

    def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
        assert node in self.node2pending
        if self.collection_is_completed and self.collection is not None:
            if list(collection) != self.collection:
                other = next(iter(self.node2collection))
                self.log(
                    report_collection_diff(
                        self.collection, collection, other.gateway.id, node.gateway.id
                    )
                )
                return
        self.node2collection[node] = list(collection)

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        if duration > 0 and self.collection is not None:
            self.finished[self.collection[item_index]] = duration
            key = _cost_key(self.collection[item_index])
            total, n = self.durations.get(key, (0.0, 0))
            self.durations[key] = (total + duration, n + 1)
            self.duration_sum += duration
            self.duration_n += 1
        self.node2pending[node].remove(item_index)
        units = self.node2units[node]
        for unit in units:  # the first unit, unless a worker skipped ahead
            if item_index in unit:
                unit.remove(item_index)
                if not unit:
                    units.remove(unit)
                break
        self._refill(node)

    def mark_test_pending(self, item: str) -> None:
        raise NotImplementedError()

    def remove_pending_tests_from_node(self, node: Any, indices: Sequence[int]) -> None:
        """The answer to a steal request: ``indices`` left ``node``'s queue (or none did)."""
        asked, self.stealing = self.stealing, None
        got = set(indices)
        if asked is not None and asked[0] is node and got and node in self.node2pending:
            units = asked[1]
            assert self.collection is not None
            stolen = [u for u in units if got.issuperset(u)]
            ids = {id(u) for u in stolen}
            self.node2units[node] = deque(u for u in self.node2units[node] if id(u) not in ids)
            self.node2pending[node] = [i for i in self.node2pending[node] if i not in got]
            chains = self.plugin.worker_chains.get(str(node.gateway.id), [])
            for u in stolen:
                chain = [self.collection[i] for i in u]
                if chain in chains:
                    chains.remove(chain)
            self.queue.extendleft(reversed(stolen))
            self.queued_tests += sum(len(u) for u in stolen)
            self.log(f"stole {len(got)} test(s) from {node}")
        for other in self.nodes:
            self._refill(other)

    def remove_node(self, node: Any) -> str | None:
        pending = self.node2pending.pop(node)
        self.node2units.pop(node, None)
        if self.stealing is not None and self.stealing[0] is node:
            self.stealing = None  # its tests come back below
        if not pending:
            for other in self.nodes:
                self._refill(other)  # someone may have waited for a steal from it
            return None
        assert self.collection is not None
        # The test it crashed in: the first one it had not finished, or, when it batched
        # its events, the one it last started (those before it finished, but their
        # reports died with it: they run again).
        running = self.batches.running(node) if self.batches is not None else None
        at = pending.index(running) if running in pending else 0
        crashitem = self.collection[pending[at]]
        # The rest of the crashed worker's units go back as one unit, still in order (a
        # chain whose setter already ran there loses that state: reported by its test).
        rest = pending[:at] + pending[at + 1 :]
        if rest:
            self.handed_back.add(id(rest))
            self.queue.appendleft(rest)
            self.queued_tests += len(rest)
        for other in self.nodes:
            self._refill(other)
        return crashitem

    def schedule(self) -> None:
        assert self.collection_is_completed
        if self.collection is not None:
            for node in self.nodes:
                self._refill(node)
            return
        if not self._same_collections():
            self.log("**Different tests collected, aborting run**")
            return
        self.collection = list(next(iter(self.node2collection.values())))
        if not self.collection:
            return
        # Items sharing a node id (see _schedplugin) go together, in collection order.
        index: dict[str, list[int]] = {}
        for i, nodeid in enumerate(self.collection):
            index.setdefault(nodeid, []).append(i)
        units = self.plugin.controller_units(list(index), self.scope)
        if self.lpt:
            # Longest units first: the single tests at the end fill the gaps.
            units.sort(key=lambda u: -len(u))
        self.queue = deque([i for t in unit for i in index[t]] for unit in units)
        self.queued_tests = len(self.collection)

        extra = len(self.nodes) - len(self.queue)
        for _ in range(max(0, extra)):
            node, _pending = self.node2pending.popitem()
            self.log(f"Shutting down unused node {node}")
            node.shutdown()
        long_units = self._take_long_units() if self.lpt else []

        # Initial distribution: a quarter of the tests, the rest on demand.  Consecutive
        # units per worker, in one message: a worker then crosses fewer module boundaries
        # (module fixtures, isolator's full checks), and each message costs a round of
        # pickling and a pipe write on both sides.  Known long units go first, each to the
        # worker with the least expected work so far.
        target = max(1, len(self.collection) // (4 * max(1, len(self.nodes))))
        batches: dict[Any, list[list[int]]] = {node: [] for node in self.nodes}
        load = dict.fromkeys(self.nodes, 0.0)
        for cost, unit in long_units:
            node = min(self.nodes, key=lambda n: load[n])
            batches[node].append(unit)
            load[node] += cost
        for node in self.nodes:
            batch = batches[node]
            size = sum(len(u) for u in batch)
            while self.queue and size < target:
                batch.append(self.queue.popleft())
                size += len(batch[-1])
            if batch:
                self._send(node, batch)
        if not self.queue:
            for node in self.nodes:
                node.shutdown()

    # -- helpers -------------------------------------------------------------------------

    def _refill(self, node: Any) -> None:
        if node.shutting_down:
            return
        if not self.queue:
            self._balance()
            return
        nnodes = max(1, len(self.node2pending))
        low = max(2, self.queued_tests // nnodes // 4)
        high = max(2, self.queued_tests // nnodes // 2)
        pending = len(self.node2pending[node])
        if pending >= low:
            return
        batch: list[list[int]] = []
        while self.queue and pending < high:
            unit = self.queue.popleft()
            batch.append(unit)
            pending += len(unit)
        self._send(node, batch)

    def _send(self, node: Any, units: list[list[int]]) -> None:
        assert self.collection is not None
        indices: list[int] = []
        for unit in units:
            indices.extend(unit)
            self.queued_tests -= len(unit)
            if len(unit) > 1 and id(unit) not in self.handed_back:
                chain: list[NodeId] = [self.collection[i] for i in unit]
                self.plugin.worker_chains.setdefault(str(node.gateway.id), []).append(chain)
        self.node2pending[node].extend(indices)
        self.node2units[node].extend(list(u) for u in units)
        if self.batches is not None and node not in self.batching:
            self.batching.add(node)
            self.batches.enable(node)
        node.send_runtest_some(indices)

    def _balance(self) -> None:
        """The queue is empty: workers that ran dry steal from the busiest, else stop."""
        if self.queue or self.stealing is not None:
            return
        idle = [n for n, p in self.node2pending.items() if not n.shutting_down and len(p) < 2]
        if not idle:
            return
        busy = sorted(
            (n for n in self.node2pending if n not in idle),
            key=lambda n: -len(self.node2pending[n]),
        )
        for victim in busy:
            units = self._stealable(victim)
            if units and hasattr(victim, "send_steal"):
                self.stealing = (victim, units)
                victim.send_steal([i for u in units for i in u])
                return
        # Nothing to take over: the idle workers run their last test and finish.
        for node in idle:
            node.shutdown()

    def _take_long_units(self) -> list[tuple[float, list[int]]]:
        """Remove the units recorded durations call long from the queue; longest first."""
        if not self.recorded or not self.queue:
            return []
        costs = [sum(self._cost(i) for i in unit) for unit in self.queue]
        limit = _LONG_SHARE * sum(costs) / max(1, len(self.nodes))
        long_units = [(c, u) for c, u in zip(costs, self.queue, strict=True) if c >= limit]
        if not long_units:
            return []
        ids = {id(u) for _c, u in long_units}
        self.queue = deque(u for u in self.queue if id(u) not in ids)
        long_units.sort(key=lambda cu: -cu[0])
        return long_units

    def _cost(self, index: int) -> float:
        """A test's expected duration: the mean of the finished runs of its function (its
        parametrized variants cost alike), else its recorded duration, else the mean of
        every finished (or recorded) test; 1 before any."""
        assert self.collection is not None
        nodeid = self.collection[index]
        if self.duration_n:
            total, n = self.durations.get(_cost_key(nodeid), (0.0, 0))
            if n:
                return total / n
        if nodeid in self.recorded:
            return self.recorded[nodeid]
        if self.duration_n:
            return self.duration_sum / self.duration_n
        if self.recorded:
            return self._recorded_mean()
        return 1.0

    def _recorded_mean(self) -> float:
        if self._mean is None:
            self._mean = sum(self.recorded.values()) / len(self.recorded)
        return self._mean

    def _stealable(self, node: Any) -> list[list[int]]:
        """Whole units of ``node``'s queue worth about half the work it has left.

        Largest expected units first, wherever they sit in its queue (a cluster of slow
        parametrized tests is typically early in a batch, where stealing from the end of
        the queue would only reach it last), ties from the end.  The worker holds the test
        it runs and the next one outside its queue: units that touch those two stay.
        """
        pending = self.node2pending[node]
        started = set(pending[:2])
        units = list(self.node2units[node])
        cost = {id(u): sum(self._cost(i) for i in u) for u in units}
        half = sum(self._cost(i) for i in pending) / 2
        taken: set[int] = set()
        got = 0.0
        for unit in sorted(reversed(units), key=lambda u: -cost[id(u)]):
            c = cost[id(unit)]
            # The first unit goes even if it is worth more than half: the two workers
            # then end sooner than this one would alone.
            if started.intersection(unit) or (got and got + c > half):
                continue
            taken.add(id(unit))
            got += c
        return [u for u in units if id(u) in taken]

    def _same_collections(self) -> bool:
        items = list(self.node2collection.items())
        first_node, first = items[0]
        same = True
        for node, collection in items[1:]:
            msg = report_collection_diff(first, collection, first_node.gateway.id, node.gateway.id)
            if not msg:
                continue
            same = False
            self.log(msg)
            rep = pytest.CollectReport(
                nodeid=node.gateway.id, outcome="failed", longrepr=msg, result=[]
            )
            self.config.hook.pytest_collectreport(report=rep)
        return same
