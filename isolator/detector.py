"""The detector: candidate dependencies from one recorded run, confirmation plans, verdicts.

Pure functions over plain data; the recording and the reruns happen elsewhere
(``_depsplugin.py``), and ``_deps_cli.py`` drives the phases::

    records (one per test: reads, net writes, touched sites, isolated outcome)
        -> find_candidates()            A's net writes meet B's reads, either run order
        -> pair_plan()                  sequences [B], [A, B]
        -> Evidence (outcomes of the last test of every sequence run)
        -> repeat_plan() / cleaner_plan()
        -> build_graph()                confirmed facts, open candidates, notes

Vocabulary: a *victim* passes alone and fails after its *polluter*; a *brittle* test fails
alone and passes after its *state-setter*; a *cleaner* run between a polluter and its
victim makes the victim pass.  A verdict needs two agreeing repetitions; results that
differ between repetitions are dropped as non-deterministic.
"""

from __future__ import annotations

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


# ------------------------------------------------------------------------------ records


@dataclass(frozen=True)
class TestRecord:
    """One test of the recording run.

    ``writes``: net writes left after teardown (site -> ``file:line`` or "");
    ``touched``: sites its code may write even when the net effect is nil (a cleaner that
    resets state to its default leaves no net write); ``outcome`` is the isolated outcome.
    """

    nodeid: NodeId
    reads: frozenset[StateSite] = frozenset()
    writes: Mapping[StateSite, str] = field(default_factory=dict)
    touched: frozenset[StateSite] = frozenset()
    outcome: str = ""
    duration: float = 0.0
    index: int = 0
    scoped_writes: Mapping[StateSite, str] = field(default_factory=dict)

    def all_writes(self) -> dict[StateSite, str]:
        """Net writes, then what its higher-scoped fixtures wrote while setting up."""
        out = dict(self.scoped_writes)
        out.update(self.writes)
        return out

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
            for site, loc in rec.all_writes().items():
                writers[site].append(rec.nodeid)
                self.where[(rec.nodeid, site)] = loc
        readers: dict[str, list[tuple[NodeId, StateSite]]] = defaultdict(list)
        for rec in records:
            for site in rec.reads:
                readers[site_root(site)].append((rec.nodeid, site))
        self.by_target: dict[NodeId, dict[StateSite, tuple[NodeId, ...]]] = defaultdict(dict)
        self.precise: set[tuple[NodeId, StateSite]] = set()
        self._sets: dict[StateSite, frozenset[NodeId]] = {}
        for wsite, ws in writers.items():
            wtuple = tuple(ws)
            self._sets[wsite] = frozenset(ws)
            for reader, rsite in readers.get(site_root(wsite), ()):
                if not overlap(wsite, rsite):
                    continue
                if ws == [reader]:
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
        within each tier breadth first over shared sites.

        Round k hands out, for each target and each site it reads, its k-th writer of
        that site (the nearest in run order first; precise matches before
        whole-container ones), so that a site with a hundred writers does not crowd out
        the others within a budget.  Order dependencies live mostly between neighbours:
        tests of one file share fixtures and helpers, and run next to each other.
        """
        seen: set[tuple[NodeId, NodeId]] = set()
        for same_file in (True, False):
            keyed: list[tuple[bool, int, str, NodeId, list[NodeId]]] = []
            for target in self.targets():
                sites = self.by_target[target]
                home = _file_of(target)
                at = self.order.get(target, 0)
                for site, writers in sites.items():
                    ws = [w for w in writers if w != target and (_file_of(w) == home) == same_file]
                    if ws:
                        ws.sort(key=lambda w: abs(self.order.get(w, 0) - at))
                        keyed.append(((target, site) not in self.precise, at, site, target, ws))
            keyed.sort(key=lambda k: k[:3])  # precise matches first, then by target
            lists = [(target, ws) for _p, _a, _s, target, ws in keyed]
            depth = max((len(ws) for _, ws in lists), default=0)
            for rank in range(depth):
                for target, ws in lists:
                    if rank < len(ws) and (ws[rank], target) not in seen:
                        seen.add((ws[rank], target))
                        cand = self.candidate(ws[rank], target)
                        if cand is not None:
                            yield cand

    def writers_of(self, target: NodeId, sites: Iterable[StateSite]) -> list[NodeId]:
        """Every writer of any of ``sites`` that ``target`` reads, in run order."""
        out: list[NodeId] = []
        mine = self.by_target.get(target, {})
        for site in sites:
            for w in mine.get(site, ()):
                if w != target and w not in out:
                    out.append(w)
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

    def __init__(self) -> None:
        # The recording run is not counted as a run alone: higher-scoped fixtures set up
        # by earlier tests were still alive there, unlike in a fresh process.
        self.runs: dict[Seq, list[str]] = defaultdict(list)
        self.crashed: set[Seq] = set()

    def add(self, seq: Sequence[NodeId], outcome: str) -> None:
        if is_known(outcome):
            self.runs[tuple(seq)].append(outcome)

    def add_crash(self, seq: Sequence[NodeId]) -> None:
        self.crashed.add(tuple(seq))

    def get(self, seq: Sequence[NodeId]) -> list[str]:
        return self.runs.get(tuple(seq), [])

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


def judge_pair(ev: Evidence, source: NodeId, target: NodeId) -> Verdict:
    """What the runs say about ``target`` after ``source`` compared with alone."""
    alone = ev.get((target,))
    after = ev.get((source, target))
    if not after or not alone:
        return "untested"
    alone_bad, after_bad = _badness(alone), _badness(after)
    if len(alone_bad) > 1 or len(after_bad) > 1:
        return "flaky"
    if alone_bad == after_bad:
        return "none"
    if len(alone) < REPEATS or len(after) < REPEATS:
        return "pending"
    return "polluter" if after_bad == {True} else "state-setter"


def judge_cleaner(
    ev: Evidence, polluter: NodeId, cleaner: NodeId, victim: NodeId
) -> CleanerVerdict:
    """Does running ``cleaner`` between the pair make ``victim`` pass again?"""
    runs = ev.get((polluter, cleaner, victim))
    if not runs:
        return "untested"
    bad = _badness(runs)
    if len(bad) > 1:
        return "flaky"
    if bad == {True}:
        return "none"
    return "pending" if len(runs) < REPEATS else "cleaner"


def repeat_plan(ev: Evidence, candidates: Sequence[Candidate]) -> list[Seq]:
    """Second runs for pairs whose first result differed from the target alone."""
    seqs: list[Seq] = []
    seen: set[Seq] = set()
    for cand in candidates:
        if judge_pair(ev, cand.source, cand.target) != "pending":
            continue
        for seq in ((cand.target,), (cand.source, cand.target)):
            need = REPEATS - len(ev.get(seq))
            for _ in range(max(0, need)):
                if seq not in seen:
                    seqs.append(seq)
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
    """``[A, C, V]`` for every (apparent) polluter->victim pair and candidate cleaner C,
    and the repetitions that cleaner verdicts still need."""
    seqs: list[Seq] = []
    seen: set[Seq] = set()
    for cand in candidates:
        verdict = judge_pair(ev, cand.source, cand.target)
        apparent = verdict == "polluter" or (
            include_pending and verdict == "pending" and not is_bad(_first(ev, cand))
        )
        if not apparent:
            continue
        cleaners = cleaner_candidates(records, cand.source, cand.target, cand.state, overlap)
        if max_per_pair is not None:
            cleaners = cleaners[:max_per_pair]
        for c in cleaners:
            seq = (cand.source, c, cand.target)
            if seq in seen or seq in ev.crashed:
                continue
            seen.add(seq)
            v = judge_cleaner(ev, *seq)
            if v == "untested" or v == "pending":
                seqs.append(seq)
    return seqs


def _first(ev: Evidence, cand: Candidate) -> str:
    alone = ev.get((cand.target,))
    return alone[0] if alone else "failed"


# ------------------------------------------------------------------------------ results


@dataclass(frozen=True)
class Finding:
    """A candidate with its verdict (``status``: confirmed, candidate, refuted, flaky)."""

    candidate: Candidate
    kind: Literal["polluter", "state-setter"]
    status: Literal["confirmed", "candidate", "refuted", "flaky"]


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
    out = []
    for cand in candidates:
        verdict = judge_pair(ev, cand.source, cand.target)
        if verdict == "polluter" or verdict == "state-setter":
            out.append(Finding(cand, verdict, "confirmed"))
        elif verdict == "none":
            out.append(Finding(cand, kind_guess(by_id, cand.target), "refuted"))
        elif verdict == "flaky":
            out.append(Finding(cand, kind_guess(by_id, cand.target), "flaky"))
        else:
            out.append(Finding(cand, kind_guess(by_id, cand.target), "candidate"))
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
        elif f.status == "flaky":
            alone = outcomes_text(ev.get((c.target,)))
            after = outcomes_text(ev.get((c.source, c.target)))
            notes.append(
                f"non-deterministic, dropped: {c.target} after {c.source} "
                f"(alone: {alone}; after: {after})"
            )
    tried: dict[tuple[NodeId, NodeId], list[NodeId]] = defaultdict(list)
    for seq in tried_cleaners:
        if len(seq) == 3:
            tried[(seq[0], seq[2])].append(seq[1])
    cleaners = []
    for d in deps:
        if not d.confirmed or d.kind != "polluter":
            continue
        good: list[NodeId] = []
        for cleaner in tried.get((d.source, d.target), []):
            verdict = judge_cleaner(ev, d.source, cleaner, d.target)
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
