"""The detector: candidate dependencies from one recorded run, confirmation plans, verdicts.

Pure functions over plain data; the recording and the reruns happen elsewhere
(``_depsplugin.py``), and ``_deps_cli.py`` drives the phases::

    records (one per test: reads, net writes, touched sites, isolated outcome)
        -> find_candidates()            A's net writes meet B's reads, either run order
        -> pair_plan()                  sequences [B], [A, B]
        -> Evidence (outcomes of the last test of every sequence run)
        -> repeat_plan() / cleaner_plan()   repetitions; [S, A, B] for a brittle A
                                        after its state-setter S (setter_chains())
        -> build_graph()                confirmed facts, open candidates, notes

Vocabulary: a *victim* passes alone and fails after its *polluter*; a *brittle* test fails
alone and passes after its *state-setter*; a *cleaner* run between a polluter and its
victim makes the victim pass.  A verdict needs two agreeing repetitions; results that
differ between repetitions are dropped as non-deterministic.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from isolator._types import Cleaners, Dependency, DependencyGraph, NodeId, StateSite
from isolator.analysis import sites_overlap as _module_overlap

Overlap = Callable[[StateSite, StateSite], bool]
Verdict = Literal["polluter", "state-setter", "none", "flaky", "pending", "untested"]
CleanerVerdict = Literal["cleaner", "none", "flaky", "pending", "untested"]

GOOD_OUTCOMES: Final = frozenset({"passed", "skipped", "xfailed", "xpassed"})
BAD_OUTCOMES: Final = frozenset({"failed", "error"})
# Reads of a whole pseudo-container (every environment variable, every module) match many
# writers; candidates through them are tried after the precise ones.
_WHOLE_READS: Final = frozenset({"<env>", "<sys.modules>", "<file>", "<logging>"})
REPEATS: Final = 2  # agreeing repetitions needed for a verdict


def is_bad(outcome: str) -> bool:
    return outcome in BAD_OUTCOMES


def is_known(outcome: str) -> bool:
    return outcome in GOOD_OUTCOMES or outcome in BAD_OUTCOMES


def sites_overlap(a: StateSite, b: StateSite) -> bool:
    """The static pass's rule, plus directories: ``<file>:/d`` covers ``<file>:/d/x``."""
    if _module_overlap(a, b):
        return True
    if a.startswith("<file>:") and b.startswith("<file>:"):
        if len(a) > len(b):
            a, b = b, a
        return b.startswith(a) and b[len(a)] == "/"
    return False


def site_root(site: StateSite) -> str:
    """The bucket of a site: overlapping sites always share it (``m:X['k'].a`` -> ``m:X``)."""
    if site.startswith("<"):
        end = site.find(">")
        return site[: end + 1] if end > 0 else site
    colon = site.find(":")
    if colon < 0:
        return site
    i = colon + 1
    n = len(site)
    while i < n and site[i] not in ".[":
        i += 1
    return site[:i]


