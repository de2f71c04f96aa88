"""The ``isolator`` section of pytest's terminal summary.

A run's summary is plain data (:func:`collect`): under pytest-xdist each worker sends its
own to the controller (``workeroutput``), which adds them up (:func:`merge`) and prints
one section for the whole run.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from isolator._state import _MAX_WATCHES_PER_MODULE

if TYPE_CHECKING:
    from isolator.plugin import IsolatorPlugin

_TOP = 8
_COSTLY = 10  # resets of a memo cache not learned before the summary names it
_KEPT = 50  # dict entries built anew that a process's summary data holds
WORKEROUTPUT_KEY = "isolator_summary"


def collect(core: IsolatorPlugin) -> dict[str, Any]:
    """What the section says about this process's run, as JSON-able data."""
    r = core.resetter
    assert r is not None
    return {
        "mode": core.mode,
        "tests": core.tests,
        "dirty_tests": core.dirty_tests,
        "overhead": core.overhead,
        "reset_counts": dict(r.reset_counts),
        "containers": _containers(r),
        "memo_kept": list(r.memo_kept),
        "memo_prior_kept": r.memo_prior_kept,
        "recovered": list(core.recovered),
        "unrestorable": {k: [list(p) for p in v] for k, v in core.unrestorable.items()},
        "fork_reasons": dict(core.fork_reasons),
        "unforkable": dict(core.unforkable),
        "garbage": dict(core.garbage),
        "unwalkable": [list(u) for t in r.tables.values() for u in t.unwalkable],
        "truncated": [s for t in r.tables.values() for s in t.truncated],
        "emptied": [list(e) for e in r.emptied],
        "came_back": [[name, why] for name, why in r.came_back.items()],
        "patchers": {k: list(v) for k, v in r.patchers.items()},
        "observed_memos": list(r.observed_memos),
        "impure_memos": list(r.impure_memos),
        "memo_unaffordable": list(r.memo_unaffordable),
        "rebuilt": _rebuilt(r),
        "unforked": list(core.unforked),
        "child_files": {k: [list(p) for p in v] for k, v in core.child_files.items()},
        "tree_too_large": r.files.tree_too_large,
    }


def _rebuilt(r: Any) -> list[list[Any]]:
    """The dict entries tests added anew most often: [entry, its dict's site, tests]."""
    from isolator._state import key_repr

    return [
        [f"{site}[{key_repr(k)}]", site, n]
        for (site, k), n in r.rebuilt.most_common(_KEPT)
        if n > 1
    ]


def _merge_rebuilt(a: list[list[Any]], b: list[list[Any]]) -> list[list[Any]]:
    counts: Counter[str] = Counter()
    sites: dict[str, str] = {}
    for name, site, n in a + b:
        counts[name] += n
        sites[name] = site
    return [[name, sites[name], n] for name, n in counts.most_common(_KEPT)]


def _union(a: list[Any], b: list[Any]) -> list[Any]:
    """``a``, then what of ``b`` is not in it (in linear time: a worker's list of learned
    memo entries runs to thousands)."""
    seen = set(map(_hashable, a))
    return a + [x for x in b if _hashable(x) not in seen]


def _hashable(x: Any) -> Any:
    return tuple(x) if isinstance(x, list) else x  # ([site, reason] pairs, from JSON)


