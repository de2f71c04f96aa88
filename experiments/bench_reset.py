"""Benchmark the reset modes side by side: plain pytest vs ``isolator run --reset=...``.

Configurations (``--modes``): ``plain`` (pytest, isolator plugin blocked), ``none``
(``isolator run --reset=none``: supervision only), ``minimal``, ``full``, ``fork``, and
``forked`` (pytest-forked's ``--forked``). Repeats are interleaved (all modes of a suite run
once, in a rotated order, before any runs again) so machine drift spreads over the modes.

For each suite and mode: median wall time, CPU time of the process tree, peak RSS of the tree,
outcome counts, ratio to plain and per-test isolation overhead ((mode - plain) / tests).
Outcomes are compared test by test with plain pytest in declared order; each mismatch is
explained by running that test alone in a fresh plain pytest (its isolated outcome).

Usage::

    python experiments/bench_reset.py [--suites gen,six,parso,marshmallow] [--repeat 3]
        [--modes plain,none,minimal,full,fork,forked] [--quick] [--explain 10]

Writes experiments/results/reset.json and reset.png; prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
import suites  # noqa: E402
from tabulate import tabulate  # type: ignore[import-untyped]  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
ALL_MODES = ("plain", "none", "minimal", "full", "fork", "forked")
DEFAULT_MODES = ALL_MODES
QUICK_MODES = ("plain", "none", "minimal", "full")
TARGET_RATIO = 1.10


def command(info: suites.SuiteInfo, mode: str, args: tuple[str, ...] = ()) -> list[str]:
    """The command line for one configuration."""
    if mode == "plain":
        return info.pytest_cmd(*args)
    if mode == "forked":
        return info.pytest_cmd("--forked", *(args or info.pytest_args))
    return info.isolator_cmd(mode, *args)


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _slowdown_by_file(
    ref: dict[str, harness.Outcome], got: dict[str, harness.Outcome], top: int = 8
) -> list[dict[str, Any]]:
    """Where the extra time went: per test module, junit seconds in this mode minus plain."""
    per: dict[str, list[float]] = {}
    for key, out in got.items():
        base = ref.get(key)
        if base is None:
            continue
        module = key.partition("::")[0]
        acc = per.setdefault(module, [0.0, 0.0, 0.0])
        acc[0] += base.seconds
        acc[1] += out.seconds
        acc[2] += 1
    ranked = sorted(per.items(), key=lambda kv: kv[1][1] - kv[1][0], reverse=True)
    return [
        {"module": m, "tests": int(n), "plain_s": round(a, 3), "mode_s": round(b, 3)}
        for m, (a, b, n) in ranked[:top]
    ]


def _problem(res: harness.RunResult, mode: str, ref: dict[str, harness.Outcome] | None) -> str:
    """Why a run cannot count as a measurement of its mode ("" when it can)."""
    if res.rc not in (0, 1):
        lines = [ln for ln in harness.tail(res.log, 40).splitlines() if ln.strip()]
        errs = [ln for ln in lines if "Error" in ln or "error" in ln] or lines or [""]
        return f"rc={res.rc}: {errs[-1].strip()[:200]}"
    if not res.junit_ok:
        return "no junitxml results"
    if ref and mode == "forked":
        passed = sum(o.outcome == "passed" for o in res.outcomes.values())
        if passed == 0 and any(o.outcome == "passed" for o in ref.values()):
            first = next(iter(res.outcomes.values()), harness.Outcome("?"))
            return f"pytest-forked does not run here: {first.message[:200]}"
    return ""


def _explain(
    info: suites.SuiteInfo, keys: list[str], key_to_node: dict[str, str], tmp: Path
) -> dict[str, str]:
    """Isolated outcome (alone, fresh plain pytest) of each junit key."""
    out: dict[str, str] = {}
    for key in keys:
        node = key_to_node.get(key)
        if node is None:
            out[key] = "?"
            continue
        res = harness.measure(
            info.pytest_cmd(*info.options, node),
            info.path,
            info.env(),
            tmp / "explain.log",
            tmp / "explain.xml",
        )
        got = res.outcomes.get(key)
        out[key] = got.outcome if got else f"no result (rc={res.rc})"
    return out


def run_suite(
    name: str, modes: tuple[str, ...], repeat: int, warmup: bool, explain: int, tmp: Path
) -> dict[str, Any]:
    """All measurements of one suite."""
    info = suites.prepare(name)
    env = info.env()
    nodes = harness.collect(info.pytest_cmd(), info.path, env)
    key_to_node = {harness.junit_key(n): n for n in nodes}
    print(f"[{name}] {info.version}: {len(nodes)} tests collected", flush=True)
    if warmup:
        # Byte-compile and fill on-disk caches (isolator's .isolator/, .pyc) outside the timing.
        for mode in ("plain", "minimal") if "minimal" in modes else ("plain",):
            harness.measure(command(info, mode), info.path, env, tmp / "warm.log", tmp / "w.xml")

    runs: dict[str, list[harness.RunResult]] = {m: [] for m in modes}
    for rep in range(repeat):
        shift = rep % len(modes)
        order = modes[shift:] + modes[:shift]
        for mode in order:
            log = tmp / f"{name}-{mode}-{rep}.log"
            res = harness.measure(command(info, mode), info.path, env, log, tmp / f"{name}.xml")
            runs[mode].append(res)
            problem = _problem(res, mode, None)
            print(
                f"[{name}] rep {rep + 1}/{repeat} {mode:8s} {res.wall_s:8.2f}s "
                f"rss {res.maxrss_kb / 1024:7.1f} MB rc={res.rc} {res.counts} {problem}",
                flush=True,
            )
            if problem:
                print(harness.tail(log), flush=True)

    plain = runs.get("plain", [])
    ref = plain[0].outcomes if plain and not _problem(plain[0], "plain", None) else {}
    n_tests = len(ref) or len(nodes)
    plain_wall = _median([r.wall_s for r in plain])
    plain_rss = _median([float(r.maxrss_kb) for r in plain])
    plain_cpu = _median([r.cpu_s for r in plain])
    flaky_plain = sorted(
        {d[0] or d[1] for r in plain[1:] if r.junit_ok for d in harness.compare(ref, r.outcomes)}
    )

    result: dict[str, Any] = {
        "version": info.version,
        "python": info.python_version(),
        "tests": n_tests,
        "command": {m: command(info, m) for m in modes},
        "plain_nondeterministic": flaky_plain,
        "modes": {},
        "mismatches": {},
    }
    for mode in modes:
        rs = runs[mode]
        problems = [p for p in (_problem(r, mode, ref) for r in rs) if p]
        ok = [r for r in rs if not _problem(r, mode, ref)]
        wall = _median([r.wall_s for r in rs])
        rss = _median([float(r.maxrss_kb) for r in rs])
        entry: dict[str, Any] = {
            "runs": [r.summary() for r in rs],
            "median_wall_s": round(wall, 4),
            "median_cpu_s": round(_median([r.cpu_s for r in rs]), 4),
            "median_maxrss_kb": int(rss),
            "available": bool(ok),
            "problems": problems,
            "counts": ok[-1].counts if ok else (rs[-1].counts if rs else {}),
        }
        if plain and mode != "plain":
            entry["ratio"] = round(wall / plain_wall, 4)
            # Each repeat runs every mode back to back: the ratio within a repeat cancels
            # the machine's slow drifts, which the ratio of medians does not.
            pairs = [r.wall_s / p.wall_s for r, p in zip(rs, plain) if p.wall_s > 0]
            entry["paired_ratio"] = round(_median(pairs), 4) if pairs else None
            entry["rss_ratio"] = round(rss / plain_rss, 4)
            # CPU time of the tree: steadier than wall time when other work shares the cores.
            entry["cpu_ratio"] = round(entry["median_cpu_s"] / plain_cpu, 4)
            entry["overhead_ms_per_test"] = round((wall - plain_wall) * 1000 / n_tests, 4)
        result["modes"][mode] = entry

        if mode == "plain" or not ref or not ok:
            continue
        got = ok[0].outcomes
        entry["slowdown_by_file"] = _slowdown_by_file(ref, got)
        diffs = [
            {
                "test": key_to_node.get(rk or gk, rk or gk),
                "plain": ro,
                "mode": go,
                "message": (got[gk].message if gk and go != "passed" else "")
                or (ref[rk].message if rk else ""),
            }
            for rk, gk, ro, go in harness.compare(ref, got)
        ]
        if diffs and explain:
            alone = _explain(
                info, [harness.junit_key(d["test"]) for d in diffs[:explain]], key_to_node, tmp
            )
            for d in diffs[:explain]:
                d["alone"] = alone.get(harness.junit_key(d["test"]), "?")
        result["mismatches"][mode] = diffs
    return result


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _cpu_ratio(res: dict[str, Any], entry: dict[str, Any]) -> float | None:
    plain = res["modes"].get("plain", {}).get("median_cpu_s")
    return entry["median_cpu_s"] / plain if plain else None


def _paired_spread(res: dict[str, Any], mode: str) -> tuple[float, float] | None:
    """Quartiles of the per-repeat wall / plain wall ratios (None under 4 repeats), from the
    runs kept in the results: repeat i of every mode ran back to back."""
    plain = [r["wall_s"] for r in res["modes"].get("plain", {}).get("runs", [])]
    walls = [r["wall_s"] for r in res["modes"].get(mode, {}).get("runs", [])]
    pairs = [w / p for w, p in zip(walls, plain) if p > 0]
    if len(pairs) < 4:
        return None
    q1, _, q3 = statistics.quantiles(pairs, n=4)
    return q1, q3


def _spread_cell(res: dict[str, Any], mode: str) -> str:
    spread = _paired_spread(res, mode) if mode != "plain" else None
    return "" if spread is None else f"{spread[0]:.2f}-{spread[1]:.2f}"


def table(results: dict[str, Any], fmt: str = "simple") -> str:
    """The side-by-side table (``fmt``: a tabulate format; "github" for the README)."""
    rows = []
    for name, res in results["suites"].items():
        if "error" in res:
            rows.append([name, "unavailable", *[""] * 11, res["error"][:60]])
            continue
        for mode, e in res["modes"].items():
            c = e["counts"]
            rows.append(
                [
                    name,
                    mode,
                    res["tests"],
                    f"{c.get('passed', 0)}/{c.get('failed', 0)}/{c.get('skipped', 0)}"
                    f"/{c.get('errors', 0)}",
                    _fmt(e["median_wall_s"], ".2f"),
                    _fmt(e.get("ratio"), ".2f") if mode != "plain" else "1.00",
                    _fmt(e.get("paired_ratio"), ".2f") if mode != "plain" else "1.00",
                    _spread_cell(res, mode),
                    _fmt(e.get("overhead_ms_per_test"), "+.3f") if mode != "plain" else "",
                    _fmt(e["median_cpu_s"], ".2f"),
                    _fmt(_cpu_ratio(res, e), ".2f"),
                    _fmt(e["median_maxrss_kb"] / 1024, ".1f"),
                    _fmt(e.get("rss_ratio"), ".2f") if mode != "plain" else "1.00",
                    ("" if e["available"] else f"BROKEN: {e['problems'][0][:70]} ")
                    + (f"{len(res['mismatches'].get(mode, []))} mismatches"
                       if res["mismatches"].get(mode) else ""),
                ]
            )  # fmt: skip
    headers = [
        "suite", "mode", "tests", "pass/fail/skip/err", "wall s", "x plain", "paired x",
        "paired IQR", "ms/test",
        "cpu s", "cpu x plain", "peak RSS MB", "RSS x plain", "notes",
    ]  # fmt: skip
    text: str = tabulate(rows, headers=headers, tablefmt=fmt, disable_numparse=True)
    return text


def suite_pythons(results: dict[str, Any]) -> str:
    """The Python version(s) the suites ran on (results before they were recorded per
    suite: the benchmark's own, which was theirs unless ISOLATOR_SUITE_PYTHON was set)."""
    fallback = results["machine"]["python"]
    found = {r.get("python", fallback) for r in results["suites"].values() if "modes" in r}
    return ", ".join(sorted(found)) or fallback


def plot(results: dict[str, Any], path: Path) -> None:
    """Bar chart: wall-time and peak-RSS ratios to plain pytest per suite and mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n, r in results["suites"].items() if "modes" in r]
    modes = [m for m in results["modes"] if m != "plain"]
    if not names or not modes:
        return
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    width = 0.8 / len(modes)
    for ax, field, title in (
        (axes[0], "ratio", "wall time / plain pytest (log scale)"),
        (axes[1], "rss_ratio", "peak RSS / plain pytest"),
    ):
        for j, mode in enumerate(modes):
            xs, vals, broken = [], [], []
            for i, n in enumerate(names):
                x = i + (j - (len(modes) - 1) / 2) * width
                entry = results["suites"][n]["modes"].get(mode)
                if entry is None:
                    continue
                if not entry["available"] or entry.get(field) is None:
                    broken.append(x)  # a run in which the tests did not run is no measurement
                    continue
                xs.append(x)
                vals.append(entry[field])
            ax.bar(xs, vals, width, label=mode, color=f"C{j}")
            for x in broken:
                ax.text(
                    x, 1.0, "n/a", rotation=90, ha="center", va="bottom", fontsize=7, color=f"C{j}"
                )
        ax.axhline(1.0, color="black", linewidth=0.8)
        limit = TARGET_RATIO if field == "ratio" else 1.5
        ax.axhline(limit, color="red", linestyle="--", linewidth=0.8)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names)
        ax.set_title(title)
        if field == "ratio":
            ax.set_yscale("log")
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    # Built by hand: a mode with no measured bar would otherwise get a wrong legend colour.
    handles: list[Any] = [Patch(color=f"C{j}", label=m) for j, m in enumerate(modes)]
    handles.append(Line2D([], [], color="red", linestyle="--", label="target"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8)
    fig.suptitle(
        f"isolator reset modes, Python {suite_pythons(results)} (median of "
        f"{results['repeat']} run(s); n/a = mode did not run)"
    )
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--suites", default="gen,six,parso,marshmallow")
    parser.add_argument("--repeat", type=int, default=None, help="repeats per mode (default 3)")
    parser.add_argument("--modes", default=None, help=f"default {','.join(DEFAULT_MODES)}")
    parser.add_argument(
        "--quick", action="store_true",
        help=f"1 repeat, no warm-up, modes {','.join(QUICK_MODES)} unless --modes/--repeat",
    )  # fmt: skip
    parser.add_argument("--explain", type=int, default=10, help="mismatches to rerun alone")
    parser.add_argument(
        "--out", type=Path, default=None,
        help="directory for JSON and PNG (default experiments/results; with --render, the "
        "directory of that JSON)",
    )  # fmt: skip
    parser.add_argument(
        "--render", type=Path, metavar="JSON",
        help="only re-print the table and rewrite PNG/Markdown from an earlier reset.json",
    )  # fmt: skip
    args = parser.parse_args(argv)
    problem = harness.missing_plotting("bench_reset")
    if problem is not None:
        print(problem, file=sys.stderr)
        return 2
    if args.render is not None:
        try:
            earlier: dict[str, Any] = json.loads(args.render.read_text())
        except (OSError, ValueError) as exc:
            print(f"bench_reset: error: cannot read {args.render}: {exc}", file=sys.stderr)
            return 2
        # Re-rendering an earlier run rewrites its own PNG and Markdown, not the latest's.
        return _report(earlier, args.out or args.render.resolve().parent)

    names = [s.strip() for s in args.suites.split(",") if s.strip()]
    unknown = [n for n in names if n not in suites.SPECS]
    if unknown or not names:
        print(f"bench_reset: error: unknown suite(s) {unknown}; known: {list(suites.SPECS)}",
              file=sys.stderr)  # fmt: skip
        return 2
    default_modes = QUICK_MODES if args.quick else DEFAULT_MODES
    modes = tuple(m.strip() for m in args.modes.split(",")) if args.modes else default_modes
    if any(m not in ALL_MODES for m in modes) or not modes:
        print(f"bench_reset: error: modes must be among {','.join(ALL_MODES)}", file=sys.stderr)
        return 2
    if "plain" not in modes:
        modes = ("plain", *modes)
    repeat = args.repeat if args.repeat is not None else (1 if args.quick else 3)
    if repeat < 1:
        print("bench_reset: error: --repeat must be >= 1", file=sys.stderr)
        return 2

    results: dict[str, Any] = {
        "schema": "isolator.bench.reset/1",
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_avg_at_start": os.getloadavg(),
        },
        "repeat": repeat,
        "modes": list(modes),
        "suites": {},
    }
    with tempfile.TemporaryDirectory(prefix="bench-reset-") as tmpdir:
        for name in names:
            try:
                results["suites"][name] = run_suite(
                    name, modes, repeat, not args.quick, args.explain, Path(tmpdir)
                )
            except suites.SuiteUnavailable as exc:
                print(f"[{name}] unavailable: {exc}", file=sys.stderr)
                results["suites"][name] = {"error": str(exc)}
    results["machine"]["load_avg_at_end"] = os.getloadavg()

    return _report(results, args.out or RESULTS)


def _report(results: dict[str, Any], out: Path) -> int:
    """Print the table and mismatches; write JSON, PNG and Markdown; 1 if minimal mismatched."""
    repeat = results["repeat"]
    print()
    print(table(results))
    status = 0
    for name, res in results["suites"].items():
        minimal = res.get("modes", {}).get("minimal")
        if minimal and not minimal["available"]:
            status = 1
            print(f"\n{name}: --reset=minimal did not complete: {minimal['problems'][:1]}")
        for mode, diffs in res.get("mismatches", {}).items():
            if not diffs:
                continue
            if mode == "minimal":
                status = 1
            print(f"\n{name}: {len(diffs)} outcome mismatch(es) {mode} vs plain (declared order):")
            for d in diffs[:25]:
                alone = f" [alone: {d['alone']}]" if "alone" in d else ""
                print(f"  {d['test']}: plain={d['plain']} {mode}={d['mode']}{alone} {d['message']}")
        minimal_slow = res.get("modes", {}).get("minimal", {}).get("slowdown_by_file")
        if minimal_slow:
            worst = ", ".join(
                f"{r['module']} {r['plain_s']:.2f}s->{r['mode_s']:.2f}s" for r in minimal_slow[:4]
            )
            print(f"\n{name}: minimal's extra time by junit class (plain->minimal): {worst}")
        if res.get("plain_nondeterministic"):
            print(f"\n{name}: plain pytest itself varied on {res['plain_nondeterministic'][:10]}")

    out.mkdir(parents=True, exist_ok=True)
    tmp_json = out / "reset.json.tmp"
    tmp_json.write_text(json.dumps(results, indent=2) + "\n")
    os.replace(tmp_json, out / "reset.json")
    plot(results, out / "reset.png")
    load = results["machine"]
    (out / "reset.md").write_text(
        f"Measured {results['when']}, median of {repeat} run(s), Python "
        f"{suite_pythons(results)}, {load['cpus']} CPUs, load average at start/end "
        f"{load['load_avg_at_start'][0]:.1f}/{load['load_avg_at_end'][0]:.1f}.\n\n"
        + table(results, "github")
        + "\n"
    )
    print(f"\nwrote {out / 'reset.json'}, reset.png and reset.md")
    return status


if __name__ == "__main__":
    sys.exit(main())
