"""Run a test suite in chosen orders, each run in a fresh copy, and read per-test outcomes.

Helpers for the fidelity tests (and for anyone who needs a suite's isolated outcomes):

* every run happens in its own fresh copy of the suite, because suites with planted state
  (``tests/data/statekinds``) change files under their own directory;
* an order is a list of node ids given explicitly on the pytest command line: pytest keeps
  the argument order for node ids, within a file and across files (checked by
  ``tests/test_fidelity.py::test_pytest_keeps_node_id_argument_order``);
* outcomes are read from ``--junitxml`` with ElementTree and mapped back to node ids.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

Outcomes = dict[str, str]  # node id -> "passed" | "failed" | "error" | "skipped" | "missing"

_COPY_IGNORE = shutil.ignore_patterns("__pycache__", ".pytest_cache", ".isolator", "*.pyc")
_counter = itertools.count()

# Environment variables of the outer run that must not reach the suites under test.
_ENV_DROP_PREFIXES = ("PYTEST_", "SK_", "SHOPKIT_", "COV_CORE_")


@dataclass(frozen=True)
class Run:
    """One pytest run of a suite: the order given, outcomes per node id, and the process."""

    order: tuple[str, ...]
    outcomes: Outcomes
    returncode: int
    output: str

    def describe(self) -> str:
        return f"exit {self.returncode}\n{self.output[-4000:]}"


def clean_env(mode: str | None = None) -> dict[str, str]:
    """The outer environment without pytest's and the suites' own variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_ENV_DROP_PREFIXES)}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("PYTHONWARNINGS", None)
    if mode is None:
        # Plain runs need no third-party plugin (the suites use only pytest's own), and
        # not loading them halves the start-up time of the many one-test runs.
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


def fresh_copy(src: Path, parent: Path) -> Path:
    """Copy the suite at ``src`` to a new directory under ``parent`` and return it."""
    dest = parent / f"{src.name}-{next(_counter)}"
    shutil.copytree(src, dest, ignore=_COPY_IGNORE)
    return dest


def pytest_command(mode: str | None) -> list[str]:
    """The command that starts pytest: plain (``mode=None``) or ``isolator run --reset=MODE``."""
    if mode is None:
        # Plain pytest, with isolator's auto-loaded plugin blocked so that nothing of it runs.
        return [sys.executable, "-m", "pytest", "-p", "no:isolator"]
    return [sys.executable, "-m", "isolator", "run", f"--reset={mode}"]


