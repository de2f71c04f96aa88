"""Order constraints from the dependency graph, and orders that respect them.

Pure functions only: the pytest plugin (``_schedplugin``) and the xdist scheduler (``_xdist``)
feed them node ids and a :class:`~isolator.DependencyGraph` and apply the result.

Constraint model
----------------
An :class:`Edge` ``a -> b`` means *a runs before b, in the same process*.

* ``state-setter`` S -> brittle B gives the edge ``S -> B``; in addition S and B form a
  *block*: the members of a block run back to back, and no reset happens between them
  (every member but the last goes into the core plugin's ``keep_state_after``).  Keeping
  them contiguous is what makes "no reset between" cheap: no unrelated test runs while the
  setter's state is carried over.
* ``polluter`` P, victim V: only when nothing resets state between tests (``--reset=none``).
  The edge is ``V -> P`` (the victim runs first), unless the requested order already has a
  known cleaner C between P and V; then the edges are ``P -> C -> V`` instead.
* ``stale``: tests whose dependencies are unknown (collected but not in the graph, or an end
  of a dependency whose other end is gone) keep their declared relative order: a chain of
  edges between consecutive such tests.

Every edge also means "same process": under pytest-xdist each connected component of the
edges is one work unit, sent to one worker in order.
"""

from __future__ import annotations

import heapq
import random
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Final, Literal

from isolator._types import DependencyGraph, NodeId

EdgeKind = Literal["state-setter", "polluter", "cleaner", "stale"]
OrderMode = Literal["declared", "reverse", "random", "failed-first", "changed-first"]
ORDER_MODES: Final[tuple[OrderMode, ...]] = (
    "declared",
    "reverse",
    "random",
    "failed-first",
    "changed-first",
)
# Reset modes under which a polluter cannot reach its victim (state is restored between).
RESETTING_MODES: Final = frozenset({"minimal", "full", "fork"})


@dataclass(frozen=True, order=True)
class Edge:
    """``before`` runs before ``after`` in the same process; ``why`` is for the summary."""

    before: NodeId
    after: NodeId
    kind: EdgeKind
    why: str = field(default="", compare=False)


@dataclass(frozen=True)
class Constraints:
    """The hard constraints among the tests of one run.

    ``warnings`` are one-line messages about a stale graph; ``stale`` the tests whose
    dependencies are unknown.
    """

    edges: tuple[Edge, ...] = ()
    warnings: tuple[str, ...] = ()
    stale: frozenset[NodeId] = frozenset()

    @property
    def setter_edges(self) -> tuple[Edge, ...]:
        return tuple(e for e in self.edges if e.kind == "state-setter")


@dataclass(frozen=True)
class Repair:
    """A requested order made to satisfy the constraints.

    ``moved`` are the tests outside a longest common subsequence of the requested and the
    final order (the fewest tests whose moving explains the change); ``broken`` are edges
    that could not be satisfied because the constraints form a cycle.
    """

    order: tuple[NodeId, ...]
    keep_state_after: frozenset[NodeId]
    blocks: tuple[tuple[NodeId, ...], ...]
    moved: tuple[NodeId, ...]
    broken: tuple[Edge, ...]
    decisions: tuple[str, ...]


