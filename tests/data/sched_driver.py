"""Run pytest several times in one process and write each run's outcomes as JSON.

Usage: ``python sched_driver.py RUNS.json OUT.json`` with RUNS a list of argument lists,
run from the suite's root.  Before each run the suite's own modules are dropped from
``sys.modules`` and ``os.environ``/``sys.path`` are restored, so every run starts from a
freshly imported suite, as a new interpreter would: this saves the interpreter start-up
per run (tests/test_sched_e2e.py runs dozens of seeds).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import pytest


class Outcomes:
    """Records failed node ids and the number of passed tests of one run."""

    def __init__(self) -> None:
        self.failed: list[str] = []
        self.passed = 0

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self.failed.append(report.nodeid)
        elif report.when == "call" and report.passed:
            self.passed += 1


def _purge(root: str) -> None:
    for name, mod in list(sys.modules.items()):
        path = getattr(mod, "__file__", None) or ""
        if path.startswith(root + os.sep):
            del sys.modules[name]


def main(argv: list[str]) -> int:
    runs_file, out_file = argv
    with open(runs_file, encoding="utf-8") as f:
        runs: list[list[str]] = json.load(f)
    root = os.getcwd()
    env, path = dict(os.environ), list(sys.path)
    results: list[dict[str, Any]] = []
    for args in runs:
        _purge(root)
        os.environ.clear()
        os.environ.update(env)
        sys.path[:] = path
        rec = Outcomes()
        code = pytest.main(args, plugins=[rec])
        results.append(
            {"args": args, "exit": int(code), "failed": rec.failed, "passed": rec.passed}
        )
    with open(out_file, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
