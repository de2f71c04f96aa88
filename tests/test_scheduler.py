"""The pure scheduler (constraints, orders, repair, work units) and the xdist scheduling
protocol against fake worker nodes."""

from __future__ import annotations

import random
from typing import Any

import pytest

from isolator import scheduler
from isolator._types import Cleaners, Dependency, DependencyGraph
from isolator._xdist import DependencyScheduling


def setter(s: str, b: str, confirmed: bool = True) -> Dependency:
    return Dependency("state-setter", s, b, ("m:X",), confirmed)


def polluter(p: str, v: str) -> Dependency:
    return Dependency("polluter", p, v, ("m:Y",), True)


def graph(*deps: Dependency, tests: tuple[str, ...] = (), cleaners: Any = ()) -> DependencyGraph:
    return DependencyGraph(tests=tests, dependencies=deps, cleaners=cleaners)


TESTS = [f"t{i}" for i in range(8)]


# -- constraints -----------------------------------------------------------------------------


def test_setter_edges_always_polluter_edges_only_without_reset() -> None:
    g = graph(setter("t5", "t1"), polluter("t0", "t3"))
    none = scheduler.build_constraints(g, TESTS, "none")
    assert {(e.before, e.after, e.kind) for e in none.edges} == {
        ("t5", "t1", "state-setter"),
        ("t3", "t0", "polluter"),  # the victim goes first
    }
    for mode in ("minimal", "full", "fork"):
        c = scheduler.build_constraints(g, TESTS, mode)
        assert [(e.before, e.after) for e in c.edges] == [("t5", "t1")]


def test_unconfirmed_dependencies_are_ignored() -> None:
    c = scheduler.build_constraints(graph(setter("t5", "t1", confirmed=False)), TESTS, "none")
    assert c.edges == ()


def test_cleaner_between_polluter_and_victim_allows_the_requested_order() -> None:
    g = graph(polluter("t0", "t3"), cleaners=(Cleaners("t0", "t3", ("t2",)),))
    c = scheduler.build_constraints(g, TESTS, "none")
    assert {(e.before, e.after, e.kind) for e in c.edges} == {
        ("t0", "t2", "cleaner"),
        ("t2", "t3", "cleaner"),
    }
    # Without the cleaner in between (here: after the victim) the victim must go first.
    order = ["t0", "t3", "t2", "t1"]
    c2 = scheduler.build_constraints(g, order, "none", requested=order)
    assert [(e.before, e.after) for e in c2.edges] == [("t3", "t0")]
    rep = scheduler.repair(order, c2)
    assert rep.order.index("t3") < rep.order.index("t0")


def test_stale_graph_pins_unknown_tests_to_their_declared_order() -> None:
    g = graph(setter("gone", "t4"), setter("t1", "t2"), tests=("t1", "t2", "t4", "gone"))
    tests = ["t1", "t2", "t4", "new1", "new0"]
    declared = ["new0", "t1", "t2", "t4", "new1"]
    c = scheduler.build_constraints(
        g, tests, "none", declared=declared, exists=lambda t: t != "gone"
    )
    assert c.stale == {"t4", "new0", "new1"}
    assert [(e.before, e.after) for e in c.edges if e.kind == "stale"] == [
        ("new0", "t4"),
        ("t4", "new1"),
    ]
    assert len(c.warnings) == 2
    assert "2 collected test(s) not in deps.json" in c.warnings[0]
    assert "no longer exist (e.g. gone)" in c.warnings[1]
    rep = scheduler.repair(list(reversed(tests)), c)
    pinned = [t for t in rep.order if t in c.stale]
    assert pinned == ["new0", "t4", "new1"]


def test_deselected_partner_is_not_stale() -> None:
    g = graph(polluter("t0", "t3"), tests=tuple(TESTS))
    c = scheduler.build_constraints(g, ["t3", "t4"], "none", exists=lambda t: True)
    assert c.edges == () and c.warnings == () and not c.stale


# -- selection -------------------------------------------------------------------------------