def merge(a: dict[str, Any] | None, b: dict[str, Any]) -> dict[str, Any]:
    """The summary of two parts of one run (workers' own state is their own: the lists
    of objects not watched are the same objects in each, listed once)."""
    if a is None:
        return b
    counts = Counter(a["reset_counts"])
    counts.update(b["reset_counts"])
    return {
        "mode": a["mode"],
        "tests": a["tests"] + b["tests"],
        "dirty_tests": a["dirty_tests"] + b["dirty_tests"],
        "overhead": a["overhead"] + b["overhead"],
        "reset_counts": dict(counts),
        "containers": {**a.get("containers", {}), **b.get("containers", {})},
        "memo_kept": _union(a["memo_kept"], b["memo_kept"]),
        "memo_prior_kept": a["memo_prior_kept"] + b["memo_prior_kept"],
        "recovered": a["recovered"] + b["recovered"],
        "unrestorable": {**a["unrestorable"], **b["unrestorable"]},
        "fork_reasons": {**a["fork_reasons"], **b["fork_reasons"]},
        "unforkable": {**a.get("unforkable", {}), **b.get("unforkable", {})},
        "garbage": {**a.get("garbage", {}), **b.get("garbage", {})},
        "unwalkable": _union(a["unwalkable"], b["unwalkable"]),
        "truncated": _union(a["truncated"], b["truncated"]),
        "emptied": _union(a["emptied"], b["emptied"]),
        "came_back": _union(a.get("came_back", []), b.get("came_back", [])),
        "patchers": {
            k: _union(a.get("patchers", {}).get(k, []), b.get("patchers", {}).get(k, []))
            for k in {**a.get("patchers", {}), **b.get("patchers", {})}
        },
        "observed_memos": list(dict.fromkeys(a["observed_memos"] + b["observed_memos"])),
        "impure_memos": list(dict.fromkeys(a.get("impure_memos", []) + b.get("impure_memos", []))),
        "memo_unaffordable": list(
            dict.fromkeys(a.get("memo_unaffordable", []) + b.get("memo_unaffordable", []))
        ),
        "rebuilt": _merge_rebuilt(a.get("rebuilt", []), b.get("rebuilt", [])),
        "unforked": a.get("unforked", []) + b.get("unforked", []),
        "child_files": {**a.get("child_files", {}), **b.get("child_files", {})},
        "tree_too_large": a.get("tree_too_large", False) or b.get("tree_too_large", False),
    }


def write_summary(core: IsolatorPlugin, tr: Any) -> None:
    if core.mode == "none":
        return
    if core.resetter is not None:
        data: dict[str, Any] | None = collect(core)
    else:
        data = core.worker_summary  # the controller of an xdist run
    if data is None:
        return
    write(data, str(core.store / "fork.json"), tr)


