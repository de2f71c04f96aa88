"""Measure one pytest run: wall time, CPU time and peak RSS of its process tree, and outcomes.

Each run goes through a tiny wrapper interpreter that spawns the command, waits for it and
reads ``getrusage(RUSAGE_CHILDREN)``: ``ru_maxrss`` there is the largest peak RSS of any
descendant that was waited for (pytest, the child ``isolator run`` supervises, forked test
processes), and ``ru_utime + ru_stime`` is the CPU time of the whole tree. The wrapper's own
memory is not counted. Per-test outcomes come from ``--junitxml``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path

# The wrapper waits with a blocking wait() and a timer thread for the timeout: a wait with
# a timeout polls with sleeps of up to 50 ms, which quantised every wall time to 50 ms.
_WRAPPER = r"""
import json, resource, subprocess, sys, threading, time
cmd, cwd, log, timeout = json.loads(sys.argv[1])
expired = []
t0 = time.perf_counter()
with open(log, "wb") as fh:
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
        timer = threading.Timer(timeout, lambda: (expired.append(1), proc.kill()))
        timer.start()
        rc = proc.wait()
        timer.cancel()
        if expired:
            rc = -999
    except OSError as exc:
        fh.write(str(exc).encode())
        rc = -998
wall = time.perf_counter() - t0
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": rc, "wall_s": wall, "maxrss_kb": ru.ru_maxrss,
                  "cpu_s": ru.ru_utime + ru.ru_stime}))
