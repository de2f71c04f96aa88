"""Benchmark the dependency-aware scheduler: ``-n 2`` with constraints vs serial.

Suites:

* ``gen``: the generated project (``experiments/gen_suite.py``, 2,000 tests over 40 modules)
  with planted order dependencies appended to its test modules: state-setter chains whose
  members sit in different modules, and polluter/victim pairs, all on a ``benchstate``
  module's dict.  The matching ``.isolator/deps.json`` is written next to it.  Each test can
  be given a CPU cost (``--cost-ms``, an autouse fixture burning that much thread CPU time)
  to model suites whose tests do real work; the generated tests take well under 1 ms.
* ``parso`` (real suite, prepared by ``experiments/suites.py``): ~2,000 tests and one
  confirmed polluter (``test_change_and_undo`` breaks ``test_simple`` in the same process).
  It runs in a private copy, so the shared prepared suite never sees our ``deps.json``.
* ``mpmath`` (real suite, ``suites.py``): ~340 CPU-bound tests of pure-Python arithmetic
  (about 25 s serially; ``-m 'not slow'`` as its recipe says), the case ``-n`` is for.  Its
  dependencies are the ones ``isolator deps`` confirms on it (``MPMATH_DEPS``); private copy
  as for parso.

Under ``-n 2`` isolator's scheduler records each test's duration in
``.isolator/durations.json`` and deals the long tests out first in the next run: the
suites' copies are fresh for each invocation, so the first ``-n 2`` run of a suite (of
``n2+iso`` and ``run-n2``, whichever comes first) has no record yet.

Configurations: ``serial`` (plain pytest, isolator blocked), ``serial+iso`` (isolator's
scheduler, ``--reset=none``), ``n2+iso`` (``-n 2``, isolator's xdist scheduler),
``n2+load`` (plain ``-n 2 --dist load``), ``run`` (``isolator run``: supervised,
``--reset=minimal``) and ``run-n2`` (``isolator run -n 2``).  ``n2+iso`` is compared with
``serial``, ``run-n2`` with ``run``.  Repeats are interleaved.  Violations: a tiny plugin
(``PYTEST_PLUGINS``) records each process's execution sequence, which is checked against
the constraints of the run's reset mode (chains whole and in order on one worker, and back
to back where isolator resets between tests; victims before their polluters where it does
not); failed dependent tests are counted.  The same plugin notes each pytest process's CPU
time: ``main cpu s`` is the controller's share of an ``-n 2`` run (the whole run's CPU,
``cpu s``, also counts the workers and any supervisor).

Before each repeat of a suite and after the last, ``machine_ceiling`` measures what two
processes can get out of the machine at that moment (two copies of a CPU-bound loop against
one: 2.0x on two free CPUs); it is printed and kept as the row's ``ceiling``.

Byte-code caching is on (``PYTHONDONTWRITEBYTECODE`` is dropped) and each suite gets an
untimed warm-up run: otherwise every process re-does pytest's assertion rewriting of every
test module, which no user's machine does, and ``-n 2`` pays it once per worker.

Usage::

    python experiments/bench_sched.py [--repeat 3] [--cost-ms 0,5] [--suites gen,parso,mpmath]
                                      [--configs serial,n2+iso,run,run-n2]

Writes experiments/results/sched.json and sched.png (``--out NAME``: NAME.json, NAME.png);
prints a table with the speed-ups of each ``-n 2`` configuration over its serial one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
from tabulate import tabulate  # noqa: E402

from isolator import scheduler  # noqa: E402
from isolator._store import save_graph  # noqa: E402
from isolator._types import Dependency, DependencyGraph  # noqa: E402

EXPERIMENTS = Path(__file__).resolve().parent
RESULTS = EXPERIMENTS / "results"
WORK = EXPERIMENTS / "work" / "sched"
CONFIGS = ("serial", "serial+iso", "n2+iso", "n2+load", "run", "run-n2")
# Each -n 2 configuration and the serial one it is compared with.
BASELINE = {"n2+iso": "serial", "n2+load": "serial", "run-n2": "run"}
RESET = {"run": "minimal", "run-n2": "minimal"}  # the others: plain pytest state sharing
# Configurations a suite cannot run, and why (printed, and kept in the JSON's "skipped").
SKIP: dict[str, dict[str, str]] = {}

_PLANT_MARK = "# --- planted by bench_sched.py ---"
_COST_FIXTURE = """

