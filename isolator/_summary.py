"""The ``isolator`` section of pytest's terminal summary."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from isolator.plugin import IsolatorPlugin

_TOP = 8


def write_summary(core: IsolatorPlugin, tr: Any) -> None:
    if core.mode == "none" or core.resetter is None:
        return
    r = core.resetter
    tr.write_sep("-", "isolator")
    per = core.overhead / core.tests * 1000 if core.tests else 0.0
    tr.write_line(
        f"--reset={core.mode}: {core.tests} tests checked, {core.dirty_tests} left shared state "
        f"dirty; {sum(r.reset_counts.values())} resets of {len(r.reset_counts)} sites "
        f"(isolation took {core.overhead * 1000:.1f} ms, {per:.3f} ms a test)"
    )
    if r.reset_counts:
        top = Counter(r.reset_counts).most_common(_TOP)
        tr.write_line("most reset: " + ", ".join(f"{s} ({n})" for s, n in top))
    if r.memo_kept:
        tr.write_line(
            f"kept {len(r.memo_kept)} memo entr{'y' if len(r.memo_kept) == 1 else 'ies'} "
            "declared in `keep` or recomputed the same after a reset (learn_memo"
            + (
                f"; {r.memo_prior_kept} as in an earlier run of the same code"
                if r.memo_prior_kept
                else ""
            )
            + "): "
            + ", ".join(r.memo_kept[:_TOP])
        )
    if core.recovered:
        tr.write_line(
            f"restored {len(core.recovered)} file(s) left by an earlier run that died mid-test"
        )
    for nodeid, probs in core.unrestorable.items():
        for site, why in probs:
            tr.write_line(f"could not reset after {nodeid}: {site}: {why}", yellow=True)
    if core.unrestorable:
        tr.write_line(
            f"{len(core.unrestorable)} test(s) will run in a forked child from the next run on "
            f"(remembered in {core.store / 'fork.json'}; delete it to forget)",
            yellow=True,
        )
    if core.fork_reasons:
        reasons = Counter(core.fork_reasons.values())
        tr.write_line(
            f"ran {len(core.fork_reasons)} test(s) in a forked child: "
            + ", ".join(f"{why} ({n})" for why, n in reasons.most_common(_TOP))
        )
    unwalkable = [u for t in r.tables.values() for u in t.unwalkable]
    if unwalkable:
        tr.write_line(
            f"{len(unwalkable)} object(s) not watched, their code failed when looked at "
            "(changes to them are not reset): "
            + ", ".join(f"{site} ({why})" for site, why in unwalkable[:_TOP]),
            yellow=True,
        )
    truncated = [s for t in r.tables.values() for s in t.truncated]
    if truncated:
        tr.write_line(
            f"{len(truncated)} large object(s) watched only in part: " + ", ".join(truncated[:_TOP])
        )