"""

# Worst first: when junit reports one test twice (call failed, teardown errored) keep the worst.
_RANK = {"error": 0, "failed": 1, "passed": 2, "xpassed": 2, "xfailed": 3, "skipped": 3}
_SUMMARY_RE = re.compile(
    r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected|warnings?)"
)


@dataclasses.dataclass
class Outcome:
    """Outcome of one test case as junitxml reports it."""

    outcome: str  # passed | failed | error | skipped | xfailed
    message: str = ""
    seconds: float = 0.0  # junit's time: setup + call + teardown as pytest measured them


@dataclasses.dataclass
class RunResult:
    """One measured run."""

    rc: int
    wall_s: float
    cpu_s: float
    maxrss_kb: int
    counts: dict[str, int]
    outcomes: dict[str, Outcome]  # junit key -> outcome
    log: Path
    junit_ok: bool

    def summary(self) -> dict[str, object]:
        return {
            "rc": self.rc,
            "wall_s": round(self.wall_s, 4),
            "cpu_s": round(self.cpu_s, 4),
            "maxrss_kb": self.maxrss_kb,
            "counts": self.counts,
        }


def junit_key(nodeid: str) -> str:
    """The ``classname::name`` junitxml gives a node id (pytest's own address mangling)."""
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    return ".".join(names[:-1]) + "::" + names[-1]


def parse_junit(path: Path) -> dict[str, Outcome]:
    """Per-test outcomes from a junitxml file, keyed by ``classname::name``."""
    out: dict[str, Outcome] = {}
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        key = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome, message = "passed", ""
        for child in case:
            tag = child.tag
            if tag in ("failure", "error"):
                outcome = "failed" if tag == "failure" else "error"
                message = child.get("message", "") or (child.text or "").strip()[-300:]
                break
            if tag == "skipped":
                kind = child.get("type", "")
                outcome = "xfailed" if kind == "pytest.xfail" else "skipped"
                message = child.get("message", "")
        message = message.strip().splitlines()[0][:300] if message.strip() else ""
        try:
            seconds = float(case.get("time", "0") or 0)
        except ValueError:
            seconds = 0.0
        prev = out.get(key)
        if prev is None or _RANK[outcome] < _RANK[prev.outcome]:
            out[key] = Outcome(outcome, message, seconds + (prev.seconds if prev else 0.0))
        else:
            prev.seconds += seconds
    return out


def parse_summary(log_text: str) -> dict[str, int]:
    """Counts from pytest's final summary line (``== 3 passed, 1 failed in 0.2s ==``)."""
    for line in reversed(log_text.splitlines()):
        if re.search(r" in [\d.]+s", line) and _SUMMARY_RE.search(line):
            counts: dict[str, int] = {}
            for num, word in _SUMMARY_RE.findall(line):
                word = {"error": "errors", "warning": "warnings"}.get(word, word)
                counts[word] = counts.get(word, 0) + int(num)
            return counts
    return {}


def measure(
    cmd: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    log: Path,
    junit: Path | None = None,
    timeout: float = 3600.0,
) -> RunResult:
    """Run ``cmd`` (pytest args get ``--junitxml=junit`` appended) and measure it."""
    full = list(cmd)
    if junit is not None:
        junit.unlink(missing_ok=True)
        full.append(f"--junitxml={junit}")
    payload = json.dumps([full, str(cwd), str(log), timeout])
    proc = subprocess.run(
        [sys.executable, "-c", _WRAPPER, payload],
        env=dict(env),
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RuntimeError(f"measuring wrapper failed: {proc.stderr.strip()[-500:]}") from None
    text = log.read_text(errors="replace") if log.exists() else ""
    outcomes: dict[str, Outcome] = {}
    junit_ok = False
    if junit is not None and junit.exists():
        try:
            outcomes = parse_junit(junit)
            junit_ok = True
        except ET.ParseError:
            junit_ok = False
    return RunResult(
        rc=int(data["rc"]),
        wall_s=float(data["wall_s"]),
        cpu_s=float(data["cpu_s"]),
        maxrss_kb=int(data["maxrss_kb"]),
        counts=parse_summary(text),
        outcomes=outcomes,
        log=log,
        junit_ok=junit_ok,
    )


def collect(cmd: Sequence[str], cwd: Path, env: Mapping[str, str]) -> list[str]:
    """Node ids in declared order (``pytest --collect-only -q``)."""
    proc = subprocess.run(
        [*cmd, "--collect-only", "-q"],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    nodes: list[str] = []
    # -q prints one node id a line (ids may contain spaces), then a blank line and a summary.
    for line in proc.stdout.splitlines():
        if not line.strip():
            break
        if "::" in line:
            nodes.append(line.rstrip("\n"))
    return nodes


def missing_plotting(tool: str) -> str | None:
    """The one-line error for a benchmark started without matplotlib, found before its
    long runs rather than when it draws the plot at the end; None when it is there."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return (
            f"{tool}: error: matplotlib is not installed (it draws the plot); "
            "install the benchmark extras: pip install -e '.[bench]'"
        )
    return None


def tail(path: Path, lines: int = 8) -> str:
    """Last lines of a log, for error reports."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return os.linesep.join(text.splitlines()[-lines:])


def _base(key: str) -> str:
    return key.partition("[")[0]


def compare(
    ref: Mapping[str, Outcome], got: Mapping[str, Outcome]
) -> list[tuple[str, str, str, str]]:
    """Differences ``(ref key, got key, ref outcome, got outcome)`` between two runs.

    Tests are matched by junit key; keys present in only one run (parametrize ids that embed
    the current time, as marshmallow's do) are then paired in run order within the same
    test function, and only an outcome difference or an unpaired test counts.
    """
    diffs: list[tuple[str, str, str, str]] = []
    for key in ref:
        if key in got and ref[key].outcome != got[key].outcome:
            diffs.append((key, key, ref[key].outcome, got[key].outcome))
    only_ref = [k for k in ref if k not in got]
    only_got = [k for k in got if k not in ref]
    pending: dict[str, list[str]] = {}
    for key in only_got:
        pending.setdefault(_base(key), []).append(key)
    for key in only_ref:
        partners = pending.get(_base(key))
        if partners:
            other = partners.pop(0)
            if ref[key].outcome != got[other].outcome:
                diffs.append((key, other, ref[key].outcome, got[other].outcome))
        else:
            diffs.append((key, "", ref[key].outcome, "missing"))
    for rest in pending.values():
        diffs.extend(("", key, "missing", got[key].outcome) for key in rest)
    return diffs
