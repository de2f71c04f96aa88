"""Two versions of isolator side by side: ``isolator run --reset=minimal`` of a base revision
and of the working tree (or ``--head REV``), with plain pytest, in one run.

Wall ratios to plain pytest move by about +-0.1 between runs on these machines (other load,
frequency, memory state), so a change of a few percent is only seen when the two versions
run interleaved on the same machine state. Each version's ``isolator/`` package is exported
(``git archive``) into a temporary directory that goes first on ``PYTHONPATH`` of the
suite's venv (where isolator is installed editable); plain pytest gets the same
``PYTHONPATH`` length. Repeats are interleaved in a rotated order after one untimed warm-up
of each configuration (byte-compilation of the exported copies). Each version keeps its
own ``.isolator`` store, moved into the suite directory for its runs only: memo entries
that one version verified would otherwise be kept at once by the other, which may not be
able to learn them (the suite's own store is put back at the end); the warm-up is where
each learns.

Usage::

    python experiments/bench_commits.py --base 3caad47 [--head HEAD] [--suites six,gen]
        [--repeat 15] [--out experiments/results/commits]

Prints a table and writes commits.json and commits.png to ``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
import suites  # noqa: E402
from tabulate import tabulate  # type: ignore[import-untyped]  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "experiments" / "results"


def _export(rev: str | None, dest: Path) -> str:
    """The ``isolator`` package of ``rev`` (None: the working tree) under ``dest``; returns
    the commit it came from (with ``+worktree`` when uncommitted changes are included)."""
    dest.mkdir(parents=True)
    if rev is None:
        shutil.copytree(
            ROOT / "isolator", dest / "isolator", ignore=shutil.ignore_patterns("__pycache__")
        )
        head = _git("rev-parse", "--short", "HEAD")
        dirty = _git("status", "--porcelain", "--", "isolator")
        return head + ("+worktree" if dirty else "")
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "isolator"], capture_output=True, check=False
    )
    if archive.returncode != 0:
        raise SystemExit(f"bench_commits: error: no revision {rev!r} in this repository")
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return _git("rev-parse", "--short", rev)


@contextlib.contextmanager
def _store_of(suite: Path, stores: Path, label: str) -> Iterator[None]:
    """``label``'s own ``.isolator`` store in place in ``suite`` while its run lasts."""
    here, kept = suite / ".isolator", stores / label
    if kept.exists():
        os.replace(kept, here)
    try:
        yield
    finally:
        if here.exists():
            os.replace(here, kept)


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def _check_import(info: suites.SuiteInfo, env: dict[str, str], where: Path) -> None:
    got = subprocess.run(
        [str(info.python), "-c", "import isolator; print(isolator.__file__)"],
        env=env,
        cwd=info.path,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if not got.startswith(str(where)):
        raise SystemExit(f"bench_commits: error: {info.name} imports isolator from {got!r}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="revision to compare against")
    ap.add_argument("--head", default=None, help="revision to measure (default: working tree)")
    ap.add_argument("--suites", default="gen,six,marshmallow")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--out", default=str(RESULTS / "commits"))
    args = ap.parse_args(argv)
    err = harness.missing_plotting("bench_commits")
    if err:
        print(err, file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="isolator-commits-"))
    try:
        base_dir, head_dir = work / "base", work / "head"
        base_id = _export(args.base, base_dir)
        head_id = _export(args.head, head_dir)
        report: dict[str, Any] = {
            "measured": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "base": base_id,
            "head": head_id,
            "repeat": args.repeat,
            "suites": {},
        }
        rows = []
        for name in [s for s in args.suites.split(",") if s]:
            info = suites.prepare(name)
            env = info.env()
            report["python"] = info.python_version()  # the suites' (ISOLATOR_SUITE_PYTHON)
            configs: dict[str, tuple[list[str], dict[str, str]]] = {}
            for label, where, cmd in (
                ("plain", head_dir, info.pytest_cmd()),
                ("base", base_dir, info.isolator_cmd("minimal")),
                ("head", head_dir, info.isolator_cmd("minimal")),
            ):
                e = dict(env, PYTHONPATH=str(where))
                if label != "plain":
                    _check_import(info, e, where)
                configs[label] = (cmd, e)
            walls: dict[str, list[float]] = {k: [] for k in configs}
            counts: dict[str, dict[str, int]] = {}
            labels = list(configs)
            stores = work / f"{name}-stores"
            stores.mkdir()
            own = info.path / ".isolator"
            if own.exists():
                os.replace(own, stores / "suite")
            try:
                for rep in range(args.repeat + 1):
                    order = labels[rep % 3 :] + labels[: rep % 3]
                    for label in order:
                        cmd, e = configs[label]
                        with _store_of(info.path, stores, label):
                            res = harness.measure(cmd, info.path, e, work / f"{name}-{label}.log")
                        if res.rc not in (0, 1):
                            raise SystemExit(
                                f"bench_commits: error: {name} {label} exited {res.rc}: "
                                f"{harness.tail(res.log)}"
                            )
                        counts[label] = res.counts
                        if rep:  # the first round is the warm-up
                            walls[label].append(res.wall_s)
                        print(
                            f"[{name}] rep {rep}/{args.repeat} {label:5s} {res.wall_s:.2f}s",
                            flush=True,
                        )
            finally:
                if (stores / "suite").exists() and not own.exists():
                    os.replace(stores / "suite", own)
            if not (counts["plain"] == counts["base"] == counts["head"]):
                raise SystemExit(f"bench_commits: error: {name}: outcomes differ: {counts}")
            med = {k: statistics.median(v) for k, v in walls.items()}
            paired = {
                k: statistics.median(a / p for a, p in zip(walls[k], walls["plain"]))
                for k in ("base", "head")
            }
            report["suites"][name] = {
                "walls": walls,
                "median": med,
                "paired": paired,
                "counts": counts["plain"],
            }
            rows.append(
                [
                    name,
                    f"{med['plain']:.3f}",
                    f"{med['base']:.3f}",
                    f"{med['base'] / med['plain']:.3f}",
                    f"{paired['base']:.3f}",
                    f"{med['head']:.3f}",
                    f"{med['head'] / med['plain']:.3f}",
                    f"{paired['head']:.3f}",
                    f"{med['head'] / med['base']:.3f}",
                ]
            )
        headers = [
            "suite",
            "plain s",
            f"{base_id} s",
            "x plain",
            "paired x",
            f"{head_id} s",
            "x plain",
            "paired x",
            "head / base",
        ]
        print(tabulate(rows, headers=headers))
        (out / "commits.json").write_text(json.dumps(report, indent=1) + "\n")
        _plot(report, out / "commits.png")
        print(f"wrote {out / 'commits.json'} and commits.png")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(report["suites"])
    fig, ax = plt.subplots(figsize=(2 + 2 * len(names), 4))
    width = 0.35
    for k, (label, rev) in enumerate((("base", report["base"]), ("head", report["head"]))):
        ys = [report["suites"][n]["paired"][label] for n in names]
        ax.bar([i + (k - 0.5) * width for i in range(len(names))], ys, width, label=rev)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.axhline(1.10, color="red", linestyle="--", linewidth=0.8, label="target 1.10x")
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("isolator run --reset=minimal / plain (paired median)")
    ax.set_ylim(0.9, max(1.3, *(s["paired"]["base"] + 0.05 for s in report["suites"].values())))
    ax.legend()
    ax.set_title(f"{report['repeat']} interleaved repeats, Python {report['python']}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    raise SystemExit(main())