class _UnionFind:
    """Disjoint sets over node ids, used for blocks and work units."""

    def __init__(self) -> None:
        self.parent: dict[NodeId, NodeId] = {}

    def find(self, x: NodeId) -> NodeId:
        parent = self.parent
        root = parent.setdefault(x, x)
        while root != parent[root]:
            root = parent[root]
        while x != root:  # path compression
            parent[x], x = root, parent[x]
        return root

    def union(self, a: NodeId, b: NodeId) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def build_constraints(
    graph: DependencyGraph,
    tests: Sequence[NodeId],
    reset: str,
    *,
    requested: Sequence[NodeId] | None = None,
    declared: Sequence[NodeId] | None = None,
    exists: Callable[[NodeId], bool] | None = None,
) -> Constraints:
    """Constraints among ``tests`` from the confirmed dependencies of ``graph``.

    ``reset`` is the core plugin's reset mode ("none" when plain pytest state sharing
    applies).  ``requested`` (default: ``tests``) decides whether a cleaner already sits
    between a polluter and its victim; ``declared`` (default: ``tests``) is the order that
    tests with unknown dependencies keep.  ``exists`` tells a deselected test (exists, not
    run) from one renamed or deleted since the graph was made; by default every test that
    is not in ``tests`` counts as deselected.
    """
    present = set(tests)
    requested = tests if requested is None else requested
    declared = tests if declared is None else declared
    pos = {t: i for i, t in enumerate(requested)}
    edges: list[Edge] = []
    warnings: list[str] = []
    stale: set[NodeId] = set()
    gone: set[NodeId] = set()

    cleaners: dict[tuple[NodeId, NodeId], tuple[NodeId, ...]] = {}
    for entry in graph.cleaners:
        key = (entry.polluter, entry.victim)
        cleaners[key] = cleaners.get(key, ()) + entry.cleaners

    for dep in graph.confirmed():
        src_in, dst_in = dep.source in present, dep.target in present
        if not (src_in and dst_in):
            lost = [
                end
                for end in (dep.source, dep.target)
                if exists is not None and end not in present and not exists(end)
            ]
            if lost:
                gone.update(lost)
                stale.update(end for end in (dep.source, dep.target) if end in present)
            continue
        state = ", ".join(dep.state) if dep.state else "shared state"
        if dep.kind == "state-setter":
            edges.append(
                Edge(dep.source, dep.target, "state-setter", f"sets {state} that it needs")
            )
        elif reset not in RESETTING_MODES:
            p, v = dep.source, dep.target
            between = [
                c
                for c in cleaners.get((p, v), ())
                if c in pos and p in pos and v in pos and pos[p] < pos[c] < pos[v]
            ]
            if between:
                c = between[0]
                why = f"cleaner between polluter and victim ({state})"
                edges.append(Edge(p, c, "cleaner", why))
                edges.append(Edge(c, v, "cleaner", why))
            else:
                edges.append(Edge(v, p, "polluter", f"{p} pollutes {state}; no reset between"))

    if graph.tests:
        known = set(graph.tests)
        new = [t for t in tests if t not in known]
        if new:
            stale.update(new)
            warnings.append(
                f"stale dependency graph: {len(new)} collected test(s) not in deps.json "
                f"(e.g. {new[0]}); they keep their declared order"
            )
    if gone:
        warnings.append(
            f"stale dependency graph: {len(gone)} test(s) of deps.json dependencies no "
            f"longer exist (e.g. {sorted(gone)[0]}); their partners keep their declared order"
        )
    if stale:
        chain = [t for t in declared if t in stale]
        for a, b in pairwise(chain):
            edges.append(Edge(a, b, "stale", "dependencies unknown (stale graph)"))
    return Constraints(edges=tuple(edges), warnings=tuple(warnings), stale=frozenset(stale))


def needed_setters(graph: DependencyGraph, selected: Iterable[NodeId]) -> dict[NodeId, NodeId]:
    """State-setters (transitively) needed by ``selected`` tests but not among them.

    Returns ``{setter: brittle test it is needed for}`` in a deterministic order.
    """
    setters_of: dict[NodeId, list[NodeId]] = {}
    for dep in graph.confirmed():
        if dep.kind == "state-setter":
            setters_of.setdefault(dep.target, []).append(dep.source)
    chosen = set(selected)
    result: dict[NodeId, NodeId] = {}
    todo = [t for t in selected if t in setters_of]
    while todo:
        target = todo.pop(0)
        for setter in setters_of.get(target, ()):
            if setter not in chosen:
                chosen.add(setter)
                result[setter] = target
                todo.append(setter)
    return result


