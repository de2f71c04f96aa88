"""Benchmark ``isolator deps`` against the tools Python users have: pytest-randomly rounds
and detect-test-pollution's bisection.

For each suite (a fresh copy of its sources, so that nothing is written into
``experiments/work/``):

* ``plain``: one plain pytest run in declared order (the unit of every ratio);
* ``minimal``: one ``--reset=minimal`` run, the resetter alone: the recording run is that
  plus the read tracer, so the two ratios side by side tell which part costs what;
* ``isolator deps`` with its defaults: the recording run's time and the total detection
  time (record + confirm), as ratios to plain; the dependencies it confirms, and whether
  the suite's known ones are among them;
* ``pytest-randomly``: shuffled runs with seeds 1, 2, ... until every known victim or
  brittle test has failed once (at most ``--rounds``): rounds and time; it names no
  polluter and no state;
* ``detect-test-pollution --failing-test VICTIM``: for each known victim (it cannot start
  from a brittle test, and needs the victim given): pytest runs, time, polluters found.

Known dependencies: the planted ones of ``tests/data/statekinds/EXPECTED.json``, six's
``test_lazy`` after ``test_move_items[html_parser]``, parso's ``test_simple`` after
``test_change_and_undo``; the generated suite has none (any confirmed edge there is a false
positive).

Usage::

    python experiments/bench_deps.py [--suites statekinds,six,parso,gen] [--repeat 1]
        [--rounds 30] [--no-dtp] [--out experiments/results]

Writes experiments/results/deps.json and deps.png; prints a table.  Timings are wall
clock (median of ``--repeat``); the machine's load average is recorded with them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
import suites  # noqa: E402
from tabulate import tabulate  # type: ignore[import-untyped]  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
STATEKINDS = ROOT / "tests" / "data" / "statekinds"
TARGETS = {"record": 2.0, "total": 3.0}
_COPY_IGNORE = shutil.ignore_patterns(
    ".venv", "*.egg-info", "__pycache__", ".isolator", ".pytest_cache", ".gen_suite.json"
)


@dataclass
class Suite:
    """A suite ready to run: a copy of its sources and the interpreter that runs it."""

    name: str
    path: Path
    python: Path
    args: list[str]  # pytest arguments for a whole run (options + targets)
    known: list[tuple[str, str, str]]  # (kind, source, target)
    env: dict[str, str] = field(default_factory=dict)
    randomly_args: list[str] = field(default_factory=list)

    @property
    def isolator(self) -> list[str]:
        return [str(self.python), "-m", "isolator"]


def _env(base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(base or os.environ)
    for k in list(env):
        if k.startswith(("PYTEST_", "COV_")) or k == "PYTHONDONTWRITEBYTECODE":
            # Byte-code caching on: each child would otherwise recompile isolator and the
            # suite, which no user's machine does.
            env.pop(k)
    return env


def prepare(name: str, work: Path) -> Suite:
    dest = work / name
    if name == "statekinds":
        shutil.copytree(STATEKINDS, dest, ignore=_COPY_IGNORE)
        expected = json.loads((STATEKINDS / "EXPECTED.json").read_text())
        known = [(e["kind"], e["source"], e["target"]) for e in expected["dependencies"]]
        return Suite(
            name,
            dest,
            Path(sys.executable),
            [],
            known,
            _env(),
            # The suite's ini blocks randomly (its declared order is part of the data).
            ["-o", "addopts=-p no:cacheprovider -p no:warnings"],
        )
    info = suites.prepare(name)
    shutil.copytree(info.path, dest, ignore=_COPY_IGNORE)
    known = {
        "six": [
            ("polluter", "test_six.py::test_move_items[html_parser]", "test_six.py::test_lazy")
        ],
        "parso": [
            (
                "polluter",
                "test/test_diff_parser.py::test_change_and_undo",
                "test/test_diff_parser.py::test_simple",
            )
        ],
    }.get(name, [])
    return Suite(name, dest, info.python, list(info.pytest_args), known, _env(info.env()))


# ---------------------------------------------------------------------------- measuring


def run_plain(s: Suite, work: Path) -> dict[str, Any]:
    cmd = [str(s.python), "-m", "pytest", "-p", "no:isolator", "-p", "no:randomly", *s.args]
    res = harness.measure(cmd, s.path, s.env, work / f"{s.name}-plain.log")
    return {"wall_s": res.wall_s, "cpu_s": res.cpu_s, "rc": res.rc, "counts": res.counts}


def run_minimal(s: Suite, work: Path) -> dict[str, Any]:
    cmd = [str(s.python), "-m", "pytest", "-p", "isolator", "--reset=minimal",
           "-p", "no:randomly", *s.args]  # fmt: skip
    res = harness.measure(cmd, s.path, s.env, work / f"{s.name}-minimal.log")
    return {"wall_s": res.wall_s, "cpu_s": res.cpu_s, "rc": res.rc}


def run_deps(s: Suite, work: Path, k: int) -> dict[str, Any]:
    out = work / f"{s.name}-deps-{k}.json"
    cmd = [*s.isolator, "deps", "-q", "--format", "json", "--output", str(out), *s.args]
    res = harness.measure(cmd, s.path, s.env, work / f"{s.name}-deps-{k}.log")
    if res.rc != 0 or not out.exists():
        raise RuntimeError(f"isolator deps failed (exit {res.rc}): {harness.tail(res.log)}")
    doc = json.loads(out.read_text())
    confirmed = {
        (d["kind"], d["source"], d["target"]) for d in doc["dependencies"] if d["confirmed"]
    }
    found = [k for k in s.known if k in confirmed]
    return {
        "wall_s": res.wall_s,
        "cpu_s": res.cpu_s,
        "record_s": doc["stats"]["record_seconds"],
        "confirm_s": doc["stats"]["confirm_seconds"],
        "candidates": doc["stats"]["candidates"],
        "tried": doc["stats"].get("tried", 0),
        "test_executions": doc["stats"]["test_executions"],
        "confirmed": len(confirmed),
        "known_found": len(found),
        "false_positives": len([c for c in confirmed if c not in set(s.known)]),
        "cleaners": sum(len(c["cleaners"]) for c in doc["cleaners"]),
        "tracer": doc["stats"].get("tracer", ""),
    }


def run_randomly(s: Suite, work: Path, rounds: int) -> dict[str, Any]:
    """Shuffled runs until every known target has failed once."""
    targets = {t for _k, _s, t in s.known}
    if not targets:
        return {"applies": False}
    seen: set[str] = set()
    total = 0.0
    n = 0
    for seed in range(1, rounds + 1):
        n = seed
        if s.name == "statekinds":  # its tests change files under its root
            s = fresh(s, work)
        junit = work / f"{s.name}-randomly-{seed}.xml"
        # This interpreter has pytest-randomly; the suites' own venvs do not, and their
        # sources (a copy, the cwd) import from the copy either way.
        cmd = [sys.executable, "-m", "pytest", "-p", "no:isolator", *s.randomly_args,
               "-p", "randomly", f"--randomly-seed={seed}", *s.args]  # fmt: skip
        res = harness.measure(cmd, s.path, s.env, work / f"{s.name}-randomly.log", junit)
        total += res.wall_s
        for key, out in res.outcomes.items():
            for t in targets:
                if harness.junit_key(t) == key and out.outcome in ("failed", "error"):
                    seen.add(t)
        if seen == targets:
            break
    return {
        "applies": True,
        "rounds": n,
        "exposed": len(seen),
        "targets": len(targets),
        "all_exposed": seen == targets,
        "wall_s": total,
        "pairs_named": 0,  # it shows failing tests, never the polluter or the state
    }


def run_dtp(s: Suite, work: Path) -> dict[str, Any]:
    """detect-test-pollution's bisection from each known victim (polluter kind only)."""
    victims = [(src, t) for kind, src, t in s.known if kind == "polluter"]
    if not victims:
        return {"applies": False}
    if shutil.which("detect-test-pollution", path=str(Path(sys.executable).parent)) is None:
        return {"applies": False, "why": "detect-test-pollution is not installed"}
    tests = "." if s.name != "statekinds" else "tests"
    if s.name == "parso":
        tests = "test"
    found = 0
    runs = 0
    total = 0.0
    names: list[str] = []
    for src, victim in victims:
        t0 = time.perf_counter()
        proc = subprocess.run(
            # Its console script: under ``python -m`` it loads itself as plugin __main__.
            [str(Path(sys.executable).parent / "detect-test-pollution"), "--failing-test",
             victim, "--tests", tests],
            cwd=s.path,
            env=s.env,
            capture_output=True,
            text=True,
            timeout=3600,
        )  # fmt: skip
        total += time.perf_counter() - t0
        out = proc.stdout
        # discover + alone + with the group + one per bisection step + the final check
        runs += (
            2
            + out.count("ensuring test")
            + out.count("running step")
            + (1 if "double checking" in out else 0)
        )
        named = ""
        for line in out.splitlines():
            if "the polluting test is:" in line:
                named = line.split("the polluting test is:", 1)[1].strip()
        names.append(named)
        found += int(named == src)
    return {
        "applies": True,
        "victims": len(victims),
        "pairs_found": found,
        "pytest_runs": runs,
        "wall_s": total,
        "polluters_named": names,
    }