def write(data: dict[str, Any], fork_file: str, tr: Any) -> None:
    tr.write_sep("-", "isolator")
    tests, overhead = data["tests"], data["overhead"]
    per = overhead / tests * 1000 if tests else 0.0
    counts: dict[str, int] = data["reset_counts"]
    tr.write_line(
        f"--reset={data['mode']}: {tests} tests checked, {data['dirty_tests']} left shared "
        f"state dirty; {sum(counts.values())} resets of {len(counts)} sites "
        f"(its checks and resets took {overhead * 1000:.1f} ms, {per:.3f} ms a test; "
        "re-imports not counted)"
    )
    if counts:
        tr.write_line("most reset: " + ", ".join(_most_reset(counts, data.get("containers", {}))))
    kept, prior = data["memo_kept"], data["memo_prior_kept"]
    if kept:
        tr.write_line(
            f"kept {len(kept)} memo entr{'y' if len(kept) == 1 else 'ies'} "
            "declared in `keep` or recomputed the same after a reset (learn_memo"
            + (f"; {prior} as in an earlier run of the same code" if prior else "")
            + "): "
            + ", ".join(kept[:_TOP])
        )
    _observed_memos(tr, data["observed_memos"], counts)
    _impure_memos(tr, data.get("impure_memos", []), counts)
    large: list[str] = data.get("memo_unaffordable", [])
    if large:
        tr.write_line(
            f"not learned, too large to watch after every test ({len(large)} memo "
            f"entr{'y' if len(large) == 1 else 'ies'}; the tests that use them compute "
            "them again): " + ", ".join(large[:_TOP])
        )
    named = set(data["observed_memos"]) | set(data.get("impure_memos", [])) | set(large)
    _rebuilt_entries(tr, data.get("rebuilt", []), tests, named)
    if data["recovered"]:
        tr.write_line(
            f"restored {len(data['recovered'])} file(s) left by a test process that died "
            "mid-test (an earlier run, or a test run in a forked child)"
        )
    unrestorable: dict[str, list[list[str]]] = data["unrestorable"]
    for nodeid, probs in unrestorable.items():
        for site, why in probs:
            tr.write_line(f"could not reset after {nodeid}: {site}: {why}", yellow=True)
    if unrestorable:
        tr.write_line(
            f"{len(unrestorable)} test(s) will run in a forked child from the next run on "
            f"(remembered in {fork_file}; delete it to forget)",
            yellow=True,
        )
    child_files: dict[str, list[list[str]]] = data.get("child_files", {})
    if child_files:
        _listed(
            tr,
            f"{sum(map(len, child_files.values()))} file(s) in the project written by child "
            f"processes of {len(child_files)} test(s), not put back (isolator sees its own "
            "process's writes only; later tests see them as left): ",
            [(p, f"{what} during {nodeid}") for nodeid, v in child_files.items() for p, what in v],
        )
    if data.get("tree_too_large"):
        from isolator._files import TREE_SCAN_LIMIT

        tr.write_line(
            "files written by child processes not looked for: the project has more than "
            f"{TREE_SCAN_LIMIT} files",
            yellow=True,
        )
    emptied: list[list[Any]] = data["emptied"]
    if emptied:
        _listed(
            tr,
            f"emptied {len(emptied)} bounded memo cache(s) that had entries at the "
            "baseline (they cannot be put back; later tests compute them again): ",
            [(site, f"{n} entries") for site, n in emptied],
        )
    fork_reasons: dict[str, str] = data["fork_reasons"]
    if fork_reasons:
        reasons = Counter(fork_reasons.values())
        tr.write_line(
            f"ran {len(fork_reasons)} test(s) in a forked child: "
            + ", ".join(f"{why} ({n})" for why, n in reasons.most_common(_TOP))
        )
    unforkable: dict[str, list[str]] = data.get("unforkable", {})
    if unforkable:
        names = sorted({n for v in unforkable.values() for n in v})
        tr.write_line(
            f"ran {len(unforkable)} test(s) to fork in this process instead: threads that "
            f"earlier tests left running ({', '.join(names[:_TOP])}) would be missing in a "
            "forked child, and a test waiting on one would never end: "
            + ", ".join(list(unforkable)[:_TOP]),
            yellow=True,
        )
    garbage: dict[str, list[str]] = data.get("garbage", {})
    if garbage:
        _listed(
            tr,
            f"freed what {len(garbage)} test(s) left right after them: it warned of open "
            "resources or raised in a finalizer, which would have gone to a later test: ",
            [(nodeid, messages[0]) for nodeid, messages in garbage.items()],
        )
    unforked: list[str] = data.get("unforked", [])
    if unforked:
        tr.write_line(
            f"forgot {len(unforked)} test(s) from {fork_file}: forked, they left nothing "
            "that cannot be reset; they run in this process next time: "
            + ", ".join(unforked[:_TOP])
        )
    came_back: list[list[str]] = data.get("came_back", [])
    if came_back:
        _listed(
            tr,
            f"brought back {len(came_back)} module(s) as an earlier test's import left them: "
            "importing them again failed on what that import left in other objects, which "
            "isolator does not reset: ",
            [(name, why) for name, why in came_back],
        )
    patchers: dict[str, list[str]] = data.get("patchers", {})
    for package, sites in patchers.items():
        tr.write_line(
            f"put back what {package}'s code was bound to in other modules "
            f"({', '.join(sites[:_TOP])}), but not {package}'s own state, which isolator "
            f"does not track: if it keeps some (a stack of active patches), add "
            f'track = ["{package}"] to [tool.isolator]',
            yellow=True,
        )
    unwalkable = data["unwalkable"]
    if unwalkable:
        _listed(
            tr,
            f"{len(unwalkable)} object(s) not watched, their code failed when looked at "
            "(changes to them are not reset): ",
            unwalkable,
        )
    truncated = data["truncated"]
    if truncated:
        tr.write_line(
            f"{len(truncated)} object(s) past the watch budget of {_MAX_WATCHES_PER_MODULE} "
            "per module, seen only through what holds them (changed in place, they are not "
            "reset): " + ", ".join(truncated[:_TOP])
        )