def requested_order(
    current: Sequence[NodeId],
    mode: OrderMode | None,
    *,
    declared: Sequence[NodeId] | None = None,
    seed: int = 0,
    first: Iterable[NodeId] = (),
) -> list[NodeId]:
    """The order asked for, before constraints.

    ``current`` is the order pytest (and plugins such as pytest-randomly) produced;
    ``declared`` the collection order; ``first`` the failed or changed tests for the
    ``failed-first``/``changed-first`` modes (a stable partition of ``current``).
    """
    if declared is None:
        declared = current
    else:
        inset = set(current)
        rank = {t: i for i, t in enumerate(declared)}
        # Tests pulled in from outside the collection sort after the declared ones.
        declared = sorted(inset, key=lambda t: (rank.get(t, len(rank)), t))
    if mode is None:
        return list(current)
    if mode == "declared":
        return list(declared)
    if mode == "reverse":
        return list(reversed(declared))
    if mode == "random":
        return shuffled(declared, random.Random(seed))
    firsts = set(first)
    return [t for t in current if t in firsts] + [t for t in current if t not in firsts]


def shuffled(ids: Sequence[NodeId], rng: random.Random) -> list[NodeId]:
    """``ids`` shuffled level by level, as pytest-randomly does: the modules, then the
    classes and module-level tests of each module, then the tests of each class.  The
    tests of a module or class stay together, so that its higher-scoped fixtures are set
    up once, as in any run of the suite; a whole shuffle set each up again for nearly
    every test."""
    tree: dict[str, dict[str, list[NodeId]]] = {}
    for t in ids:
        path = t.partition("[")[0].split("::")  # (a parameter may hold "::")
        tree.setdefault(path[0], {}).setdefault("::".join(path[1:-1]), []).append(t)
    modules = list(tree)
    rng.shuffle(modules)
    out: list[NodeId] = []
    for m in modules:
        blocks: list[list[NodeId]] = []
        for cls, tests in tree[m].items():
            if cls:
                rng.shuffle(tests)
                blocks.append(tests)
            else:
                blocks += [[t] for t in tests]
        rng.shuffle(blocks)
        for block in blocks:
            out += block
    return out


def _toposort(
    nodes: Sequence[NodeId],
    prio: Mapping[NodeId, int],
    succ: Mapping[NodeId, Iterable[NodeId]],
) -> tuple[list[NodeId], list[tuple[NodeId, NodeId]]]:
    """Kahn's algorithm taking the available node of smallest priority first.

    A node's priority is the smallest ``prio`` among itself and everything that must come
    after it, so a test that blocks an early one moves up instead of the early one moving
    down (failed-first keeps failed tests first).  On a cycle it emits the smallest
    remaining node anyway and returns the edges it broke.
    """
    nodes = list(dict.fromkeys(nodes))  # each node once
    indeg = dict.fromkeys(nodes, 0)
    preds: dict[NodeId, list[NodeId]] = {n: [] for n in nodes}
    for a in nodes:
        for b in succ.get(a, ()):
            indeg[b] += 1
            preds[b].append(a)
    eff = _inherited_priority(nodes, prio, preds)
    heap = [(eff[n], prio[n], n) for n in nodes if indeg[n] == 0]
    heapq.heapify(heap)
    done: set[NodeId] = set()
    out: list[NodeId] = []
    broken: list[tuple[NodeId, NodeId]] = []
    remaining = sorted(nodes, key=lambda n: prio[n])
    ri = 0
    while len(out) < len(nodes):
        if heap:
            _, _, n = heapq.heappop(heap)
            if n in done:
                continue
        else:
            while remaining[ri] in done:
                ri += 1
            n = remaining[ri]
            broken.extend((p, n) for p in preds[n] if p not in done)
        done.add(n)
        out.append(n)
        for b in succ.get(n, ()):
            indeg[b] -= 1
            if indeg[b] == 0 and b not in done:
                heapq.heappush(heap, (eff[b], prio[b], b))
    return out, broken