def fresh(s: Suite, work: Path) -> Suite:
    shutil.rmtree(s.path)
    return prepare(s.name, work)


def run_suite(name: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    s = prepare(name, work)
    print(f"== {name}", flush=True)
    plains: list[dict[str, Any]] = []
    minimals: list[dict[str, Any]] = []
    deps: list[dict[str, Any]] = []
    for k in range(args.repeat):
        # Interleaved, so that the machine's load hits every configuration alike.
        plains.append(run_plain(s, work))
        # A fresh copy for each run: statekinds changes files under its root on purpose.
        s = fresh(s, work)
        minimals.append(run_minimal(s, work))
        s = fresh(s, work)
        deps.append(run_deps(s, work, k))
        s = fresh(s, work)
    plain = statistics.median(p["wall_s"] for p in plains)
    minimal = statistics.median(m["wall_s"] for m in minimals)
    med = {
        key: statistics.median(d[key] for d in deps)
        for key in ("wall_s", "record_s", "confirm_s", "cpu_s")
    }
    last = deps[-1]
    out: dict[str, Any] = {
        "tests": sum(
            v for k, v in plains[0]["counts"].items() if k not in ("warnings", "deselected")
        ),
        "plain_s": round(plain, 3),
        "plain_cpu_s": round(statistics.median(p["cpu_s"] for p in plains), 3),
        "minimal_s": round(minimal, 3),
        "minimal_cpu_s": round(statistics.median(m["cpu_s"] for m in minimals), 3),
        "minimal_ratio": round(minimal / plain, 2),
        "deps": {**last, **{k: round(v, 3) for k, v in med.items()}},
        "record_ratio": round(med["record_s"] / plain, 2),
        "total_ratio": round(med["wall_s"] / plain, 2),
        # CPU time of the command and its children (the recording run, the confirmation
        # processes), against plain pytest's: less sensitive to other load than wall time.
        "total_cpu_ratio": round(
            med["cpu_s"] / max(statistics.median(p["cpu_s"] for p in plains), 1e-9), 2
        ),
        "known": len(s.known),
        "load_avg_at_end": [round(x, 2) for x in os.getloadavg()],
    }
    if not args.no_randomly:
        out["randomly"] = run_randomly(s, work, args.rounds)
        if out["randomly"].get("applies"):
            out["randomly"]["ratio"] = round(out["randomly"]["wall_s"] / plain, 2)
    if not args.no_dtp:
        s = fresh(s, work)
        out["dtp"] = run_dtp(s, work)
        if out["dtp"].get("applies") and "wall_s" in out["dtp"]:
            out["dtp"]["ratio"] = round(out["dtp"]["wall_s"] / plain, 2)
    return out


# ------------------------------------------------------------------------------- report


def table(results: dict[str, Any]) -> str:
    rows = []
    for name, r in results["suites"].items():
        if "error" in r:
            rows.append([name, "error: " + r["error"][:60]] + [""] * 9)
            continue
        d = r["deps"]
        rnd = r.get("randomly", {})
        dtp = r.get("dtp", {})
        rows.append(
            [
                name,
                r["tests"],
                f"{r['plain_s']:.1f}",
                f"{r['minimal_s']:.1f} ({r['minimal_ratio']:.2f}x)",
                f"{d['record_s']:.1f} ({r['record_ratio']:.2f}x)",
                f"{d['wall_s']:.1f} ({r['total_ratio']:.2f}x; CPU {r['total_cpu_ratio']:.2f}x)",
                f"{d['known_found']}/{r['known']}, {d['false_positives']} extra",
                f"{d['confirmed']} / {d['candidates']}",
                (
                    f"{rnd['rounds']} rounds, {rnd['exposed']}/{rnd['targets']}, "
                    f"{rnd['wall_s']:.0f}s ({rnd['ratio']:.1f}x)"
                    if rnd.get("applies")
                    else "n/a"
                ),
                (
                    f"{dtp['pairs_found']}/{dtp['victims']}, {dtp['pytest_runs']} runs, "
                    f"{dtp['wall_s']:.0f}s ({dtp['ratio']:.1f}x)"
                    if dtp.get("applies") and "wall_s" in dtp
                    else "n/a"
                ),
            ]
        )
    headers = ["suite", "tests", "plain s", "--reset=minimal s (ratio)", "record s (ratio)",
               "deps total s (ratio)",
               "known found", "confirmed / candidates", "pytest-randomly",
               "detect-test-pollution"]  # fmt: skip
    return tabulate(rows, headers=headers, tablefmt="simple")


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n, r in results["suites"].items() if "deps" in r]
    if not names:
        return
    series = {
        "--reset=minimal alone": [results["suites"][n].get("minimal_ratio", 0.0) for n in names],
        "isolator deps: record": [results["suites"][n]["record_ratio"] for n in names],
        "isolator deps: total": [results["suites"][n]["total_ratio"] for n in names],
        "pytest-randomly rounds": [
            results["suites"][n].get("randomly", {}).get("ratio", 0.0) for n in names
        ],
        "detect-test-pollution": [
            results["suites"][n].get("dtp", {}).get("ratio", 0.0) for n in names
        ],
    }
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.16
    for i, (label, values) in enumerate(series.items()):
        xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(names))]
        ax.bar(xs, values, width, label=label)
    ax.axhline(TARGETS["record"], color="grey", linestyle=":", linewidth=1)
    ax.axhline(TARGETS["total"], color="grey", linestyle="--", linewidth=1)
    ax.set_yscale("log")
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("time / one plain pytest run (log)")
    ax.set_title("finding order dependencies (0 = tool does not apply)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _carry_over(results: dict[str, Any], previous: Path) -> None:
    """Keep the pytest-randomly and detect-test-pollution results of the previous file
    for the suites this run did not measure them on (``--no-randomly``/``--no-dtp``):
    they do not depend on isolator, and they take most of the benchmark's time."""
    try:
        old = json.loads(previous.read_text())["suites"]
    except (OSError, ValueError, KeyError):
        return
    for name, r in results["suites"].items():
        before = old.get(name, {})
        for key in ("randomly", "dtp"):
            if key not in r and key in before:
                r[key] = {**before[key], "carried_over": True}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--suites", default="statekinds,six,parso,gen")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=30, help="pytest-randomly rounds at most")
    parser.add_argument("--no-randomly", action="store_true")
    parser.add_argument("--no-dtp", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    problem = harness.missing_plotting("bench_deps")
    if problem is not None:
        print(problem, file=sys.stderr)
        return 2
    names = [n.strip() for n in args.suites.split(",") if n.strip()]
    unknown = [n for n in names if n != "statekinds" and n not in suites.SPECS]
    if unknown or args.repeat < 1 or args.rounds < 1:
        print(f"bench_deps: unknown suite(s) {unknown} or bad --repeat/--rounds", file=sys.stderr)
        return 2
    results: dict[str, Any] = {
        "benchmark": "isolator deps",
        "targets": TARGETS,
        "repeat": args.repeat,
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_avg_at_start": os.getloadavg(),
        },
        "suites": {},
    }
    with tempfile.TemporaryDirectory(prefix="bench-deps-") as tmp:
        work = Path(tmp)
        for name in names:
            try:
                results["suites"][name] = run_suite(name, args, work)
            except (
                RuntimeError,
                OSError,
                subprocess.SubprocessError,
                suites.SuiteUnavailable,
            ) as exc:
                results["suites"][name] = {
                    "error": str(exc).splitlines()[0] if str(exc) else repr(exc)
                }
            print(json.dumps(results["suites"][name]), flush=True)
    results["machine"]["load_avg_at_end"] = os.getloadavg()
    args.out.mkdir(parents=True, exist_ok=True)
    _carry_over(results, args.out / "deps.json")
    (args.out / "deps.json").write_text(json.dumps(results, indent=1) + "\n")
    plot(results, args.out / "deps.png")
    print(table(results))
    print(f"wrote {args.out / 'deps.json'} and {args.out / 'deps.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
