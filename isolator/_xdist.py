"""pytest-xdist integration: a scheduler that keeps dependent tests on one worker, in order.

Registered only on a distributing xdist controller; the scheduler only takes over when a
dependency graph exists (else xdist's own scheduler runs).  It builds work units from the
graph and the collection the workers report (already in the repaired order, since the
workers run ``_schedplugin``'s collection hooks): each connected component of constraint
edges is one unit, sent to one worker in a single batch so that its tests run back to back;
all other tests are single-test units, balanced across workers like ``--dist load``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pytest
from xdist.report import report_collection_diff  # type: ignore[import-untyped]
from xdist.workermanage import parse_tx_spec_config  # type: ignore[import-untyped]

from isolator import scheduler
from isolator._schedplugin import PRIORITY_MODES, WORKERINPUT_KEY, WORKEROUTPUT_KEY
from isolator._types import NodeId

if TYPE_CHECKING:
    from isolator._schedplugin import SchedPlugin


def _scope_fn(dist: str) -> scheduler.ScopeFn | None:
    """The grouping xdist's own ``--dist`` mode would impose, merged into the units."""
    if dist == "loadscope":
        return lambda nodeid: nodeid.rsplit("::", 1)[0]
    if dist == "loadfile":
        return lambda nodeid: nodeid.split("::", 1)[0]
    return None


# --dist modes this scheduler replaces; "each" runs everything everywhere and "loadgroup"
# rewrites node ids on the workers, so those keep xdist's scheduler.
_REPLACED = frozenset({"load", "loadscope", "loadfile", "worksteal"})


class XdistHooks:
    """Controller-side xdist hooks (workers only need the collection hooks)."""

    def __init__(self, plugin: SchedPlugin) -> None:
        self.plugin = plugin
        self._have_worker_output = False

    @pytest.hookimpl
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKERINPUT_KEY] = self.plugin.workerinput_data()

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
        return DependencyScheduling(config, log, self.plugin, _scope_fn(dist), lpt=lpt)

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
        crashitem = self.collection[pending[0]]
        # The rest of the crashed worker's units go back as one unit, still in order (a
        # chain whose setter already ran there loses that state: reported by its test).
        if pending[1:]:
            rest = pending[1:]
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
        units = self.plugin.controller_units(self.collection, self.scope)
        if self.lpt:
            # Longest units first: the single tests at the end fill the gaps.
            units.sort(key=lambda u: -len(u))
        index = {nodeid: i for i, nodeid in enumerate(self.collection)}
        self.queue = deque([index[t] for t in unit] for unit in units)
        self.queued_tests = len(self.collection)

        extra = len(self.nodes) - len(self.queue)
        for _ in range(max(0, extra)):
            node, _pending = self.node2pending.popitem()
            self.log(f"Shutting down unused node {node}")
            node.shutdown()

        # Initial distribution: a quarter of the tests, the rest on demand.  Consecutive
        # units per worker, in one message: a worker then crosses fewer module boundaries
        # (module fixtures, isolator's full checks), and each message costs a round of
        # pickling and a pipe write on both sides.
        target = max(1, len(self.collection) // (4 * max(1, len(self.nodes))))
        for node in self.nodes:
            batch: list[list[int]] = []
            size = 0
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

    def _stealable(self, node: Any) -> list[list[int]]:
        """Whole units from the end of ``node``'s queue, about half its pending tests.

        The worker holds the test it runs and the next one outside its queue: units that
        touch those two stay.
        """
        pending = self.node2pending[node]
        started = set(pending[:2])
        want = (len(pending) - 2 + 1) // 2
        out: list[list[int]] = []
        size = 0
        for unit in reversed(self.node2units[node]):
            if size >= want or started.intersection(unit):
                break
            out.append(unit)
            size += len(unit)
        out.reverse()
        return out

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