def parent_site(site: StateSite) -> StateSite | None:
    """The container a nested site lives in (``m:X['a'].b`` -> ``m:X['a']``), None for a
    module global (``m:X``) and for process-wide sites (``<env>:HOME``)."""
    if site.startswith("<"):
        return None
    colon = site.find(":")
    if colon < 0:
        return None
    last = -1
    quote = ""
    i = colon + 1
    n = len(site)
    while i < n:
        ch = site[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in ".[":
            last = i
        i += 1
    return site[:last] if last > colon + 1 else None


# ------------------------------------------------------------------------------ records


@dataclass(frozen=True)
class TestRecord:
    """One test of the recording run.

    ``writes``: net writes left after teardown (site -> ``file:line`` or "");
    ``touched``: sites its code may write even when the net effect is nil (a cleaner that
    resets state to its default leaves no net write), ``touched_at`` where (``file:line``,
    when known); ``outcome`` is the isolated outcome.
    """

    nodeid: NodeId
    reads: frozenset[StateSite] = frozenset()
    writes: Mapping[StateSite, str] = field(default_factory=dict)
    touched: frozenset[StateSite] = frozenset()
    outcome: str = ""
    duration: float = 0.0
    index: int = 0
    scoped_writes: Mapping[StateSite, str] = field(default_factory=dict)
    touched_at: Mapping[StateSite, str] = field(default_factory=dict)

    def all_writes(self) -> dict[StateSite, str]:
        """Net writes, then what its higher-scoped fixtures wrote while setting up."""
        out = dict(self.scoped_writes)
        out.update(self.writes)
        return out

    def candidate_writes(self) -> dict[StateSite, str]:
        """What it may leave behind for later tests: its net writes and, for a test that
        failed, what its code writes as well.  A brittle test fails before (or instead of)
        its writes; run after its own state-setter it may set state up for another test
        (sched_suite: test_register_plugin -> test_enable_plugin -> test_plugin_enabled)."""
        out = self.all_writes()
        if is_bad(self.outcome):
            for site in sorted(self.touched):
                out.setdefault(site, self.touched_at.get(site, ""))
        return out

    def container_reads(self) -> frozenset[StateSite]:
        """The containers its stores go through: ``X['a']['b'] = v`` reads ``X['a']``,
        and fails (KeyError) when no earlier test created it."""
        out = set()
        for site in (*self.writes, *self.touched):
            parent = parent_site(site)
            if parent is not None:
                out.add(parent)
        return frozenset(out)

    def to_json(self) -> dict[str, Any]:
        return {
            "nodeid": self.nodeid,
            "index": self.index,
            "outcome": self.outcome,
            "duration": round(self.duration, 6),
            "reads": sorted(self.reads),
            "writes": dict(sorted(self.writes.items())),
            "scoped_writes": dict(sorted(self.scoped_writes.items())),
            "touched": sorted(self.touched),
            "touched_at": dict(sorted(self.touched_at.items())),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TestRecord:
        return cls(
            nodeid=str(data["nodeid"]),
            reads=frozenset(str(s) for s in data.get("reads", ())),
            writes={str(k): str(v) for k, v in dict(data.get("writes", {})).items()},
            touched=frozenset(str(s) for s in data.get("touched", ())),
            outcome=str(data.get("outcome", "")),
            duration=float(data.get("duration", 0.0)),
            index=int(data.get("index", 0)),
            scoped_writes={str(k): str(v) for k, v in dict(data.get("scoped_writes", {})).items()},
            touched_at={str(k): str(v) for k, v in dict(data.get("touched_at", {})).items()},
        )


@dataclass(frozen=True)
class Candidate:
    """``source``'s net writes meet ``target``'s reads: ``target`` may depend on it.

    ``state`` lists the sites ``source`` wrote (most specific match first), aligned with
    ``written_at``; ``precise`` is False when only a whole-container read matched.
    """

    source: NodeId
    target: NodeId
    state: tuple[StateSite, ...]
    written_at: tuple[str, ...]
    precise: bool = True


class CandidateIndex:
    """Candidate dependencies, kept per (target, written site) rather than per pair.

    A site written by many tests and read by many (a cache every test fills) would make
    millions of pairs; the index stores, for each target, the writers of each site it
    reads, and hands out pairs lazily in priority order (:meth:`ordered`).

    ``by_target``: target -> {written site: writers in run order}
    """

    def __init__(self, records: Sequence[TestRecord], overlap: Overlap = sites_overlap) -> None:
        self.order = {r.nodeid: r.index for r in records}
        self.where: dict[tuple[NodeId, StateSite], str] = {}  # (writer, site) -> file:line
        writers: dict[StateSite, list[NodeId]] = defaultdict(list)
        for rec in sorted(records, key=lambda r: r.index):
            for site, loc in rec.candidate_writes().items():
                writers[site].append(rec.nodeid)
                self.where[(rec.nodeid, site)] = loc
        # (reader, site, through): ``through`` marks a container a store goes through,
        # which only a write of that container or of one holding it can change.
        readers: dict[StateSite, list[tuple[NodeId, bool]]] = defaultdict(list)
        for rec in records:
            for site in rec.reads:
                readers[site].append((rec.nodeid, False))
            for site in rec.container_reads() - rec.reads:
                readers[site].append((rec.nodeid, True))
        related = _Related(readers, exact=overlap is sites_overlap)
        self.by_target: dict[NodeId, dict[StateSite, tuple[NodeId, ...]]] = defaultdict(dict)
        self.precise: set[tuple[NodeId, StateSite]] = set()
        self._sets: dict[StateSite, frozenset[NodeId]] = {}
        self._writers: dict[StateSite, tuple[NodeId, ...]] = {}
        self._entries: dict[Any, list[tuple[int, NodeId]]] = {}  # see _nearest
        self._files: dict[NodeId, str] = {}
        for wsite, ws in writers.items():
            wtuple = tuple(ws)
            self._sets[wsite] = frozenset(ws)
            self._writers[wsite] = wtuple
            for rsite in related.sites(wsite):
                if not overlap(wsite, rsite):
                    continue
                for reader, through in readers[rsite]:
                    if (through and len(wsite) > len(rsite)) or ws == [reader]:
                        continue
                    self.by_target[reader][wsite] = wtuple
                    if rsite not in _WHOLE_READS:
                        self.precise.add((reader, wsite))

    def targets(self) -> list[NodeId]:
        return sorted(self.by_target, key=lambda n: self.order.get(n, 0))

    def count(self) -> int:
        """The number of distinct candidate pairs."""
        total = 0
        for target, sites in self.by_target.items():
            sources: set[NodeId] = set()
            for ws in sites.values():
                sources.update(ws)
            sources.discard(target)
            total += len(sources)
        return total

    def candidate(self, source: NodeId, target: NodeId) -> Candidate | None:
        sites = self.by_target.get(target, {})
        found = [s for s in sites if source in self._sets[s]]
        if not found or source == target:
            return None
        found.sort(key=lambda s: ((target, s) not in self.precise, s))
        return Candidate(
            source=source,
            target=target,
            state=tuple(found),
            written_at=tuple(self.where.get((source, s), "") for s in found),
            precise=any((target, s) in self.precise for s in found),
        )

    def ordered(self) -> Iterator[Candidate]:
        """Every candidate once: first pairs from the same test file, then the others;
        within each tier breadth first over shared sites, rare sites more often.

        Each (target, site it reads) walks the writers of that site outwards from the
        target in run order (the nearest first: order dependencies live mostly between
        neighbours, tests of one file share fixtures and helpers and run next to each
        other).  The k-th writer of a site that n tests of the tier write comes in turn
        k * (1 + log2 n): a site with a hundred writers (a cache every test fills, a
        class-scoped fixture's writes) does not crowd out the others within a budget,
        and the few writers of a rare one (the test that set one class attribute) all
        come before the second writer of a common one.  Ties: precise matches before
        whole-container ones, then by target in run order.
        """
        seen: set[tuple[NodeId, NodeId]] = set()
        for same_file in (True, False):
            heap: list[tuple[float, bool, int, str, NodeId, float]] = []
            walks: dict[tuple[NodeId, StateSite], Iterator[NodeId]] = {}
            for target in self.targets():
                at = self.order.get(target, 0)
                for site in self.by_target[target]:
                    n = self._tier_count(target, site, same_file)
                    if n == 0:
                        continue
                    step = 1.0 + math.log2(n)
                    imprecise = (target, site) not in self.precise
                    heap.append((step, imprecise, at, site, target, step))
            heapq.heapify(heap)
            # One lazy walk per (target, site): a budget only ever looks at the first
            # few writers of each.
            while heap:
                turn, imprecise, at, site, target, step = heapq.heappop(heap)
                writers = walks.get((target, site))
                if writers is None:
                    writers = walks[(target, site)] = self._nearest(target, site, same_file)
                w = next(writers, None)
                if w is None:
                    del walks[(target, site)]
                    continue
                heapq.heappush(heap, (turn + step, imprecise, at, site, target, step))
                if (w, target) not in seen:
                    seen.add((w, target))
                    cand = self.candidate(w, target)
                    if cand is not None:
                        yield cand

    def _tier_count(self, target: NodeId, site: StateSite, same_file: bool) -> int:
        """How many writers of ``site`` other than ``target`` the tier walks."""
        home = self._file(target)
        key = (site, home)
        entries = self._entries.get(key)
        if entries is None:
            entries = [e for e in self._site_entries(site) if self._file(e[1]) == home]
            self._entries[key] = entries
        mine = len(entries)
        if same_file:
            return mine - (target in self._sets[site])
        return len(self._writers[site]) - mine

    def _nearest(self, target: NodeId, site: StateSite, same_file: bool) -> Iterator[NodeId]:
        """The writers of ``site`` other than ``target``, of its file or of the others,
        nearest to it in run order first (the earlier one on a tie)."""
        home = self._file(target)
        if same_file:
            key = (site, home)
            entries = self._entries.get(key)
            if entries is None:
                entries = [e for e in self._site_entries(site) if self._file(e[1]) == home]
                self._entries[key] = entries
        else:
            entries = self._site_entries(site)
        at = self.order.get(target, 0)
        hi = bisect.bisect_left(entries, (at, ""))
        lo = hi - 1
        n = len(entries)
        while lo >= 0 or hi < n:
            if hi >= n or (lo >= 0 and at - entries[lo][0] <= entries[hi][0] - at):
                w = entries[lo][1]
                lo -= 1
            else:
                w = entries[hi][1]
                hi += 1
            if w != target and (same_file or self._file(w) != home):
                yield w

    def _site_entries(self, site: StateSite) -> list[tuple[int, NodeId]]:
        """(run index, writer) of ``site``, in run order."""
        entries = self._entries.get(site)
        if entries is None:
            entries = sorted((self.order.get(w, 0), w) for w in self._writers[site])
            self._entries[site] = entries
        return entries

    def _file(self, nodeid: NodeId) -> str:
        f = self._files.get(nodeid)
        if f is None:
            f = self._files[nodeid] = _file_of(nodeid)
        return f

    def writers_of(self, target: NodeId, sites: Iterable[StateSite]) -> list[NodeId]:
        """Every writer of any of ``sites`` that ``target`` reads, in run order."""
        out: list[NodeId] = []
        mine = self.by_target.get(target, {})
        for site in sites:
            for w in mine.get(site, ()):
                if w != target and w not in out:
                    out.append(w)
        return out


class _Related:
    """The read sites that may overlap a written one.

    With ``exact`` (the overlap rule is :func:`sites_overlap`, which only relates a site
    to its prefixes and extensions): the read sites that are a prefix of it ending where
    a component does, and those it is a prefix of (a range of the sorted sites); else
    every read site of its :func:`site_root`.  Either way a superset, for the overlap
    rule to decide.
    """

    _CUTS: Final = frozenset(".[:/")

    def __init__(self, sites: Iterable[StateSite], exact: bool) -> None:
        self.exact = exact
        self.known = frozenset(sites)
        self.sorted = sorted(self.known)
        self.by_root: dict[str, list[StateSite]] = defaultdict(list)
        if not exact:
            for site in self.sorted:
                self.by_root[site_root(site)].append(site)

    def sites(self, written: StateSite) -> list[StateSite]:
        if not self.exact:
            return self.by_root.get(site_root(written), [])
        known = self.known
        cuts = self._CUTS
        out = [written[:i] for i, ch in enumerate(written) if ch in cuts and written[:i] in known]
        i = bisect.bisect_left(self.sorted, written)
        n = len(self.sorted)
        while i < n and self.sorted[i].startswith(written):
            out.append(self.sorted[i])
            i += 1
        return out


def _file_of(nodeid: NodeId) -> str:
    return nodeid.partition("::")[0]


def find_candidates(
    records: Sequence[TestRecord], overlap: Overlap = sites_overlap
) -> list[Candidate]:
    """Every ordered pair (A, B), A != B, where a net write of A overlaps a read of B.

    Run order does not matter: A may pollute B even if B ran first.  The order is the
    one :meth:`CandidateIndex.ordered` hands them out in.
    """
    return list(CandidateIndex(records, overlap).ordered())


def cleaner_candidates(
    records: Sequence[TestRecord],
    polluter: NodeId,
    victim: NodeId,
    state: Iterable[StateSite],
    overlap: Overlap = sites_overlap,
) -> list[NodeId]:
    """Tests other than the pair that may write the polluted state (net or gross),
    those of the victim's file first, then by distance to the victim in run order."""
    state = tuple(state)
    found: list[TestRecord] = []
    at = 0
    for rec in records:
        if rec.nodeid == victim:
            at = rec.index
        if rec.nodeid in (polluter, victim):
            continue
        mine = list(rec.all_writes()) + list(rec.touched)
        if any(overlap(w, s) for w in mine for s in state):
            found.append(rec)
    home = _file_of(victim)
    found.sort(key=lambda r: (_file_of(r.nodeid) != home, abs(r.index - at)))
    return [r.nodeid for r in found]


# ----------------------------------------------------------------------------- planning

Seq = tuple[NodeId, ...]


def estimate_cost(seq: Seq, durations: Mapping[NodeId, float], per_test: float = 0.005) -> float:
    """Seconds one sequence is expected to take (recorded durations plus overhead)."""
    return sum(durations.get(t, 0.0) + per_test for t in seq)


def followers(
    ev: Evidence,
    index: CandidateIndex,
    tried: Sequence[Candidate],
    done: set[tuple[NodeId, NodeId]],
    limit: int = 20,
) -> list[Candidate]:
    """Untried writers of the sites of an apparent edge, for the same target: once one
    writer of a site turns out to matter, the other writers are worth a try."""
    out: list[Candidate] = []
    for c in tried:
        if judge_pair(ev, c.source, c.target) not in ("pending", "polluter", "state-setter"):
            continue
        n = 0
        for w in index.writers_of(c.target, c.state):
            if (w, c.target) in done or n >= limit:
                continue
            cand = index.candidate(w, c.target)
            if cand is not None:
                done.add((w, c.target))
                out.append(cand)
                n += 1
    return out


def pair_plan(
    candidates: Sequence[Candidate],
    durations: Mapping[NodeId, float] | None = None,
    budget: float | None = None,
) -> tuple[list[Seq], list[Candidate]]:
    """Sequences ``[B]`` and ``[A, B]`` for the candidates that fit in ``budget`` seconds.

    Returns (sequences, candidates left out).  Candidates are taken in the order given
    (``find_candidates`` puts precise ones first).
    """
    durations = durations or {}
    seqs: list[Seq] = []
    seen: set[Seq] = set()
    skipped: list[Candidate] = []
    spent = 0.0
    for cand in candidates:
        new = [s for s in ((cand.target,), (cand.source, cand.target)) if s not in seen]
        cost = sum(estimate_cost(s, durations) for s in new)
        if budget is not None and spent + cost > budget and seqs:
            skipped.append(cand)
            continue
        spent += cost
        for s in new:
            seen.add(s)
            seqs.append(s)
    return seqs, skipped


class Evidence:
    """Outcomes observed for the last test of each sequence, in run order.

    ``runs``: sequence -> [outcome, ...]; ``crashed``: sequences whose process died.
    """

    def __init__(self, recorded: Mapping[NodeId, str] | None = None) -> None:
        # The recording run is not counted as a run alone: higher-scoped fixtures set up
        # by earlier tests were still alive there, unlike in a fresh process.  Its
        # outcomes (``recorded``) only stand in for a target's first run alone, so that
        # a pair that changes nothing is refuted by one run of [A, B]; any difference
        # is settled by real runs alone (:func:`judge_pair`).
        self.runs: dict[Seq, list[str]] = defaultdict(list)
        self.crashed: set[Seq] = set()
        self.recorded = {k: v for k, v in (recorded or {}).items() if is_known(v)}

    def add(self, seq: Sequence[NodeId], outcome: str) -> None:
        if is_known(outcome):
            self.runs[tuple(seq)].append(outcome)

    def add_crash(self, seq: Sequence[NodeId]) -> None:
        self.crashed.add(tuple(seq))

    def get(self, seq: Sequence[NodeId]) -> list[str]:
        return self.runs.get(tuple(seq), [])

    def alone(self, target: NodeId, context: Seq = ()) -> tuple[list[str], bool]:
        """Outcomes of ``target`` after ``context`` alone, and whether they are real runs
        (rather than the recording run's outcome standing in)."""
        runs = self.runs.get((*context, target), [])
        if runs or context or target not in self.recorded:
            return runs, True
        return [self.recorded[target]], False

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": [[list(k), v] for k, v in self.runs.items()],
            "crashed": [list(k) for k in self.crashed],
        }


def outcomes_text(outcomes: Sequence[str]) -> str:
    """``passed x3, failed x1`` in order of first appearance."""
    if not outcomes:
        return "-"
    seen: dict[str, int] = {}
    for o in outcomes:
        seen[o] = seen.get(o, 0) + 1
    return ", ".join(f"{o} x{n}" for o, n in seen.items())


def _badness(outcomes: Sequence[str]) -> set[bool]:
    return {is_bad(o) for o in outcomes}


def judge_pair(ev: Evidence, source: NodeId, target: NodeId, context: Seq = ()) -> Verdict:
    """What the runs say about ``target`` after ``source`` compared with alone (both after
    ``context``, the tests that set ``source`` up: see :func:`setter_chains`)."""
    alone, real = ev.alone(target, context)
    after = ev.get((*context, source, target))
    if not after or not alone:
        return "untested"
    alone_bad, after_bad = _badness(alone), _badness(after)
    if len(alone_bad) > 1 or len(after_bad) > 1:
        return "flaky"
    if alone_bad == after_bad:
        return "none"
    if not real or len(alone) < REPEATS or len(after) < REPEATS:
        return "pending"
    return "polluter" if after_bad == {True} else "state-setter"


Chains = Mapping[NodeId, Seq]


def context_of(chains: Chains, source: NodeId, target: NodeId) -> Seq:
    """The tests to run before ``source`` when judging whether ``target`` depends on it:
    the state-setters ``source`` itself needs (none when that would run ``target`` first)."""
    ctx = chains.get(source, ())
    return () if target in ctx else ctx


def judge(ev: Evidence, cand: Candidate, chains: Chains) -> tuple[Verdict, Seq]:
    """The verdict on a candidate and the context it was reached in.

    A source that fails alone is judged again after its own state-setters once the pair
    alone says nothing: a brittle test that sets state up for a third test only does so
    when it runs as in the suite, after its setter.  Until that trial has run, the pair is
    undecided (``untested`` in that context).
    """
    first = judge_pair(ev, cand.source, cand.target)
    ctx = context_of(chains, cand.source, cand.target)
    if not ctx or first not in ("none", "flaky"):
        return first, ()
    return judge_pair(ev, cand.source, cand.target, ctx), ctx


def _apparent_setter(ev: Evidence, cand: Candidate, ctx: Seq) -> bool:
    """The first runs say state-setter; the repetitions are not in yet."""
    alone, _real = ev.alone(cand.target, ctx)
    after = ev.get((*ctx, cand.source, cand.target))
    return _badness(alone) == {True} and _badness(after) == {False}


def setter_chains(
    ev: Evidence, candidates: Sequence[Candidate], apparent: bool = False
) -> dict[NodeId, Seq]:
    """For every brittle test with a confirmed state-setter, the tests that make it pass
    when run before it in this order: its setter, preceded by that setter's own chain
    (``{C: (A, B)}`` for A -> B -> C).  The first confirmed setter in candidate order
    wins; with ``apparent``, setters still awaiting their repetition count too (to plan
    the next trials a round early)."""
    chains: dict[NodeId, Seq] = {}
    by_target: dict[NodeId, list[Candidate]] = defaultdict(list)
    for cand in candidates:
        by_target[cand.target].append(cand)
    changed = True
    while changed:  # one pass per link of the longest chain
        changed = False
        for target, cands in by_target.items():
            if target in chains:
                continue
            for cand in cands:
                verdict, ctx = judge(ev, cand, chains)
                if verdict == "state-setter" or (
                    apparent and verdict == "pending" and _apparent_setter(ev, cand, ctx)
                ):
                    chains[target] = (*ctx, cand.source)
                    changed = True
                    break
    return chains


def judge_cleaner(
    ev: Evidence, polluter: NodeId, cleaner: NodeId, victim: NodeId, context: Seq = ()
) -> CleanerVerdict:
    """Does running ``cleaner`` between the pair make ``victim`` pass again?"""
    runs = ev.get((*context, polluter, cleaner, victim))
    if not runs:
        return "untested"
    bad = _badness(runs)
    if len(bad) > 1:
        return "flaky"
    if bad == {True}:
        return "none"
    return "pending" if len(runs) < REPEATS else "cleaner"


def repeat_plan(ev: Evidence, candidates: Sequence[Candidate]) -> list[Seq]:
    """Second runs for pairs whose first result differed from the target alone, and the
    trials of brittle sources after their state-setters (:func:`judge`)."""
    chains = setter_chains(ev, candidates, apparent=True)
    seqs: list[Seq] = []
    seen: set[Seq] = set()
    for cand in candidates:
        verdict, ctx = judge(ev, cand, chains)
        if verdict != "pending" and not (ctx and verdict == "untested"):
            continue
        for seq in ((*ctx, cand.target), (*ctx, cand.source, cand.target)):
            have = len(ev.get(seq))  # real runs only
            # Pending: the missing repetitions; untested in a new context: one trial.
            need = REPEATS - have if verdict == "pending" else int(have < REPEATS)
            if seq not in seen:
                seqs += [seq] * max(0, need)
            seen.add(seq)
    return seqs


def cleaner_plan(
    ev: Evidence,
    records: Sequence[TestRecord],
    candidates: Sequence[Candidate],
    max_per_pair: int | None = None,
    overlap: Overlap = sites_overlap,
    include_pending: bool = True,
) -> list[Seq]:
    """``[A, C, V]`` for every (apparent) polluter->victim pair and candidate cleaner C
    (after A's state-setters if it was judged after them), and the repetitions that
    cleaner verdicts still need."""
    chains = setter_chains(ev, candidates)
    seqs: list[Seq] = []
    seen: set[Seq] = set()
    for cand in candidates:
        verdict, ctx = judge(ev, cand, chains)
        apparent = verdict == "polluter" or (
            include_pending and verdict == "pending" and not is_bad(_first(ev, cand, ctx))
        )
        if not apparent:
            continue
        cleaners = cleaner_candidates(records, cand.source, cand.target, cand.state, overlap)
        cleaners = [c for c in cleaners if c not in ctx]
        if max_per_pair is not None:
            cleaners = cleaners[:max_per_pair]
        for c in cleaners:
            seq = (*ctx, cand.source, c, cand.target)
            if seq in seen or seq in ev.crashed:
                continue
            seen.add(seq)
            v = judge_cleaner(ev, cand.source, c, cand.target, ctx)
            if v == "untested" or v == "pending":
                seqs.append(seq)
    return seqs


def _first(ev: Evidence, cand: Candidate, ctx: Seq = ()) -> str:
    alone, _real = ev.alone(cand.target, ctx)
    return alone[0] if alone else "failed"


# ------------------------------------------------------------------------------ results


@dataclass(frozen=True)
class Finding:
    """A candidate with its verdict (``status``: confirmed, candidate, refuted, flaky) and
    the tests run before the pair to reach it (``context``, see :func:`judge`)."""

    candidate: Candidate
    kind: Literal["polluter", "state-setter"]
    status: Literal["confirmed", "candidate", "refuted", "flaky"]
    context: Seq = ()


def kind_guess(
    records: Mapping[NodeId, TestRecord], target: NodeId
) -> Literal["polluter", "state-setter"]:
    """Before confirmation: a target that fails alone can only be brittle."""
    rec = records.get(target)
    return "state-setter" if rec is not None and is_bad(rec.outcome) else "polluter"


def findings(
    ev: Evidence, records: Sequence[TestRecord], candidates: Sequence[Candidate]
) -> list[Finding]:
    by_id = {r.nodeid: r for r in records}
    chains = setter_chains(ev, candidates)
    out = []
    for cand in candidates:
        verdict, ctx = judge(ev, cand, chains)
        if verdict == "polluter" or verdict == "state-setter":
            out.append(Finding(cand, verdict, "confirmed", ctx))
        elif verdict == "none":
            out.append(Finding(cand, kind_guess(by_id, cand.target), "refuted", ctx))
        elif verdict == "flaky":
            out.append(Finding(cand, kind_guess(by_id, cand.target), "flaky", ctx))
        else:
            out.append(Finding(cand, kind_guess(by_id, cand.target), "candidate", ctx))
    return out


def build_graph(
    ev: Evidence,
    records: Sequence[TestRecord],
    candidates: Sequence[Candidate],
    tried_cleaners: Iterable[Seq] = (),
    extra_notes: Iterable[str] = (),
) -> DependencyGraph:
    """Confirmed dependencies and open candidates, cleaners of confirmed polluters, notes.

    Refuted candidates are left out; non-deterministic ones become notes.
    """
    found = findings(ev, records, candidates)
    deps = []
    contexts: dict[tuple[NodeId, NodeId], Seq] = {}
    notes = list(extra_notes)
    for f in found:
        c = f.candidate
        if f.status in ("confirmed", "candidate"):
            deps.append(
                Dependency(
                    kind=f.kind,
                    source=c.source,
                    target=c.target,
                    state=c.state,
                    confirmed=f.status == "confirmed",
                    written_at=c.written_at,
                )
            )
            contexts[(c.source, c.target)] = f.context
        elif f.status == "flaky":
            ctx = f.context
            alone = outcomes_text(ev.alone(c.target, ctx)[0])
            after = outcomes_text(ev.get((*ctx, c.source, c.target)))
            setup = f" set up by {' -> '.join(ctx)}" if ctx else ""
            notes.append(
                f"non-deterministic, dropped: {c.target} after {c.source}{setup} "
                f"(alone: {alone}; after: {after})"
            )
    # [context..., polluter, cleaner, victim]
    tried: dict[tuple[NodeId, NodeId], list[tuple[Seq, NodeId]]] = defaultdict(list)
    for seq in tried_cleaners:
        if len(seq) >= 3:
            tried[(seq[-3], seq[-1])].append((tuple(seq[:-3]), seq[-2]))
    cleaners = []
    for d in deps:
        if not d.confirmed or d.kind != "polluter":
            continue
        good: list[NodeId] = []
        for ctx, cleaner in tried.get((d.source, d.target), []):
            if ctx != contexts.get((d.source, d.target), ()):
                continue
            verdict = judge_cleaner(ev, d.source, cleaner, d.target, ctx)
            if verdict == "cleaner" and cleaner not in good:
                good.append(cleaner)
            elif verdict == "flaky":
                notes.append(
                    f"non-deterministic cleaner, dropped: {cleaner} between {d.source} "
                    f"and {d.target}"
                )
        cleaners.append(Cleaners(d.source, d.target, tuple(good)))
    order = {r.nodeid: r.index for r in records}
    deps.sort(key=lambda d: (not d.confirmed, order.get(d.target, 0), order.get(d.source, 0)))
    return DependencyGraph(
        tests=tuple(r.nodeid for r in sorted(records, key=lambda r: r.index)),
        dependencies=tuple(deps),
        cleaners=tuple(cleaners),
        notes=tuple(notes),
    )


def counts(
    ev: Evidence, records: Sequence[TestRecord], candidates: Sequence[Candidate]
) -> dict[str, int]:
    """How many candidates ended in each status (for the summary line and the JSON)."""
    out = {"candidates": len(candidates), "confirmed": 0, "candidate": 0, "refuted": 0, "flaky": 0}
    for f in findings(ev, records, candidates):
        out[f.status] += 1
    return out