def test_needed_setters_are_transitive_and_skip_selected_ones() -> None:
    g = graph(setter("a", "b"), setter("b", "c"), setter("x", "c"), setter("z", "y"))
    assert scheduler.needed_setters(g, ["c"]) == {"b": "c", "x": "c", "a": "b"}
    assert scheduler.needed_setters(g, ["c", "b"]) == {"x": "c", "a": "b"}
    assert scheduler.needed_setters(g, ["q"]) == {}


# -- requested orders ------------------------------------------------------------------------


def test_requested_orders() -> None:
    current = ["c", "a", "b", "d"]  # e.g. shuffled by pytest-randomly
    declared = ["a", "b", "c", "d"]
    ro = scheduler.requested_order
    assert ro(current, None, declared=declared) == current
    assert ro(current, "declared", declared=declared) == declared
    assert ro(current, "reverse", declared=declared) == ["d", "c", "b", "a"]
    r1 = ro(current, "random", declared=declared, seed=1)
    assert sorted(r1) == declared
    assert r1 == ro(current, "random", declared=declared, seed=1)
    orders = {tuple(ro(current, "random", declared=declared, seed=s)) for s in range(20)}
    assert len(orders) > 5
    assert ro(current, "failed-first", declared=declared, first={"b", "d"}) == ["b", "d", "c", "a"]


def test_random_order_shuffles_modules_then_classes_then_tests() -> None:
    # As pytest-randomly: a module's tests, and a class's, stay together (their higher-
    # scoped fixtures are set up once), in a shuffled order at every level.
    ids = [
        *(f"m{m}.py::test_{i}" for m in range(3) for i in range(4)),
        *(f"m{m}.py::TestC{c}::test_{i}[p::{i}]" for m in range(3) for c in range(2)
          for i in range(3)),
    ]  # fmt: skip
    seen_modules, seen_inner = set(), set()
    for seed in range(30):
        order = scheduler.shuffled(ids, random.Random(seed))
        assert sorted(order) == sorted(ids)
        modules = [t.split("::")[0] for t in order]
        runs = [m for i, m in enumerate(modules) if i == 0 or modules[i - 1] != m]
        assert len(runs) == 3, order  # each module in one piece
        for m in range(3):
            for c in range(2):
                at = [i for i, t in enumerate(order) if t.startswith(f"m{m}.py::TestC{c}::")]
                assert at == list(range(at[0], at[0] + 3)), order  # each class in one piece
        seen_modules.add(tuple(runs))
        seen_inner.add(tuple(t for t in order if t.startswith("m0.py")))
    assert len(seen_modules) == 6 and len(seen_inner) > 20


# -- repair ----------------------------------------------------------------------------------


def test_repair_keeps_a_satisfying_order() -> None:
    c = scheduler.build_constraints(graph(setter("t1", "t2")), TESTS, "none")
    rep = scheduler.repair(TESTS, c)
    assert list(rep.order) == TESTS
    assert rep.moved == ()
    assert rep.keep_state_after == {"t1"}
    assert rep.blocks == (("t1", "t2"),)


def test_repair_pulls_the_setter_to_its_brittle_test() -> None:
    order = ["b", "x", "y", "s", "z"]
    c = scheduler.build_constraints(graph(setter("s", "b")), order, "none")
    rep = scheduler.repair(order, c)
    assert list(rep.order) == ["s", "b", "x", "y", "z"]
    assert rep.moved == ("s",)
    assert any("moved s before b" in d for d in rep.decisions)


def test_repair_makes_chains_contiguous_and_victims_first() -> None:
    order = ["s", "x", "b", "p", "y", "v", "b2"]
    g = graph(setter("s", "b"), setter("b", "b2"), polluter("p", "v"))
    c = scheduler.build_constraints(g, order, "none")
    rep = scheduler.repair(order, c)
    assert list(rep.order) == ["s", "b", "b2", "x", "v", "p", "y"]
    assert rep.keep_state_after == {"s", "b"}
    assert scheduler.violations(rep.order, c) == []
    assert scheduler.violations(order, c) != []