def _inherited_priority(
    nodes: Sequence[NodeId],
    prio: Mapping[NodeId, int],
    preds: Mapping[NodeId, Sequence[NodeId]],
) -> dict[NodeId, int]:
    """``prio`` lowered to the smallest priority of any node reachable after it."""
    eff = {n: prio[n] for n in nodes}
    # Push each priority back along predecessor edges, smallest first: every node is
    # settled by the first (smallest) priority that reaches it, so this is linear.
    settled: set[NodeId] = set()
    for start in sorted(nodes, key=lambda n: prio[n]):
        if start in settled:
            continue
        value = prio[start]
        stack = [start]
        settled.add(start)
        while stack:
            n = stack.pop()
            for p in preds[n]:
                if p not in settled:
                    settled.add(p)
                    eff[p] = min(eff[p], value)
                    stack.append(p)
    return eff


def _lcs_kept(requested: Sequence[NodeId], final: Sequence[NodeId]) -> set[NodeId]:
    """Tests on one longest common subsequence of two orders of the same tests."""
    pos = {t: i for i, t in enumerate(requested)}
    seq = [pos[t] for t in final]
    tails: list[int] = []
    tail_idx: list[int] = []
    back: list[int] = [-1] * len(seq)
    for i, v in enumerate(seq):
        k = bisect_left(tails, v)
        if k == len(tails):
            tails.append(v)
            tail_idx.append(i)
        else:
            tails[k] = v
            tail_idx[k] = i
        back[i] = tail_idx[k - 1] if k else -1
    kept: set[NodeId] = set()
    i = tail_idx[-1] if tail_idx else -1
    while i >= 0:
        kept.add(final[i])
        i = back[i]
    return kept


def repair(requested: Sequence[NodeId], constraints: Constraints) -> Repair:
    """Reorder ``requested`` as little as possible so that every constraint holds.

    State-setter blocks are placed where their earliest member was requested; blocks and
    single tests then follow the requested order except where an edge forces otherwise.
    """
    requested = list(dict.fromkeys(requested))  # each test once
    present = set(requested)
    prio = {t: i for i, t in enumerate(requested)}
    edges = [e for e in constraints.edges if e.before in present and e.after in present]

    blocks_uf = _UnionFind()
    for e in edges:
        if e.kind == "state-setter":
            blocks_uf.union(e.before, e.after)
    block_of = {t: blocks_uf.find(t) for t in requested}
    members: dict[NodeId, list[NodeId]] = {}
    for t in requested:
        members.setdefault(block_of[t], []).append(t)

    inner: dict[NodeId, dict[NodeId, list[NodeId]]] = {}
    outer: dict[NodeId, list[NodeId]] = {}
    for e in edges:
        ba, bb = block_of[e.before], block_of[e.after]
        if ba == bb:
            inner.setdefault(ba, {}).setdefault(e.before, []).append(e.after)
        else:
            outer.setdefault(ba, []).append(bb)

    broken: list[tuple[NodeId, NodeId]] = []
    ordered_blocks: dict[NodeId, list[NodeId]] = {}
    for root, ms in members.items():
        if len(ms) == 1:
            ordered_blocks[root] = ms
            continue
        seq, br = _toposort(ms, prio, inner.get(root, {}))
        ordered_blocks[root] = seq
        broken.extend(br)
    block_prio = {root: prio[ms[0]] for root, ms in members.items()}
    block_seq, br = _toposort(list(members), block_prio, outer)
    # A broken block-level edge stands for the member edges between those two blocks.
    broken_blocks = set(br)
    broken.extend(
        (e.before, e.after)
        for e in edges
        if (block_of[e.before], block_of[e.after]) in broken_blocks
    )

    order: list[NodeId] = []
    keep: set[NodeId] = set()
    blocks: list[tuple[NodeId, ...]] = []
    for root in block_seq:
        seq = ordered_blocks[root]
        order.extend(seq)
        if len(seq) > 1:
            blocks.append(tuple(seq))
            keep.update(seq[:-1])

    broken_set = set(broken)
    broken_edges = tuple(e for e in edges if (e.before, e.after) in broken_set)
    kept = _lcs_kept(requested, order)
    moved = tuple(t for t in order if t not in kept)
    return Repair(
        order=tuple(order),
        keep_state_after=frozenset(keep),
        blocks=tuple(blocks),
        moved=moved,
        broken=broken_edges,
        decisions=tuple(_decisions(requested, order, edges, blocks, set(moved), broken_edges)),
    )