# --- bench_sched.py: per-test CPU cost (BENCH_COST_MS) ---
import time as _bench_time

_BENCH_COST = float(__import__("os").environ.get("BENCH_COST_MS", "0")) / 1000.0


@pytest.fixture(autouse=True)
def _bench_cost():
    # CPU time, not wall time: on a shared machine a test does the same work whatever
    # else runs, and the CPU columns of serial and -n 2 runs stay comparable.
    end = _bench_time.thread_time() + _BENCH_COST
    while _bench_time.thread_time() < end:
        pass
    yield
"""


# Loaded in every pytest process of a run (PYTEST_PLUGINS): records per process the order
# the tests ran in, so timing runs stay -q (a -v terminal costs the xdist controller time).
_RECORDER = """\"\"\"Per-process execution order for bench_sched.py.\"\"\"
import os

_state = {"out": None, "config": None}


def pytest_configure(config):
    _state["config"] = config
    # Opened before the tests: isolator restores files that tests (and hooks running
    # inside a test's protocol) create, not writes to a file that was already open.
    name = os.environ.get("PYTEST_XDIST_WORKER", "main")
    path = os.path.join(os.environ["BENCH_ORDER_DIR"], name + ".txt")
    _state["out"] = open(path, "a", encoding="utf-8")


def pytest_runtest_logreport(report):
    if _state["config"].pluginmanager.has_plugin("dsession"):
        return  # the xdist controller sees every worker's reports
    if report.when == "call" or (report.when == "setup" and not report.passed):
        _state["out"].write(report.outcome + " " + report.nodeid + "\\n")