def test_cycles_are_reported_not_fatal() -> None:
    order = ["a", "b", "c"]
    g = graph(setter("a", "b"), setter("b", "a"), polluter("c", "a"), polluter("a", "c"))
    c = scheduler.build_constraints(g, order, "none")
    rep = scheduler.repair(order, c)
    assert sorted(rep.order) == order
    assert rep.broken
    assert any("dependency cycle" in d for d in rep.decisions)


@pytest.mark.parametrize("seed", range(30))
def test_repair_on_random_graphs(seed: int) -> None:
    rng = random.Random(seed)
    tests = [f"n{i}" for i in range(40)]
    # An acyclic graph: edges only from lower to higher ids of a hidden ranking.
    rank = tests[:]
    rng.shuffle(rank)
    deps = []
    for _ in range(12):
        i, j = sorted(rng.sample(range(len(rank)), 2))
        if rng.random() < 0.5:
            deps.append(setter(rank[i], rank[j]))
        else:
            deps.append(polluter(rank[j], rank[i]))  # victim rank[i] must go first
    g = graph(*deps)
    requested = tests[:]
    rng.shuffle(requested)
    c = scheduler.build_constraints(g, requested, "none", requested=requested)
    rep = scheduler.repair(requested, c)
    assert sorted(rep.order) == sorted(tests)
    if not rep.broken:
        assert scheduler.violations(rep.order, c) == []
        # Idempotent: a satisfying order is left alone.
        again = scheduler.repair(list(rep.order), c)
        assert again.order == rep.order and again.moved == ()
    # Tests without constraints keep their relative order.
    free = {t for t in tests if all(t not in (e.before, e.after) for e in c.edges)}
    assert [t for t in rep.order if t in free] == [t for t in requested if t in free]


def test_work_units_are_constraint_components_merged_with_scope() -> None:
    order = ["m1::a", "m2::s", "m2::b", "m1::c", "m3::d", "m3::e"]
    c = scheduler.build_constraints(graph(setter("m2::s", "m1::c")), order, "none")
    units = scheduler.work_units(order, c)
    assert units == [["m1::a"], ["m2::s", "m1::c"], ["m2::b"], ["m3::d"], ["m3::e"]]
    by_file = scheduler.work_units(order, c, scope=lambda n: n.split("::")[0])
    assert by_file == [["m1::a", "m2::s", "m2::b", "m1::c"], ["m3::d", "m3::e"]]


# -- xdist scheduling protocol ----------------------------------------------------------------


class FakeGateway:
    def __init__(self, gid: str) -> None:
        self.id = gid


class FakeNode:
    def __init__(self, gid: str) -> None:
        self.gateway = FakeGateway(gid)
        self.sent: list[list[int]] = []
        self.steals: list[list[int]] = []
        self.shutting_down = False

    def send_runtest_some(self, indices: list[int]) -> None:
        assert not self.shutting_down
        self.sent.append(list(indices))

    def send_steal(self, indices: list[int]) -> None:
        self.steals.append(list(indices))

    def shutdown(self) -> None:
        self.shutting_down = True

    def __repr__(self) -> str:
        return f"<FakeNode {self.gateway.id}>"


class FakePlugin:
    def __init__(self, g: DependencyGraph) -> None:
        self.graph = g
        self.worker_chains: dict[str, list[list[str]]] = {}

    def controller_units(self, collection: list[str], scope: Any) -> list[list[str]]:
        c = scheduler.build_constraints(self.graph, collection, "none")
        return scheduler.work_units(collection, c, scope)