def _decisions(
    requested: Sequence[NodeId],
    order: Sequence[NodeId],
    edges: Sequence[Edge],
    blocks: Sequence[tuple[NodeId, ...]],
    moved: set[NodeId],
    broken: Sequence[Edge],
) -> list[str]:
    """One line per decision, for ``--explain-order``."""
    lines: list[str] = []
    for block in blocks:
        lines.append("chain (no reset between): " + " -> ".join(block))
    req = {t: i for i, t in enumerate(requested)}
    fin = {t: i for i, t in enumerate(order)}
    broken_set = set(broken)
    for e in sorted(edges, key=lambda e: (fin[e.before], fin[e.after])):
        if e in broken_set or e.kind == "stale":
            continue
        was_ok = req[e.before] < req[e.after]
        if e.kind == "state-setter":
            verb = "kept" if was_ok else "moved"
            lines.append(f"{verb} {e.before} before {e.after}: state-setter ({e.why})")
        elif e.kind == "polluter":
            verb = "kept" if was_ok else "moved"
            lines.append(f"{verb} victim {e.before} before polluter {e.after} ({e.why})")
        else:
            lines.append(f"allowed {e.before} before {e.after}: {e.why}")
    for e in broken:
        lines.append(f"cannot satisfy {e.kind} {e.before} -> {e.after}: dependency cycle")
    for t in order:
        if t in moved:
            lines.append(f"moved {t}: requested position {req[t] + 1}, runs at {fin[t] + 1}")
    return lines


def setter_blocks(order: Sequence[NodeId], constraints: Constraints) -> list[list[NodeId]]:
    """Groups of tests joined by state-setter edges (size > 1), members in ``order``."""
    uf = _UnionFind()
    present = set(order)
    for e in constraints.setter_edges:
        if e.before in present and e.after in present:
            uf.union(e.before, e.after)
    groups: dict[NodeId, list[NodeId]] = {}
    for t in order:
        groups.setdefault(uf.find(t), []).append(t)
    return [g for g in groups.values() if len(g) > 1]


def violations(
    order: Sequence[NodeId], constraints: Constraints, *, contiguous: bool = True
) -> list[str]:
    """What ``order`` (all in one process) breaks: edge order and, when ``contiguous``,
    state-setter chains interrupted by other tests (which isolator's resets require)."""
    fin = {t: i for i, t in enumerate(order)}
    bad: list[str] = []
    for e in constraints.edges:
        if e.before in fin and e.after in fin and fin[e.before] > fin[e.after]:
            bad.append(f"{e.kind}: {e.after} ran before {e.before}")
    for block in setter_blocks(order, constraints) if contiguous else ():
        idx = [fin[t] for t in block]
        if idx[-1] - idx[0] != len(idx) - 1:
            bad.append("state-setter chain not contiguous: " + ", ".join(block))
    return bad


ScopeFn = Callable[[NodeId], str]


def work_units(
    order: Sequence[NodeId],
    constraints: Constraints,
    scope: ScopeFn | None = None,
) -> list[list[NodeId]]:
    """Split ``order`` into units that each must run on one worker, in the given order.

    A unit is a connected component of the constraint edges (merged with ``scope``, an
    xdist grouping such as the module, when given); units are listed by first member.
    """
    uf = _UnionFind()
    present = set(order)
    for e in constraints.edges:
        if e.before in present and e.after in present:
            uf.union(e.before, e.after)
    if scope is not None:
        first_of_scope: dict[str, NodeId] = {}
        for t in order:
            uf.union(first_of_scope.setdefault(scope(t), t), t)
    units: dict[NodeId, list[NodeId]] = {}
    for t in order:
        units.setdefault(uf.find(t), []).append(t)
    return list(units.values())