def _containers(r: Any) -> dict[str, str]:
    """Each reset site that is an entry of a watched dict -> that dict's site (the
    innermost, for dicts in dicts): the summary counts a dict's entries together."""
    from isolator._state import DICT

    dicts = {s for t in r.tables.values() for s, k in zip(t.sites, t.kinds) if k == DICT}
    out: dict[str, str] = {}
    for site in r.reset_counts:
        if not site.endswith("]"):
            continue
        # The key's repr may hold brackets: the dict is the longest prefix ending before a
        # "[" that names a watched dict.
        j = len(site)
        while (j := site.rfind("[", 0, j)) > 0:
            if site[:j] in dicts:
                out[site] = site[:j]
                break
    return out


def _most_reset(counts: dict[str, int], containers: dict[str, str]) -> list[str]:
    """The sites reset most, a dict's entries counted as one site when several of them
    were reset (a memo keyed by hundreds of arguments: each entry alone is reset only a
    few times, together they may be the run's biggest cost)."""
    entries: Counter[str] = Counter(containers[s] for s in counts if s in containers)
    total: Counter[str] = Counter()
    for site, n in counts.items():
        owner = containers.get(site)
        total[owner if owner is not None and entries[owner] > 1 else site] += n
    return [
        f"{site} ({n} resets of {entries[site]} entries)"
        if entries.get(site, 0) > 1
        else f"{site} ({n})"
        for site, n in total.most_common(_TOP)
    ]


def _observed_memos(tr: Any, sites: list[str], counts: dict[str, int]) -> None:
    """The memos not learned because code reads them itself, by how often their entries
    were put back (the cost of recomputing them after every test)."""
    resets: Counter[str] = Counter()
    for site in sites:
        inside = (site + "[", site + ".")
        resets[site] = sum(n for s, n in counts.items() if s == site or s.startswith(inside))
    found = [(site, n) for site, n in resets.most_common() if n]
    if found:
        tr.write_line(
            "not learned, as code reads them itself (a test counting their entries would "
            "see other tests' entries; `keep` in [tool.isolator] shares them where that is "
            "safe): " + ", ".join(f"{site} ({n} resets)" for site, n in found[:_TOP])
        )


def _rebuilt_entries(tr: Any, rebuilt: list[list[Any]], tests: int, named: set[str]) -> None:
    """The dict entries that most tests added anew after each reset, unlearned (and not
    named by the lines above): a structure built on first use, which every test builds
    again as it would alone in a fresh process.  Where that is slow, the remedy is the
    user's: a session fixture's state is every test's baseline."""
    least = max(_COSTLY, (tests + 1) // 2)
    found = [(name, n) for name, site, n in rebuilt if n >= least and not {site, name} & named]
    if found:
        tr.write_line(
            "built anew by most tests, not learned (each test builds them as it would "
            "alone in a fresh process; where that is slow and no test needs them absent, "
            "a session-scoped autouse fixture that builds them makes them part of every "
            "test's baseline): "
            + ", ".join(f"{name} ({n} of {tests} tests)" for name, n in found[:_TOP])
        )


def _impure_memos(tr: Any, sites: list[str], counts: dict[str, int]) -> None:
    """The memo caches not learned because their functions read state a test can change
    (a data file, the environment), by how often they were emptied, when that is often
    enough to cost: the first place to look in a suite that runs slower isolated."""
    found = sorted(
        ((site, counts.get(site, 0)) for site in sites if counts.get(site, 0) >= _COSTLY),
        key=lambda sn: -sn[1],
    )
    if found:
        tr.write_line(
            "not learned, as their functions read files, the environment or the clock, or "
            "warn, log or print (a test that changes those must see them computed anew; "
            "`keep` in [tool.isolator] shares them where no test does): "
            + ", ".join(f"{site} ({n} resets)" for site, n in found[:_TOP])
        )


def _listed(tr: Any, head: str, pairs: Any) -> None:
    """A warning line: ``head`` and the first sites, each with what is said of it."""
    tr.write_line(head + ", ".join(f"{site} ({why})" for site, why in pairs[:_TOP]), yellow=True)