def run_fake(
    collection: list[str],
    g: DependencyGraph,
    nnodes: int = 2,
    rng_seed: int = 0,
    slow: dict[str, int] | None = None,
    durations: bool = False,
    recorded: dict[str, float] | None = None,
    nodes: list[FakeNode] | None = None,
) -> tuple[dict[str, list[str]], DependencyScheduling]:
    """Drive the scheduler like xdist's DSession and workers: each step one worker runs a
    test (a test in ``slow`` takes that many steps), or answers a steal request.  With
    ``durations``, finished tests report the steps they took, as xdist reports seconds;
    ``recorded`` are the durations of earlier runs."""
    rng = random.Random(rng_seed)
    slow = slow or {}
    plugin = FakePlugin(g)
    sched = DependencyScheduling(
        None,
        None,
        plugin,
        numnodes=nnodes,
        recorded=recorded,  # type: ignore[arg-type]
    )
    nodes = [FakeNode(f"gw{i}") for i in range(nnodes)] if nodes is None else nodes
    for n in nodes:
        sched.add_node(n)
    for n in nodes:
        sched.add_node_collection(n, collection)
    assert sched.collection_is_completed
    sched.schedule()
    ran: dict[str, list[str]] = {n.gateway.id: [] for n in nodes}
    queues: dict[FakeNode, list[int]] = {n: [] for n in nodes}
    seen: dict[FakeNode, int] = {n: 0 for n in nodes}
    left: dict[FakeNode, int] = {n: 0 for n in nodes}  # steps the running test still takes
    sched.steps = 0  # type: ignore[attr-defined]
    for _ in range(100 * len(collection) + 10):
        for n in nodes:
            for batch in n.sent[seen[n] :]:
                queues[n].extend(batch)
            seen[n] = len(n.sent)
        asked = [n for n in nodes if n.steals]
        if asked and rng.random() < 0.5:
            # As xdist's worker: all requested tests leave its queue, or none does (the
            # running test and the next one are out of the queue).
            n = asked[0]
            want = n.steals.pop(0)
            queued = queues[n][2:]
            got = want if set(want) <= set(queued) else []
            queues[n] = [i for i in queues[n] if i not in got]
            sched.remove_pending_tests_from_node(n, got)
            continue
        # A worker runs a test only when it knows the next one or was told to shut down.
        ready = [n for n in nodes if len(queues[n]) >= 2 or (queues[n] and n.shutting_down)]
        if not ready:
            if asked:
                continue
            break
        sched.steps += 1  # type: ignore[attr-defined]
        for n in ready:  # every worker that can run makes progress in a step
            idx = queues[n][0]
            if left[n] == 0:
                left[n] = slow.get(collection[idx], 1)
            left[n] -= 1
        for n in ready:
            if left[n] == 0:
                idx = queues[n].pop(0)
                ran[n.gateway.id].append(collection[idx])
                took = slow.get(collection[idx], 1) if durations else 0
                sched.mark_test_complete(n, idx, took)
    assert sched.tests_finished
    assert all(n.shutting_down for n in nodes)
    assert not any(queues.values())
    return ran, sched


def test_xdist_chains_go_to_one_worker_in_order() -> None:
    collection = [f"t{i}" for i in range(30)]
    g = graph(setter("t3", "t4"), setter("t4", "t20"), polluter("t9", "t2"))
    # The collection comes repaired from the workers; repair it as they would.
    c = scheduler.build_constraints(g, collection, "none")
    order = list(scheduler.repair(collection, c).order)
    ran, sched = run_fake(order, g)
    assert sorted(t for ts in ran.values() for t in ts) == sorted(collection)
    assert all(ran.values()), "both workers got work"
    for ts in ran.values():
        if "t3" in ts:
            i = ts.index("t3")
            assert ts[i : i + 3] == ["t3", "t4", "t20"]
        if "t2" in ts:
            assert "t9" in ts and ts.index("t2") < ts.index("t9")
    chains = [ch for chs in sched.plugin.worker_chains.values() for ch in chs]
    assert sorted(chains) == [["t2", "t9"], ["t3", "t4", "t20"]]


@pytest.mark.parametrize("seed", range(5))
def test_xdist_balances_independent_tests(seed: int) -> None:
    collection = [f"t{i}" for i in range(200)]
    ran, _ = run_fake(collection, graph(setter("t0", "t1")), nnodes=2, rng_seed=seed)
    sizes = sorted(len(v) for v in ran.values())
    assert sum(sizes) == 200 and sizes[0] > 40