def collect(src: Path, parent: Path) -> list[str]:
    """Node ids of the suite in declared order."""
    root = fresh_copy(src, parent)
    proc = subprocess.run(
        [*pytest_command(None), "-p", "no:cacheprovider", "--collect-only", "-q"],
        cwd=root,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    ids = [line for line in proc.stdout.splitlines() if "::" in line and " " not in line]
    if proc.returncode != 0 or not ids:
        raise RuntimeError(f"collection failed in {root}:\n{proc.stdout}\n{proc.stderr}")
    return ids


def junit_key(nodeid: str) -> tuple[str, str]:
    """(classname, name) under which pytest's junitxml reports ``nodeid``."""
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    return ".".join(names[:-1]), names[-1]


def parse_junit(xml_path: Path, nodeids: Iterable[str]) -> Outcomes:
    """Outcome of each of ``nodeids`` in a junitxml report ("missing" if not reported)."""
    found: dict[tuple[str, str], str] = {}
    if xml_path.exists():
        for case in ET.parse(xml_path).getroot().iter("testcase"):
            key = (case.get("classname", ""), case.get("name", ""))
            tags = {child.tag for child in case}
            # A teardown error is reported next to the call's result; the error wins.
            if "error" in tags:
                outcome = "error"
            elif "failure" in tags:
                outcome = "failed"
            elif "skipped" in tags:
                outcome = "skipped"
            else:
                outcome = "passed"
            if found.get(key) not in ("error", "failed"):
                found[key] = outcome
    return {nodeid: found.get(junit_key(nodeid), "missing") for nodeid in nodeids}


def run_order(
    src: Path,
    order: Sequence[str],
    parent: Path,
    *,
    mode: str | None = None,
    extra: Sequence[str] = (),
    timeout: float = 300,
) -> Run:
    """Run ``order`` (explicit node ids, in that order) in a fresh copy of ``src``."""
    root = fresh_copy(src, parent)
    report = root.parent / f"{root.name}.junit.xml"
    cmd = [
        *pytest_command(mode),
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        f"--junitxml={report}",
        *extra,
        *order,
    ]
    proc = subprocess.run(
        cmd,
        cwd=root,
        env=clean_env(mode),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    output = f"$ {' '.join(cmd[1:])}\n{proc.stdout}{proc.stderr}"
    outcomes = parse_junit(report, order)
    # The copy has served its purpose (the output above says what happened in it).
    shutil.rmtree(root, ignore_errors=True)
    report.unlink(missing_ok=True)
    return Run(tuple(order), outcomes, proc.returncode, output)


def isolated_outcomes(
    src: Path, nodeids: Sequence[str], parent: Path, workers: int = 2
) -> Outcomes:
    """Each test's outcome alone in a fresh interpreter (and a fresh copy of the suite)."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        runs = list(pool.map(lambda n: run_order(src, [n], parent), nodeids))
    return {run.order[0]: run.outcomes[run.order[0]] for run in runs}


def run_many(
    src: Path, orders: Sequence[Sequence[str]], parent: Path, workers: int = 2
) -> list[Run]:
    """Plain-pytest runs of several orders, in parallel."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda o: run_order(src, o, parent), orders))


def named_orders(nodeids: Sequence[str], seeds: Iterable[int]) -> dict[str, list[str]]:
    """Forward, reversed, and one shuffled order per seed."""
    result = {"forward": list(nodeids), "reversed": list(reversed(nodeids))}
    for seed in seeds:
        shuffled = list(nodeids)
        random.Random(seed).shuffle(shuffled)
        result[f"random-{seed}"] = shuffled
    return result


def differing(expected: Mapping[str, str], run: Run) -> list[str]:
    """Node ids (in run order) whose outcome in ``run`` differs from ``expected``."""
    return [nodeid for nodeid in run.order if run.outcomes[nodeid] != expected[nodeid]]


def verify_manifest(src: Path, parent: Path, workers: int = 2) -> list[str]:
    """Check an EXPECTED.json exhaustively against plain pytest; one line per disagreement.

    For every planted target T and every other test X: ``X, T`` breaks T iff X is a listed
    polluter, ``X, T`` fixes a brittle T iff X is a listed state-setter, and ``P, X, T`` fixes
    a victim iff X is a listed cleaner of (P, T).  Quadratic in the suite size (the statekinds
    suite needs ~2,700 runs): a maintenance tool for the data suites, not a test.
    """
    manifest = json.loads((src / "EXPECTED.json").read_text(encoding="utf-8"))
    ids = collect(src, parent)
    sources: dict[tuple[str, str], set[str]] = {}
    cleaners: dict[tuple[str, str], set[str]] = {}
    for dep in manifest["dependencies"]:
        sources.setdefault((dep["kind"], dep["target"]), set()).add(dep["source"])
        if dep["kind"] == "polluter":
            cleaners[(dep["source"], dep["target"])] = set(dep["cleaners"])
    # (order, whether the listed manifest says the target passes at the end)
    checks: list[tuple[tuple[str, ...], bool]] = []
    for (kind, target), srcs in sources.items():
        for x in ids:
            if x != target:
                listed = x in srcs
                checks.append(((x, target), listed if kind == "state-setter" else not listed))
    for (polluter, victim), cs in cleaners.items():
        checks += [((polluter, x, victim), x in cs) for x in ids if x not in (polluter, victim)]
    runs = run_many(src, [order for order, _ in checks], parent, workers)
    return [
        f"{' -> '.join(order)}: {order[-1]} {run.outcomes[order[-1]]}, manifest says "
        f"{'passed' if passes else 'failed'}"
        for (order, passes), run in zip(checks, runs, strict=True)
        if (run.outcomes[order[-1]] == "passed") != passes
    ]


if __name__ == "__main__":
    # python tests/_orders.py SUITE_DIR: verify SUITE_DIR/EXPECTED.json exhaustively.
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        problems = verify_manifest(Path(sys.argv[1]).resolve(), Path(tmp))
    print("\n".join(problems) or "manifest verified")
    sys.exit(1 if problems else 0)