def pytest_unconfigure(config):
    if _state["out"] is not None:
        _state["out"].close()
    # This process's CPU time so far (the controller's share of an xdist run).
    import resource

    ru = resource.getrusage(resource.RUSAGE_SELF)
    name = os.environ.get("PYTEST_XDIST_WORKER", "main")
    path = os.path.join(os.environ["BENCH_ORDER_DIR"], name + ".cpu")
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(f"{ru.ru_utime + ru.ru_stime:.3f}\\n")
"""


# The machine's own ceiling for two processes: the same pure-Python loop run once alone and
# then twice at the same time.  On a shared or virtual machine two busy CPUs do not give
# twice the work of one (other load, SMT siblings, a host's CPU quota); a -n 2 speed-up
# is to be read against this number, measured next to the runs.
_BURN = "import time\nt=time.perf_counter()\nd={}\nfor i in range(4_000_000): d[i % 997] = i\n"


def machine_ceiling() -> float:
    """Wall time of one burn alone, times two, over that of two burns side by side."""
    cmd = [sys.executable, "-c", _BURN]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    alone = time.perf_counter() - t0
    t0 = time.perf_counter()
    procs = [subprocess.Popen(cmd) for _ in range(2)]
    for proc in procs:
        proc.wait()
    pair = time.perf_counter() - t0
    return 2 * alone / pair


class BenchError(Exception):
    """A benchmark step failed; one-line message."""


# -- suites -----------------------------------------------------------------------------------


def _make_gen(dest: Path, chains: int, pairs: int, seed: int) -> tuple[Path, list[Dependency]]:
    """The generated suite plus planted dependencies; returns (root, dependencies)."""
    try:
        import gen_suite
    except ImportError as exc:
        raise BenchError(f"experiments/gen_suite.py unavailable ({exc})") from None
    gen = dest / "gen"
    if gen.exists():
        shutil.rmtree(gen)
    gen_suite.generate(gen, modules=40, tests=2000, seed=0)
    (gen / "benchstate.py").write_text('"""State the planted tests share."""\n\nSTATE = {}\n')
    conftest = gen / "tests" / "conftest.py"
    conftest.write_text(conftest.read_text() + _COST_FIXTURE)
    rng = random.Random(seed)
    modules = sorted(p.name for p in (gen / "tests").glob("test_m*.py"))
    added: dict[str, list[str]] = {m: [] for m in modules}
    deps: list[Dependency] = []

    def put(module: str, name: str, body: str) -> str:
        added[module].append(f"def {name}():\n    {body}\n")
        return f"tests/{module}::{name}"

    for k in range(chains):
        # Members in increasing module order, so the declared order passes serially.
        length = rng.choice((2, 2, 3))
        mods = sorted(rng.sample(modules, length))
        ids = [put(mods[0], f"test_zz_set_{k}", f'_bs.STATE["c{k}"] = 1')]
        for j, mod in enumerate(mods[1:], 1):
            ids.append(
                put(
                    mod,
                    f"test_zz_need_{k}_{j}",
                    f'assert _bs.STATE.get("c{k}") == {j}; _bs.STATE["c{k}"] = {j + 1}',
                )  # fmt: skip
            )
        for a, b in zip(ids, ids[1:], strict=False):
            deps.append(Dependency("state-setter", a, b, (f"benchstate:STATE['c{k}']",), True))
    for k in range(pairs):
        early, late = sorted(rng.sample(modules, 2))
        victim = put(early, f"test_zz_victim_{k}", f'assert "p{k}" not in _bs.STATE')
        polluter = put(late, f"test_zz_pollute_{k}", f'_bs.STATE["p{k}"] = 1')
        deps.append(Dependency("polluter", polluter, victim, (f"benchstate:STATE['p{k}']",), True))
    for mod, funcs in added.items():
        if funcs:
            path = gen / "tests" / mod
            text = "\n\n".join(funcs)
            path.write_text(
                f"{path.read_text()}\n\n{_PLANT_MARK}\nimport benchstate as _bs  # noqa: E402\n\n\n"
                + text
            )
    return gen, deps


def _copy_suite(dest: Path, name: str) -> tuple[Path, Any]:
    """A private copy of a prepared real suite; returns (root, suites.SuiteInfo)."""
    import suites

    info = suites.prepare(name)
    copy = dest / name
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(
        info.path,
        copy,
        ignore=shutil.ignore_patterns(".venv", ".isolator", ".pytest_cache", "__pycache__"),
    )
    return copy, info


def _make_parso(dest: Path) -> tuple[Path, Path, list[Dependency]]:
    """A private copy of the prepared parso suite; returns (root, python, dependencies)."""
    copy, info = _copy_suite(dest, "parso")
    p = "test/test_diff_parser.py::test_change_and_undo"
    v = "test/test_diff_parser.py::test_simple"
    return copy, info.python, [Dependency("polluter", p, v, ("parso.cache:parser_cache",), True)]


# What `isolator deps -p no:cacheprovider -p no:randomly -m "not slow" mpmath/tests` confirmed
# on mpmath 1.3.0 (see experiments/README.md, "Scheduler benchmark").
MPMATH_DEPS: tuple[Dependency, ...] = ()


def _make_mpmath(dest: Path) -> tuple[Path, Path, list[str], list[Dependency]]:
    """A private copy of the prepared mpmath suite; returns (root, python, args, deps)."""
    copy, info = _copy_suite(dest, "mpmath")
    # The recipe's options past -p no:cacheprovider (which _cmd passes anyway): -m "not slow".
    extra = [o for o in info.options if o not in ("-p", "no:cacheprovider")]
    return copy, info.python, [*extra, *info.targets], list(MPMATH_DEPS)


# -- runs -------------------------------------------------------------------------------------


def _cmd(python: Path, config: str, targets: list[str]) -> list[str]:
    opts = ["-q", "-p", "no:randomly", "-p", "no:cacheprovider"]
    base = [str(python), "-m", "pytest", *opts]
    plain = ["-p", "no:isolator"]
    if config == "run":
        return [str(python), "-m", "isolator", "run", *opts, *targets]
    if config == "run-n2":
        return [str(python), "-m", "isolator", "run", *opts, "-n", "2", *targets]
    if config == "serial":
        return [*base, *plain, *targets]
    if config == "serial+iso":
        return [*base, "--reset=none", *targets]
    if config == "n2+iso":
        return [*base, "--reset=none", "-n", "2", *targets]
    if config == "n2+load":
        return [*base, *plain, "-n", "2", "--dist", "load", *targets]
    raise BenchError(f"unknown configuration {config}")


def read_orders(order_dir: Path) -> tuple[dict[str, list[str]], set[str]]:
    """Per-process execution sequences and failed node ids recorded by ``_RECORDER``."""
    seqs: dict[str, list[str]] = {}
    failed: set[str] = set()
    for f in sorted(order_dir.glob("*.txt")):
        ids: dict[str, None] = {}
        for line in f.read_text(encoding="utf-8").splitlines():
            outcome, _, nodeid = line.partition(" ")
            ids.setdefault(nodeid, None)
            if outcome == "failed":
                failed.add(nodeid)
        if ids:  # the xdist controller's file stays empty
            seqs[f.stem] = list(ids)
    return seqs, failed


def violations(
    seqs: dict[str, list[str]], graph: DependencyGraph, reset: str = "none"
) -> list[str]:
    """Broken constraints in the per-process sequences under ``reset``."""
    everything = [t for seq in seqs.values() for t in seq]
    c = scheduler.build_constraints(graph, everything, reset)
    where = {t: w for w, seq in seqs.items() for t in seq}
    bad: list[str] = []
    for e in c.edges:
        if e.kind == "state-setter" and e.before in where and where[e.before] != where[e.after]:
            bad.append(f"split chain {e.before} | {e.after}")
    for seq in seqs.values():
        # Plain pytest keeps state between any two tests: order matters, adjacency not;
        # isolator resets between tests except inside a chain, which must be back to back.
        bad.extend(scheduler.violations(seq, c, contiguous=reset != "none"))
    return bad


def run_config(suite: dict[str, Any], config: str, cost_ms: float, scratch: Path) -> dict[str, Any]:
    order_dir = scratch / f"{suite['name']}-{config}.order"
    shutil.rmtree(order_dir, ignore_errors=True)
    order_dir.mkdir(parents=True)
    env = _env()
    env["BENCH_COST_MS"] = str(cost_ms)
    env["BENCH_ORDER_DIR"] = str(order_dir)
    env["PYTEST_PLUGINS"] = "_bench_order"
    env["PYTHONPATH"] = str(scratch)
    env["PYTHONHASHSEED"] = "0"
    log = scratch / f"{suite['name']}-{config}.log"
    cmd = _cmd(suite["python"], config, suite["targets"])
    res = harness.measure(cmd, suite["root"], env, log, timeout=1800)
    seqs, failed = read_orders(order_dir)
    cpu = {f.stem: sum(float(x) for x in f.read_text().split()) for f in order_dir.glob("*.cpu")}
    graph: DependencyGraph = suite["graph"]
    dependent = {d.target for d in graph.dependencies} | {d.source for d in graph.dependencies}
    return {
        "wall_s": res.wall_s,
        "cpu_s": res.cpu_s,
        # pytest processes only: "main" (the controller under -n), workers by id
        "cpu_by_process": cpu,
        "rc": res.rc,
        "tests": sum(len(s) for s in seqs.values()),
        "workers": len(seqs),
        "failed": sorted(failed),
        "failed_dependent": sorted(failed & dependent),
        "violations": violations(seqs, graph, RESET.get(config, "none")),
    }


def _env() -> dict[str, str]:
    # Byte-code caching on, as on users' machines (see the module docstring).
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "COV_")) and k != "PYTHONDONTWRITEBYTECODE"
    }


def _write_graph(root: Path, python: Path, targets: list[str], deps: list[Dependency]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    tests = harness.collect(
        [str(python), "-m", "pytest", "-p", "no:isolator", "-p", "no:randomly", *targets],
        root,
        env,
    )
    missing = {e for d in deps for e in (d.source, d.target)} - set(tests)
    if missing:
        raise BenchError(f"planted tests not collected: {sorted(missing)[:3]}")
    save_graph(root, DependencyGraph(tests=tuple(tests), dependencies=tuple(deps)))


# -- report -----------------------------------------------------------------------------------


def _plot(rows: list[dict[str, Any]], configs: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['suite']}\n{r['cost_ms']:g} ms/test" for r in rows]
    fig, ax = plt.subplots(figsize=(max(6, 2.2 * len(rows)), 4.2))
    width = 0.8 / len(configs)
    colors = {"serial": "#777777", "serial+iso": "#4c72b0", "n2+iso": "#55a868",
              "n2+load": "#c44e52", "run": "#8172b2", "run-n2": "#ccb974"}  # fmt: skip
    for i, config in enumerate(configs):
        xs = [j + (i - (len(configs) - 1) / 2) * width for j in range(len(rows))]
        # A configuration a suite skips (see SKIP) has no bar there.
        ys = [r["configs"].get(config, {}).get("wall_s", 0.0) for r in rows]
        bars = ax.bar(xs, ys, width, label=config, color=colors[config])
        best = [r["configs"].get(config, {}).get("best_s", float("nan")) for r in rows]
        ax.scatter(xs, best, marker="_", s=120, color="black", zorder=3,
                   label="best run" if i == 0 else None)  # fmt: skip
        for bar, r in zip(bars, rows, strict=True):
            v = len(r["configs"].get(config, {}).get("violations", ()))
            if v:
                ax.annotate(f"{v} viol.", (bar.get_x() + width / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=7, color="#c44e52")  # fmt: skip
    ax.set_xticks(range(len(rows)), labels)
    ax.set_ylabel("wall time (s): bars median, ticks best run")
    ax.set_title("isolator scheduler: -n 2 with dependency constraints vs serial")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cost-ms", default="0,5", help="per-test CPU cost(s) for gen, ms")
    parser.add_argument("--suites", default="gen,parso")
    parser.add_argument("--chains", type=int, default=30)
    parser.add_argument("--pairs", type=int, default=15)
    parser.add_argument("--configs", default=",".join(CONFIGS), help="configurations to run")
    parser.add_argument(
        "--out", default="sched", help="results/NAME.json and NAME.png (or a path PREFIX)"
    )
    args = parser.parse_args(argv)
    problem = harness.missing_plotting("bench_sched")
    if problem is not None:
        print(problem, file=sys.stderr)
        return 2
    chosen = [c for c in CONFIGS if c in args.configs.split(",")]
    if set(args.configs.split(",")) - set(CONFIGS) or not chosen:
        print(f"bench_sched: error: bad --configs {args.configs!r}", file=sys.stderr)
        return 2
    try:
        costs = [float(c) for c in args.cost_ms.split(",") if c]
    except ValueError:
        print(f"bench_sched: error: bad --cost-ms {args.cost_ms!r}", file=sys.stderr)
        return 2
    # A bare name goes to results/; a path is taken as given (checked before the long runs).
    out_base = RESULTS / args.out if os.sep not in args.out else Path(args.out).resolve()
    if not out_base.parent.is_dir():
        print(f"bench_sched: error: no directory {out_base.parent} for --out", file=sys.stderr)
        return 2
    names = [s for s in args.suites.split(",") if s]
    unknown = set(names) - {"gen", "parso", "mpmath"}
    if unknown or args.repeat < 1:
        print(f"bench_sched: error: bad --suites/--repeat ({sorted(unknown)})", file=sys.stderr)
        return 2

    load_before = os.getloadavg()
    if load_before[0] > 1.5:
        print(
            f"bench_sched: warning: load average {load_before[0]:.1f} before the runs; "
            "-n 2 timings are unreliable on a busy machine",
            file=sys.stderr,
        )
    WORK.mkdir(parents=True, exist_ok=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    scratch = WORK / "logs"
    scratch.mkdir(exist_ok=True)
    (scratch / "_bench_order.py").write_text(_RECORDER)
    plans: list[dict[str, Any]] = []
    try:
        if "gen" in names:
            root, deps = _make_gen(WORK, args.chains, args.pairs, seed=1)
            _write_graph(root, Path(sys.executable), ["tests"], deps)
            for cost in costs:
                plans.append({"name": "gen", "root": root, "python": Path(sys.executable),
                              "targets": ["tests"], "deps": deps, "cost_ms": cost})  # fmt: skip
        if "parso" in names:
            try:
                root, python, deps = _make_parso(WORK)
            except Exception as exc:  # suites.SuiteUnavailable and build errors
                print(f"bench_sched: skipping parso: {exc}", file=sys.stderr)
            else:
                _write_graph(root, python, ["test"], deps)
                plans.append({"name": "parso", "root": root, "python": python,
                              "targets": ["test"], "deps": deps, "cost_ms": 0.0})  # fmt: skip
        if "mpmath" in names:
            try:
                root, python, targets, deps = _make_mpmath(WORK)
            except Exception as exc:  # suites.SuiteUnavailable and build errors
                print(f"bench_sched: skipping mpmath: {exc}", file=sys.stderr)
            else:
                _write_graph(root, python, targets, deps)
                plans.append({"name": "mpmath", "root": root, "python": python,
                              "targets": targets, "deps": deps, "cost_ms": 0.0})  # fmt: skip
    except (BenchError, OSError) as exc:
        print(f"bench_sched: error: {exc}", file=sys.stderr)
        return 1
    for plan in plans:
        plan["graph"] = DependencyGraph(dependencies=tuple(plan["deps"]))

    rows: list[dict[str, Any]] = []
    for plan in plans:
        # Untimed: byte-code caches of the suite and isolator, files the OS caches.
        run_config(plan, "serial", plan["cost_ms"], scratch)
        mine = [c for c in chosen if c not in SKIP.get(plan["name"], {})]
        for config in chosen:
            if config not in mine:
                print(f"  {plan['name']}: {config} skipped: {SKIP[plan['name']][config]}")
        runs: dict[str, list[dict[str, Any]]] = {c: [] for c in mine}
        ceilings: list[float] = []
        for rep in range(args.repeat):
            ceilings.append(machine_ceiling())
            order = mine[rep % len(mine) :] + mine[: rep % len(mine)]
            for config in order:
                r = run_config(plan, config, plan["cost_ms"], scratch)
                runs[config].append(r)
                print(f"  {plan['name']} cost={plan['cost_ms']:g}ms {config}: "
                      f"{r['wall_s']:.2f}s, {len(r['violations'])} violations, "
                      f"{len(r['failed'])} failed", flush=True)  # fmt: skip
        configs: dict[str, Any] = {}
        for config, rs in runs.items():
            configs[config] = {
                "wall_s": statistics.median(r["wall_s"] for r in rs),
                # Least disturbed run: on a shared machine, other load only adds time.
                "best_s": min(r["wall_s"] for r in rs),
                "cpu_s": statistics.median(r["cpu_s"] for r in rs),
                "main_cpu_s": statistics.median(r["cpu_by_process"].get("main", 0.0) for r in rs),
                "walls": [round(r["wall_s"], 3) for r in rs],
                "tests": rs[0]["tests"],
                "workers": rs[0]["workers"],
                "failed": sorted({f for r in rs for f in r["failed"]}),
                "failed_dependent": sorted({f for r in rs for f in r["failed_dependent"]}),
                "violations": sorted({v for r in rs for v in r["violations"]}),
            }
        for config, base in BASELINE.items():
            if config in configs and base in configs:
                c, b = configs[config], configs[base]
                c["baseline"] = base
                c["speedup"] = b["wall_s"] / c["wall_s"]
                c["speedup_best"] = b["best_s"] / c["best_s"]
                # Runs of one repeat are close in time: their ratio sees the same load.
                c["speedup_paired"] = statistics.median(
                    x["wall_s"] / y["wall_s"] for x, y in zip(runs[base], runs[config], strict=True)
                )
        ceilings.append(machine_ceiling())
        print(f"  {plan['name']}: two-process ceiling of the machine "
              f"{', '.join(f'{c:.2f}x' for c in ceilings)}", flush=True)  # fmt: skip
        first = configs[mine[0]]
        rows.append({
            "suite": plan["name"],
            "cost_ms": plan["cost_ms"],
            "dependencies": len(plan["deps"]),
            "tests": first["tests"],
            "configs": configs,
            # 2 x (one CPU-bound process alone) / (two at once), before each repeat and after.
            "ceiling": [round(c, 3) for c in ceilings],
            "skipped": {c: SKIP[plan["name"]][c] for c in chosen if c not in mine},
        })  # fmt: skip

    table = []
    for r in rows:
        for config in chosen:
            if config not in r["configs"]:
                continue
            c = r["configs"][config]
            speed = [
                f"{c[k]:.2f}x" if k in c else ""
                for k in ("speedup", "speedup_paired", "speedup_best")
            ]
            table.append([
                r["suite"], f"{r['cost_ms']:g}", config, c["tests"], f"{c['wall_s']:.2f}",
                f"{c['best_s']:.2f}", f"{c['cpu_s']:.2f}", f"{c['main_cpu_s']:.2f}",
                c.get("baseline", ""), *speed,
                len(c["violations"]), len(c["failed_dependent"]), len(c["failed"]),
            ])  # fmt: skip
    print(tabulate(table, headers=["suite", "ms/test", "config", "tests", "median s", "best s",
                                   "cpu s", "main cpu s", "vs", "speed-up (median)",
                                   "(paired)", "(best)",
                                   "violations", "dependent failed", "failed"]))  # fmt: skip
    out = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "loadavg_before": load_before,
            "loadavg_after": os.getloadavg(),
        },
        "repeat": args.repeat,
        "rows": rows,
    }
    out_base.with_name(out_base.name + ".json").write_text(json.dumps(out, indent=1) + "\n")
    _plot(rows, chosen, out_base.with_name(out_base.name + ".png"))
    print(f"wrote {out_base}.json and .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