def test_xdist_steals_slow_tests_from_the_middle_of_a_batch() -> None:
    # parso's shape: nine slow parametrized variants, adjacent, so the first batch of one
    # worker holds all of them, followed by quick tests.  Stealing from the end of its
    # queue by count reaches them last; by the durations seen so far, at once.
    collection = [f"t{i}" for i in range(400)]
    slow_ids = [f"test_slow[{v}]" for v in range(9)]
    collection[40:40] = slow_ids
    slow = dict.fromkeys(slow_ids, 80)
    work = len(collection) - len(slow_ids) + 80 * len(slow_ids)
    for seed in range(3):
        ran, sched = run_fake(collection, graph(), slow=slow, durations=True, rng_seed=seed)
        assert sorted(t for ts in ran.values() for t in ts) == sorted(collection)
        assert all(any(t in slow for t in ts) for ts in ran.values()), ran
        # Both end close to an even split (stealing by count: 44 steps later).
        steps = sched.steps  # type: ignore[attr-defined]
        assert steps <= work / 2 + 20, (steps, work)


def test_xdist_recorded_durations_start_long_tests_first_on_every_worker() -> None:
    # mpmath's shape: a few long tests next to each other late in the collection.  Both
    # workers start with them (longest first, dealt by expected work), not one worker
    # after its first batches; the rest keep their collection order.
    collection = [f"t{i:03d}" for i in range(400)]
    long_ids = ["test_long_a", "test_long_b", "test_long_c"]
    collection[300:300] = long_ids
    slow = {"test_long_a": 150, "test_long_b": 120, "test_long_c": 100}
    recorded = {t: float(slow.get(t, 1)) for t in collection}
    work = len(collection) - len(long_ids) + sum(slow.values())
    nodes = [FakeNode("gw0"), FakeNode("gw1")]
    ran, sched = run_fake(
        collection, graph(), slow=slow, durations=True, recorded=recorded, nodes=nodes
    )
    assert sorted(t for ts in ran.values() for t in ts) == sorted(collection)
    firsts = {collection[n.sent[0][0]] for n in nodes}
    assert firsts == {"test_long_a", "test_long_b"}, firsts
    gw_c = next(n for n in nodes if collection[n.sent[0][0]] == "test_long_b")
    assert collection[gw_c.sent[0][1]] == "test_long_c"  # dealt to the lighter worker
    quick = [t for t in ran["gw0"] if t not in slow]
    assert quick == sorted(quick)  # collection order kept for the rest
    steps = sched.steps  # type: ignore[attr-defined]
    assert steps <= work / 2 + 10, (steps, work)
    # This run's durations are what the next run will read.
    assert sched.finished["test_long_a"] == 150
    assert len(sched.finished) == len(collection)


def test_xdist_recorded_durations_deal_a_whole_cluster_of_similar_long_tests() -> None:
    # parso's shape: nine parametrized variants of one slow test, of slightly different
    # recorded durations, together most of the run.  All of them are dealt out, 5/4.
    collection = [f"t{i:03d}" for i in range(400)]
    long_ids = [f"test_slow[{v}]" for v in range(9)]
    collection[40:40] = long_ids
    slow = {t: 55 + (7 * i) % 11 for i, t in enumerate(long_ids)}
    recorded = {t: float(slow.get(t, 1)) for t in collection}
    nodes = [FakeNode("gw0"), FakeNode("gw1")]
    run_fake(collection, graph(), slow=slow, durations=True, recorded=recorded, nodes=nodes)
    dealt = [[collection[i] for i in n.sent[0] if collection[i] in slow] for n in nodes]
    assert sorted(len(d) for d in dealt) == [4, 5], dealt
    for n, d in zip(nodes, dealt, strict=True):
        assert [collection[i] for i in n.sent[0][: len(d)]] == d  # they start the batch


@pytest.mark.parametrize("nnodes", [2, 3, 4])
def test_xdist_recorded_durations_with_fewer_units_than_workers(nnodes: int) -> None:
    # Every unit counts as long here; the workers without a unit still shut down, the
    # others each get one (a -k selection under -n 2 left a chain and a test or two).
    collection = ["s", "b", "x"]
    g = graph(setter("s", "b"))
    recorded = {"s": 1.0, "b": 1.0, "x": 3.0}
    nodes = [FakeNode(f"gw{i}") for i in range(nnodes)]
    ran, _ = run_fake(collection, g, nnodes=nnodes, recorded=recorded, nodes=nodes)
    assert sorted(t for ts in ran.values() for t in ts) == sorted(collection)
    assert sorted(ts for ts in ran.values() if ts) == [["s", "b"], ["x"]]


def test_xdist_without_recorded_durations_the_first_batches_are_collection_order() -> None:
    collection = [f"t{i:03d}" for i in range(100)]
    nodes = [FakeNode("gw0"), FakeNode("gw1")]
    run_fake(collection, graph(), nodes=nodes)
    assert nodes[0].sent[0] == list(range(len(nodes[0].sent[0])))


def test_durations_file_round_trip_and_bad_files(tmp_path: Any) -> None:
    from isolator._xdist import DURATIONS_FILE, load_durations, save_durations

    assert load_durations(tmp_path) == {}
    save_durations(tmp_path, {"a": 1.0, "b": 2.0}, {"b": 3.0, "c": 0.5})
    assert load_durations(tmp_path) == {"a": 1.0, "b": 3.0, "c": 0.5}
    path = tmp_path / ".isolator" / DURATIONS_FILE
    for bad in ("[1, 2]", "{", '{"schema": "other", "tests": {"a": 1}}'):
        path.write_text(bad)
        assert load_durations(tmp_path) == {}
    # Best effort: where .isolator cannot be written, nothing is recorded and nothing fails.
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro" / ".isolator").write_text("not a directory")
    save_durations(tmp_path / "ro", {}, {"a": 1.0})
    assert load_durations(tmp_path / "ro") == {}
    assert [p.name for p in (tmp_path / "ro").iterdir()] == [".isolator"]


def _two_workers(
    collection: list[str], g: DependencyGraph
) -> tuple[DependencyScheduling, FakeNode, FakeNode]:
    """The scheduler on two fake workers that both collected ``collection``, scheduled."""
    sched = DependencyScheduling(None, None, FakePlugin(g), numnodes=2)  # type: ignore[arg-type]
    a, b = FakeNode("gw0"), FakeNode("gw1")
    for n in (a, b):
        sched.add_node(n)
        sched.add_node_collection(n, collection)
    sched.schedule()
    return sched, a, b


def test_xdist_crashed_worker_hands_back_its_pending_tests() -> None:
    collection = [f"t{i}" for i in range(12)]
    sched, a, b = _two_workers(collection, graph())
    pending_a = [i for batch in a.sent for i in batch]
    crash = sched.remove_node(a)
    assert crash == collection[pending_a[0]]
    assert sched.has_pending
    resent = [i for batch in b.sent for i in batch]
    assert set(pending_a[1:]) <= set(resent)


class FakeBatches:
    """Stands in for ``EventBatches``: which workers were told to batch, and the test
    each one's breadcrumb names."""

    def __init__(self) -> None:
        self.enabled: list[str] = []
        self.crumbs: dict[str, int] = {}

    def enable(self, node: FakeNode) -> None:
        self.enabled.append(node.gateway.id)

    def running(self, node: FakeNode) -> int | None:
        return self.crumbs.get(node.gateway.id)


def test_xdist_crash_with_batched_events_blames_the_running_test() -> None:
    # A worker that batched its events dies with the reports of the tests it finished
    # since its last message: the test it was running is the crash, those run again.
    collection = [f"t{i}" for i in range(40)]
    batches = FakeBatches()
    config: Any = None
    plugin: Any = FakePlugin(graph())
    fake: Any = batches
    sched = DependencyScheduling(config, None, plugin, numnodes=2, batches=fake)
    a, b = FakeNode("gw0"), FakeNode("gw1")
    for n in (a, b):
        sched.add_node(n)
        sched.add_node_collection(n, collection)
    sched.schedule()
    assert sorted(batches.enabled) == ["gw0", "gw1"]  # once each, with their first tests
    pending_a = [i for batch in a.sent for i in batch]
    batches.crumbs["gw0"] = pending_a[3]
    assert sched.remove_node(a) == collection[pending_a[3]]
    done: set[int] = set()
    while not any(pending_a[0] in batch for batch in b.sent):
        todo = [i for batch in b.sent for i in batch if i not in done]
        assert todo
        sched.mark_test_complete(b, todo[0])
        done.add(todo[0])
    resent = [i for batch in b.sent for i in batch]
    handed_back = [i for i in resent if i in pending_a]
    assert handed_back == pending_a[:3] + pending_a[4:]
    assert sorted(batches.enabled) == ["gw0", "gw1"]


def test_xdist_initial_distribution_is_one_message_per_worker() -> None:
    # Each message costs a round of pickling and a pipe write on both sides: the first
    # quarter of the tests goes out in one batch per worker, not one message per unit.
    collection = [f"t{i}" for i in range(400)]
    sched, a, b = _two_workers(collection, graph(setter("t0", "t1")))
    assert len(a.sent) == 1 and len(b.sent) == 1
    sizes = sorted(len(n.sent[0]) for n in (a, b))
    assert sizes[0] >= 50 and sum(sizes) <= 200 + 1
    first = a.sent[0] if 0 in a.sent[0] else b.sent[0]
    assert first.index(1) == first.index(0) + 1  # the chain stays whole and in order


def test_xdist_idle_worker_steals_whole_units() -> None:
    # The first worker's first batch is all slow tests: the other worker, idle once the
    # fast ones are done, takes over whole units that were not started, chains included.
    collection = [f"t{i}" for i in range(80)]
    g = graph(setter("t6", "t7"), setter("t7", "t8"))
    slow = {f"t{i}": 20 for i in range(10)}
    ran, sched = run_fake(collection, g, slow=slow, rng_seed=1)
    assert sorted(t for ts in ran.values() for t in ts) == sorted(collection)
    (ts,) = [ts for ts in ran.values() if "t6" in ts]
    assert ts[ts.index("t6") : ts.index("t6") + 3] == ["t6", "t7", "t8"]
    # Without stealing one worker would run all ten slow tests alone (200 steps).
    ran_slow = sorted(sum(t in slow for t in ts) for ts in ran.values())
    assert ran_slow[0] >= 3, ran_slow
    assert sched.steps < 150  # type: ignore[attr-defined]
    chains = [ch for chs in sched.plugin.worker_chains.values() for ch in chs]
    assert chains == [["t6", "t7", "t8"]]


@pytest.mark.parametrize("seed", range(8))
def test_xdist_stealing_keeps_chains_whole_under_random_timing(seed: int) -> None:
    rng = random.Random(seed)
    collection = [f"t{i}" for i in range(60)]
    g = graph(setter("t5", "t6"), setter("t40", "t41"), setter("t41", "t42"), polluter("t9", "t2"))
    c = scheduler.build_constraints(g, collection, "none")
    order = list(scheduler.repair(collection, c).order)
    slow = {t: rng.randint(1, 15) for t in order}
    ran, _ = run_fake(order, g, nnodes=rng.choice([2, 3]), rng_seed=seed, slow=slow)
    assert sorted(t for ts in ran.values() for t in ts) == sorted(collection)
    for chain in (["t5", "t6"], ["t40", "t41", "t42"]):
        (ts,) = [ts for ts in ran.values() if chain[0] in ts]
        i = ts.index(chain[0])
        assert ts[i : i + len(chain)] == chain
    (ts,) = [ts for ts in ran.values() if "t2" in ts]
    assert "t9" in ts and ts.index("t2") < ts.index("t9")


def test_the_order_option_offers_every_order_mode() -> None:
    from isolator._schedplugin import ORDER_CHOICES

    assert ORDER_CHOICES == scheduler.ORDER_MODES
