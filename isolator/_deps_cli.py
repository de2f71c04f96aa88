"""``isolator deps`` (find order dependencies) and ``isolator explain NODEID``.

``deps`` drives the phases; every pytest run is a child process that talks to us through
files (see ``_depsplugin.py``)::

    record   pytest -p isolator --reset=minimal --isolator-record=REC  [pytest args]
             (restarted after the tests not yet run if a test kills the interpreter);
             with --isolator-plan=DIR it then serves the confirmation's plans
    detect   candidates: A's net writes meet B's reads            (detector.py)
    confirm  plans of sequences for that process (and a second one when there is much
             to do), within a budget: [A, B] in candidate order, each chunk led by the
             repetitions of what differed; [S, A, B] when A is brittle and S its
             state-setter, and [A, C, B] cleaner trials
    output   table / JSON / graph; .isolator/deps.json for the scheduler and `explain`

Ctrl-C during confirmation keeps what was confirmed: the result is stored and printed,
and the exit status is 130.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, Final

from isolator import detector
from isolator._store import DEPS_FILE, STORE_DIR, StoreError, load_graph, save_graph
from isolator._types import Dependency, DependencyGraph, NodeId

PROG: Final = "isolator deps"
_MAX_RESTARTS: Final = 20
# Rounds after the budgeted one: what its last chunks still ask for (repetitions, cleaners),
# and one more per link of a state-setter chain (a brittle setter is tried after its own
# setter once that one is confirmed).
_MAX_ROUNDS: Final = 12
_MIN_BUDGET: Final = 0.25
# The best-ranked candidates are tried even past the budget (for at most the recording
# run's time): on a small suite the budget is mostly the recording run's start-up.
_MIN_TRIED: Final = 100
# A confirmation sequence running this many times its recorded duration, and at least
# _STALL_FLOOR seconds, is stopped and not judged: an order the suite never runs may make
# a test wait forever (on a lock, a queue, a file another test was to write).
_STALL_FACTOR: Final = 20.0
_STALL_FLOOR: Final = 60.0
_MAX_SET_ASIDE: Final = 200  # costly candidates skipped per chunk (bounds the scan)
_FIRST_ROUND_SHARE: Final = 0.8
_PER_TEST: Final = 0.002  # seconds a confirmation run adds to a test's recorded duration
_RECORD_ONLY_SHOWN: Final = 200  # candidates listed by --record-only
# Options that change which tests run or stop a run early: the recording run and the
# confirmation runs must see the same tests and run them all.
_DROP_FLAGS: Final = frozenset(
    {"-x", "--exitfirst", "--lf", "--last-failed", "--ff", "--failed-first", "--nf",
     "--new-first", "--sw", "--stepwise", "--sw-skip", "--stepwise-skip"}
)  # fmt: skip
_DROP_WITH_VALUE: Final = (
    "--reset", "--maxfail", "--junitxml", "--junit-xml", "-n", "--numprocesses", "--dist",
)  # fmt: skip


class DepsError(Exception):
    """A one-line message for the user; ``code`` is the exit status."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


# ------------------------------------------------------------------------- arguments


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        allow_abbrev=False,
        description="Find the order dependencies between tests from one recorded run, "
        "confirm them with targeted reruns, and name the shared state. Arguments not "
        "listed here go to pytest unchanged (paths, -k, -m, -p ...).",
    )
    p.add_argument("--format", choices=("table", "json"), default="table", help="output format")
    p.add_argument(
        "--output",
        metavar="FILE",
        help="write the output here (with --format json, the table still goes to stdout)",
    )
    p.add_argument(
        "--graph", metavar="FILE", help="also draw the graph: FILE.dot, FILE.svg or FILE.html"
    )
    p.add_argument(
        "--record-only",
        action="store_true",
        help="only the recording run: report candidates, confirm nothing",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=0,
        metavar="N",
        help="confirmation processes in parallel (default: 2 when there is enough work)",
    )
    p.add_argument(
        "--budget",
        type=float,
        default=0.5,
        metavar="F",
        help="confirmation: about F times the recording run's time (at least "
        f"{_MIN_BUDGET:g} s and the {_MIN_TRIED} most likely candidates); candidates "
        "left over are reported unconfirmed (the repetitions and cleaner trials of what "
        "differed are always run); 0 = no limit (default 0.5)",
    )
    p.add_argument(
        "--max-cleaners",
        type=int,
        default=30,
        metavar="N",
        help="cleaner candidates tried per polluter/victim pair (default 30; 0 = none)",
    )
    p.add_argument(
        "--stall-timeout",
        type=float,
        default=_STALL_FLOOR,
        metavar="S",
        help="stop a confirmation sequence still running after S seconds and "
        f"{_STALL_FACTOR:g} times its recorded time, and report it unjudged "
        f"(default {_STALL_FLOOR:g})",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--tracer", choices=("auto", "settrace", "none"), default="auto",
                   help=argparse.SUPPRESS)  # fmt: skip
    p.add_argument("--keep-work", action="store_true", help=argparse.SUPPRESS)
    return p


def filter_pytest_args(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """(args to pass, args dropped): see ``_DROP_FLAGS`` and ``_DROP_WITH_VALUE``."""
    out: list[str] = []
    dropped: list[str] = []
    it = iter(range(len(args)))
    skip_next = False
    for i in it:
        a = args[i]
        if skip_next:
            skip_next = False
            dropped.append(a)
            continue
        if a in _DROP_FLAGS or a.startswith("--isolator-"):
            dropped.append(a)
            continue
        if a in _DROP_WITH_VALUE:
            dropped.append(a)
            skip_next = True
            continue
        if any(a.startswith(opt + "=") for opt in _DROP_WITH_VALUE):
            dropped.append(a)
            continue
        if a.startswith("--maxfail") or (a[:2] in ("-x", "-n") and a[2:].isdigit()):
            dropped.append(a)
            continue
        out.append(a)
    return out, dropped


# -------------------------------------------------------------------------- progress


class Progress:
    """Progress lines on stderr: at most one a second per phase, and each phase's end."""

    def __init__(self, quiet: bool, stream: IO[str] | None = None) -> None:
        self.quiet = quiet
        self.stream = stream or sys.stderr
        self._last = 0.0
        self._last_text = ""

    def say(self, text: str) -> None:
        if not self.quiet:
            self.stream.write(f"{PROG}: {text}\n")
            self.stream.flush()

    def step(self, phase: str, done: int, total: int, unit: str) -> None:
        now = time.monotonic()
        text = f"{phase} {done}/{total} {unit}"
        if text == self._last_text:
            return
        if done < total and now - self._last < 1.0:
            return
        self._last = now
        self._last_text = text
        self.say(text)


# ------------------------------------------------------------------------- child runs


def _pytest_cmd(
    extra: Sequence[str], pytest_args: Sequence[str], last: Sequence[str] = ()
) -> list[str]:
    """pytest with isolator; ``last`` goes after the user's arguments so that it wins.

    Without the scheduler: the dependencies stored by an earlier run would reorder the
    tests and keep state along its chains, so brittle tests would pass in the recording
    run and their setters would look harmless.  Without pytest-randomly, unless the
    arguments name it: it would shuffle the recording run, which runs in declared order,
    and each run of ``deps`` would find other dependencies.
    """
    randomly = any("randomly" in a for a in (*extra, *pytest_args, *last))
    block = [] if randomly else ["-p", "no:randomly"]
    return [sys.executable, "-m", "pytest", "-p", "isolator", "-p", "no:isolator-sched",
            *block, "--reset=minimal", *extra, *pytest_args, *last]  # fmt: skip


def _read_lines(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """Complete JSON lines from ``offset``; a torn last line (a crash) is left for later."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return [], offset
    out = []
    end = data.rfind(b"\n") + 1
    for raw in data[:end].splitlines():
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out, offset + end


def _error_line(log: Path) -> str:
    """The most useful line of a failed child's output."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for prefix in ("ERROR:", "E   ", "ImportError", "INTERNALERROR>"):
        for ln in lines:
            if ln.startswith(prefix):
                return ln
    return lines[-1] if lines else ""


def _stop_child(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()


@dataclass
class Recorded:
    rootdir: str
    collected: list[NodeId]
    records: list[detector.TestRecord]
    crashed: list[NodeId] = field(default_factory=list)
    backend: str = ""
    notes: list[str] = field(default_factory=list)
    wall: float = 0.0
    collect_time: float = 0.0
    # The recording process once it has reported its last test: its pytest and
    # interpreter shutdown (a tenth of a second and more) overlaps the confirmation.
    finishing: subprocess.Popen[bytes] | None = None
    # The recording process, serving plans now (``serve_paths(work, "rec")``).
    serving: subprocess.Popen[bytes] | None = None


def record(
    pytest_args: list[str], work: Path, progress: Progress, tracer: str, serve: bool = False
) -> Recorded:
    """The recording run, restarted after a test that kills the interpreter.

    With ``serve``, the process goes on to serve confirmation plans once it has recorded
    every test (its first attempt only: a restarted one runs part of the suite).
    """
    rootdir = ""
    collected: list[NodeId] = []
    records: list[detector.TestRecord] = []
    crashed: list[NodeId] = []
    notes: list[str] = []
    backend = ""
    done: list[NodeId] = []
    t0 = time.perf_counter()
    collect_time = 0.0
    finishing: subprocess.Popen[bytes] | None = None
    serving: subprocess.Popen[bytes] | None = None
    for attempt in range(_MAX_RESTARTS + 1):
        rec = work / f"record-{attempt}.jsonl"
        log = work / f"record-{attempt}.log"
        extra = [f"--isolator-record={rec}", f"--isolator-tracer={tracer}"]
        if serve and attempt == 0:
            plan_dir, plan_out = serve_paths(work, "rec")
            plan_dir.mkdir()
            extra += [f"--isolator-plan={plan_dir}", f"--isolator-plan-out={plan_out}"]
        if done:
            resume = work / f"resume-{attempt}.json"
            resume.write_text(json.dumps(done), encoding="utf-8")
            extra.append(f"--isolator-resume={resume}")
        with open(log, "wb") as logf:
            proc = subprocess.Popen(
                _pytest_cmd(extra, pytest_args, ["--tb=line"]),
                stdout=logf,
                stderr=subprocess.STDOUT,
            )
            offset = 0
            started: NodeId | None = None
            finished = False
            got_collected = False
            try:
                while True:
                    rc = proc.poll()
                    lines, offset = _read_lines(rec, offset)
                    for obj in lines:
                        kind = obj.get("type")
                        if kind == "header":
                            rootdir = rootdir or str(obj.get("rootdir", ""))
                        elif kind == "collected":
                            got_collected = True
                            if not collected:
                                collected = [str(t) for t in obj.get("tests", [])]
                                collect_time = float(obj.get("collect_time", 0.0))
                        elif kind == "tracer":
                            backend = str(obj.get("backend", ""))
                            if obj.get("note") and str(obj["note"]) not in notes:
                                notes.append(str(obj["note"]))
                        elif kind == "start":
                            started = str(obj.get("nodeid"))
                        elif kind == "test":
                            r = detector.TestRecord.from_json({**obj, "index": len(records)})
                            records.append(r)
                            done.append(r.nodeid)
                            started = None
                        elif kind == "finished":
                            finished = True
                            if obj.get("serving"):
                                serving = proc
                    if collected:
                        progress.step("recording", len(done), len(collected), "tests")
                    if rc is not None:
                        break
                    if finished and collected:
                        # Every test is in the record: the process serves plans now, or
                        # its shutdown need not hold up the confirmation (the caller
                        # joins it).
                        if serving is None:
                            finishing = proc
                        break
                    try:
                        proc.wait(timeout=0.02)
                    except subprocess.TimeoutExpired:
                        pass
            except BaseException:
                _stop_child(proc)
                raise
        if got_collected and not collected:
            # Nothing selected, or node ids that do not exist (pytest says so, exit 4).
            if rc in (0, 5):
                raise DepsError("no tests collected", 5)
            raise DepsError(f"pytest could not run the tests (exit {rc}): {_error_line(log)}")
        if finished:
            break
        if not got_collected:
            if rc == 5:
                raise DepsError("no tests collected", 5)
            why = _error_line(log)
            raise DepsError(f"pytest could not run the tests (exit {rc}): {why}")
        if started is None:
            # Died between tests (in a session fixture's teardown, say): nothing to retry.
            notes.append(f"the recording run ended early (exit {rc}) after {len(done)} tests")
            break
        crashed.append(started)
        done.append(started)
        notes.append(f"{started} crashed the interpreter during recording (exit {rc})")
        progress.say(f"{started} crashed the interpreter; going on with the rest")
    return Recorded(
        rootdir=rootdir or os.getcwd(),
        collected=collected,
        records=records,
        crashed=crashed,
        backend=backend,
        notes=notes,
        wall=time.perf_counter() - t0,
        collect_time=collect_time,
        finishing=finishing,
        serving=serving,
    )


def serve_paths(work: Path, n: int | str) -> tuple[Path, Path]:
    """The plan directory and the result file of confirmation process ``n``."""
    return work / f"serve-{n}", work / f"serve-{n}.out.jsonl"


def _join(proc: subprocess.Popen[bytes] | None, interrupted: bool = False) -> None:
    """Wait for a finished recording process to exit (stop it on an interruption)."""
    if proc is None:
        return
    if interrupted:
        _stop_child(proc)
        return
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        _stop_child(proc)


class _Child:
    """One confirmation process serving plans from its own directory (``serve_paths``):
    started for that, or the recording process once it has recorded its last test."""

    def __init__(
        self,
        cmd_args: list[str],
        work: Path,
        n: int | str,
        proc: subprocess.Popen[bytes] | None = None,
        fork: bool = False,
    ) -> None:
        self.dir, self.out = serve_paths(work, n)
        self.log = work / f"serve-{n}.log"
        self.offset = 0
        self.k = 0
        self.pending: dict[int, detector.Seq] = {}
        self.started: int | None = None
        self.started_at = 0.0  # when ``started`` began (time.monotonic())
        self.stalled: int | None = None  # the sequence it was stopped for (see Confirmer)
        self.alive_once = proc is not None  # wrote anything: it collected and serves
        if proc is not None:
            self.proc = proc
            return
        self.dir.mkdir()
        extra = [f"--isolator-plan={self.dir}", f"--isolator-plan-out={self.out}"]
        # Formatting tracebacks of the failures we provoke costs more than running them.
        last = ["-q", "--tb=no"]
        if fork:
            # Each sequence in a forked child (see _vet); no cache: the failures it
            # provokes must not become the user's --lf (the serving one saves it).
            extra.append("--isolator-plan-fork")
            last += ["-p", "no:cacheprovider"]
        with open(self.log, "wb") as logf:
            self.proc = subprocess.Popen(
                _pytest_cmd(extra, cmd_args, last), stdout=logf, stderr=subprocess.STDOUT
            )

    def submit(self, seqs: dict[int, detector.Seq]) -> None:
        ids = sorted(seqs)
        data = json.dumps({"ids": ids, "sequences": [list(seqs[i]) for i in ids]})
        tmp = self.dir / f".plan-{self.k}.tmp"
        tmp.write_text(data, encoding="utf-8")
        os.replace(tmp, self.dir / f"plan-{self.k}.json")  # never seen half-written
        self.k += 1
        self.pending.update(seqs)

    def read(self) -> list[dict[str, Any]]:
        lines, self.offset = _read_lines(self.out, self.offset)
        self.alive_once = self.alive_once or bool(lines)
        return lines

    def request_stop(self) -> None:
        try:
            (self.dir / "stop").write_text("", encoding="utf-8")
        except OSError:
            pass

    def stop(self, wait: float = 30.0) -> None:
        self.request_stop()
        try:
            self.proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            _stop_child(self.proc)


class Confirmer:
    """Runs sequences in 1-2 long-lived pytest processes and feeds ``Evidence``."""

    def __init__(
        self,
        pytest_args: list[str],
        work: Path,
        ev: detector.Evidence,
        durations: dict[NodeId, float],
        jobs: int,
        progress: Progress,
    ) -> None:
        self.pytest_args = pytest_args
        self.work = work
        self.ev = ev
        self.durations = durations
        self.jobs = jobs
        self.progress = progress
        self.next_id = 0
        self.spawned = 0
        self.sequences_run = 0
        self.executions = 0
        self.crashes: list[detector.Seq] = []
        self.stalls: list[detector.Seq] = []  # stopped after running too long
        self.stall_floor = _STALL_FLOOR
        self.children: list[_Child] = []
        self.restarts = 0
        self.phases: list[tuple[str, int, float]] = []  # (phase, sequences, seconds)
        self.stopping: list[_Child] = []

    def _jobs_for(self, seqs: list[detector.Seq]) -> int:
        if self.jobs > 0:
            return self.jobs
        cost = sum(detector.estimate_cost(s, self.durations) for s in seqs)
        # A second process costs a second start-up and collection: only with real work.
        return 2 if (os.cpu_count() or 1) >= 2 and (cost > 3.0 or len(seqs) > 400) else 1

    def adopt(self, proc: subprocess.Popen[bytes]) -> None:
        """Use the recording process, which serves plans now (``record(serve=True)``)."""
        child = _Child(self.pytest_args, self.work, "rec", proc)
        child.log = self.work / "record-0.log"
        self.children.append(child)
        self.spawned += 1

    def _spawn(self) -> _Child:
        child = _Child(self.pytest_args, self.work, self.spawned)
        self.spawned += 1
        self.children.append(child)
        return child

    def run(self, phase: str, seqs: list[detector.Seq]) -> None:
        """Run ``seqs`` and wait for their results."""
        if not seqs:
            return
        t0 = time.perf_counter()
        try:
            self.wait_for(self.start(seqs), phase)
        finally:
            self.phases.append((phase, len(seqs), round(time.perf_counter() - t0, 3)))

    def start(self, seqs: list[detector.Seq]) -> set[int]:
        """Hand ``seqs`` to the processes (behind what they still have to do); their ids."""
        while len(self.children) < self._jobs_for(seqs) and self.spawned < 2 + self.restarts:
            self._spawn()
        bins: list[list[detector.Seq]] = [[] for _ in self.children]
        load = [sum(detector.estimate_cost(s, self.durations) for s in c.pending.values())
                for c in self.children]  # fmt: skip
        for s in seqs:
            i = load.index(min(load))
            bins[i].append(s)
            load[i] += detector.estimate_cost(s, self.durations)
        ids: set[int] = set()
        for child, chunk in zip(self.children, bins, strict=True):
            for part in plan_parts(chunk):
                plan = {}
                for s in part:
                    plan[self.next_id] = s
                    ids.add(self.next_id)
                    self.next_id += 1
                child.submit(plan)
        return ids

    def inflight(self) -> Counter[detector.Seq]:
        """The sequences handed out and not yet run, with their multiplicity."""
        return Counter(s for c in self.children for s in c.pending.values())

    def wait_for(self, ids: set[int], phase: str) -> None:
        """Poll the processes until none of ``ids`` is left to run."""
        total = len(ids)
        try:
            while True:
                for child in list(self.children):
                    self._poll(child)
                left = sum(len(ids & c.pending.keys()) for c in self.children)
                self.progress.step(f"confirming ({phase})", total - left, total, "sequences")
                if not left:
                    break
                self._stop_stalled()
                time.sleep(0.005)
        except BaseException:
            self.close(interrupted=True)
            raise

    def _poll(self, child: _Child) -> int:
        rc = child.proc.poll()
        done = 0
        for obj in child.read():
            kind = obj.get("type")
            sid = obj.get("id")
            if kind == "start" and isinstance(sid, int):
                child.started = sid
                child.started_at = time.monotonic()
            elif kind in ("result", "missing") and isinstance(sid, int) and sid in child.pending:
                if sid == child.stalled:
                    continue  # stopped by us: whatever it wrote then is no outcome
                seq = child.pending.pop(sid)
                if kind == "result":
                    self._take(seq, obj.get("outcomes", []))
                child.started = None
                done += 1
        if rc is None or not child.pending:
            if rc is not None:
                self.children.remove(child)
            return done
        self.children.remove(child)
        if not child.alive_once:
            self.close(interrupted=True)
            raise DepsError(
                f"a confirmation run could not start (exit {rc}): {_error_line(child.log)}"
            )
        # The process died with work left: the running sequence killed it (or ran so long
        # that we stopped it).
        sid = child.started if child.started in child.pending else min(child.pending)
        seq = child.pending.pop(sid)
        self.ev.add_crash(seq)
        (self.stalls if child.stalled == sid else self.crashes).append(seq)
        done += 1
        self.restarts += 1
        if child.pending and self.restarts <= _MAX_RESTARTS:
            # In the order they were planned, cut where plan_parts() had cut.
            fresh = self._spawn()
            plan: dict[int, detector.Seq] = {}
            for sid in sorted(child.pending):
                seq = child.pending[sid]
                if plan and plan[max(plan)][-1] == seq[0]:
                    fresh.submit(plan)
                    plan = {}
                plan[sid] = seq
            fresh.submit(plan)
        else:
            done += len(child.pending)
        return done

    def stall_limit(self, seq: Sequence[NodeId]) -> float:
        """Seconds after which a running ``seq`` is taken as stalled."""
        cost = detector.estimate_cost(tuple(seq), self.durations)
        return max(self.stall_floor, _STALL_FACTOR * cost)

    def _stop_stalled(self) -> None:
        """Stop a process whose running sequence has taken ``_STALL_FACTOR`` times its
        recorded duration (and ``stall_floor`` seconds): the next poll sees it end with
        that sequence unfinished, which is then not judged, and the rest of its work goes
        to a new process."""
        now = time.monotonic()
        for child in self.children:
            sid = child.started
            if sid is None or sid not in child.pending or child.stalled is not None:
                continue
            if now - child.started_at > self.stall_limit(child.pending[sid]):
                child.stalled = sid
                _stop_child(child.proc)

    def close(self, interrupted: bool = False, wait: bool = True) -> None:
        """Stop the processes; on an interruption, keep the results already written.

        Without ``wait`` the processes are asked to stop and left to finish (their
        interpreter shutdown takes a while); ``wait()`` joins them later.
        """
        for child in self.children:
            if interrupted:
                _stop_child(child.proc)
            elif wait:
                child.stop()
            else:
                child.request_stop()
                self.stopping.append(child)
            for obj in child.read():
                sid = obj.get("id")
                if obj.get("type") == "result" and isinstance(sid, int) and sid in child.pending:
                    self._take(child.pending.pop(sid), obj.get("outcomes", []))
        self.children = []

    def wait(self) -> None:
        for child in self.stopping:
            child.stop()
        self.stopping = []

    def _take(self, seq: detector.Seq, outcomes: list[Any]) -> None:
        outs = [str(o) for o in outcomes]
        if len(outs) != len(seq):
            return
        self.sequences_run += 1
        self.executions += len(seq)
        # Every prefix is a fact: the first test ran alone, the second after the first...
        for i in range(len(seq)):
            self.ev.add(seq[: i + 1], outs[i])


def plan_parts(seqs: list[detector.Seq]) -> list[list[detector.Seq]]:
    """The sequences in separate plans wherever one would start with the test the one
    before it ended with (a sequence may swap places with the next one to avoid that).

    The plan runner hands the first test of the next sequence to pytest as ``nextitem``;
    when that is the test that just ran, pytest keeps the test's own node set up, so the
    rerun gets neither teardown nor setup of its function-scoped fixtures (parso's
    ``differ``: ``KeyError: 'differ'``).  That showed up as tests that "fail alone" once
    in ten runs (parso 0.8.7).  Between two plans the runner tears everything down.  The
    order is otherwise kept: repetitions come before cleaner trials.
    """
    parts: list[list[detector.Seq]] = [[]]
    held: detector.Seq | None = None
    for s in seqs:
        part = parts[-1]
        if part and part[-1][-1] == s[0]:
            if held is not None:
                parts.append([held])
                part = parts[-1]
            held = s
            continue
        part.append(s)
        if held is not None:
            if held[0] != s[-1]:
                part.append(held)
            else:
                parts.append([held])
            held = None
    if held is not None:
        parts.append([held])
    return [p for p in parts if p]


class _Pairs:
    """Hands candidates out of the index in priority order and remembers which were tried.

    ``waiting``: candidates that open the next chunk (the one that did not fit in the
    last); ``costly``: candidates costing more than a whole chunk, set aside until a chunk
    is large enough or the cheaper ones are all out (one slow test must not spend the
    budget of hundreds of fast ones) -- but for the ``_MIN_TRIED`` best-ranked, which are
    tried whatever the budget: a chunk of its own where one does not fit.
    """

    def __init__(self, index: detector.CandidateIndex, ev: detector.Evidence) -> None:
        self.index = index
        self.ev = ev
        self.gen = index.ordered()
        self.tried: list[detector.Candidate] = []
        self.done: set[tuple[NodeId, NodeId]] = set()
        self.seqs: set[detector.Seq] = set()
        self.waiting: list[detector.Candidate] = []
        self.costly: list[detector.Candidate] = []
        self.gen_done = False
        self.exhausted = False
        self.drawn = 0  # candidates drawn from the ranking so far

    def _next(self) -> detector.Candidate | None:
        if self.waiting:
            return self.waiting.pop(0)
        while not self.gen_done:
            cand = next(self.gen, None)
            if cand is None:
                self.gen_done = True
            elif (cand.source, cand.target) not in self.done:
                self.done.add((cand.source, cand.target))
                self.drawn += 1
                return cand
        return self.costly.pop(0) if self.costly else None

    def take(self, limit: float, cost: Callable[[detector.Seq], float] = len) -> list[detector.Seq]:
        """New sequences ([B] and [A, B]) costing about ``limit`` (test runs, or what
        ``cost`` says); at least one candidate while any is left."""
        out: list[detector.Seq] = []
        spent = 0.0
        set_aside = 0
        fit = [c for c in self.costly if sum(cost(s) for s in self._new(c)) <= limit]
        if fit:  # the chunks have grown: their turn has come
            self.costly = [c for c in self.costly if c not in fit]
            self.waiting[:0] = fit
        while True:
            cand = self._next()
            if cand is None:
                self.exhausted = True
                break
            new = self._new(cand)
            c = sum(cost(s) for s in new)
            if (
                c > limit
                and not self.gen_done
                and set_aside < _MAX_SET_ASIDE
                and self.drawn > _MIN_TRIED
            ):
                self.costly.append(cand)
                set_aside += 1
                continue
            if out and spent + c > limit:
                self.waiting.insert(0, cand)
                break
            self.tried.append(cand)
            self.seqs.update(new)
            out += new
            spent += c
        return out

    def push_front(self, cands: list[detector.Candidate]) -> None:
        """Hand these out before any other candidate."""
        if cands:
            self.waiting[:0] = cands
            self.exhausted = False

    def add(self, cands: list[detector.Candidate]) -> list[detector.Seq]:
        out: list[detector.Seq] = []
        for cand in cands:
            self.tried.append(cand)
            new = self._new(cand)
            self.seqs.update(new)
            out += new
        return out

    def _new(self, cand: detector.Candidate) -> list[detector.Seq]:
        # The target's recorded outcome stands in for its first run alone: a pair that
        # changes nothing costs one sequence (repeat_plan adds real runs alone otherwise).
        first = (cand.source, cand.target)
        seqs = [first] if cand.target in self.ev.recorded else [(cand.target,), first]
        return [s for s in seqs if s not in self.seqs]


class _FollowUps:
    """What the evidence so far asks for before any new candidate.

    ``seqs()``: repetitions of pairs whose first run differed from the target alone and
    trials of brittle sources after their state-setters (``detector.repeat_plan``), with
    ``cleaners`` also the cleaner trials of apparent polluters (``cleaner_plan``), less
    what is already running; ``followers()``: once per apparent edge, other writers of its
    state for the same target (``detector.followers``).  ``cleaner_seqs``: every cleaner
    trial planned.
    """

    def __init__(
        self,
        ev: detector.Evidence,
        index: detector.CandidateIndex,
        records: list[detector.TestRecord],
        pairs: _Pairs,
        max_cleaners: int,
    ) -> None:
        self.ev = ev
        self.index = index
        self.records = records
        self.pairs = pairs
        self.max_cleaners = max_cleaners
        self.cleaner_seqs: list[detector.Seq] = []
        self._cleaners_seen: set[detector.Seq] = set()
        self._unjudged: list[detector.Candidate] = []  # tried, no result yet
        self._scanned = 0  # of pairs.tried

    def seqs(self, running: Counter[detector.Seq], cleaners: bool = True) -> list[detector.Seq]:
        tried = self.pairs.tried
        more = detector.repeat_plan(self.ev, tried)
        if cleaners and self.max_cleaners:
            cl = detector.cleaner_plan(self.ev, self.records, tried, self.max_cleaners)
            for seq in cl:
                if seq not in self._cleaners_seen:
                    self._cleaners_seen.add(seq)
                    self.cleaner_seqs.append(seq)
            more += cl
        left = Counter(more)
        left.subtract(running)
        out: list[detector.Seq] = []
        for seq in more:  # in plan order: repetitions before cleaner trials
            if left[seq] > 0:
                left[seq] -= 1
                out.append(seq)
        return out

    def followers(self) -> list[detector.Candidate]:
        # A pair is looked at until its first result is in: that one decides whether it
        # is apparent (a pair that changed nothing gets no repetition).
        tried = self.pairs.tried
        pool = self._unjudged + tried[self._scanned :]
        self._scanned = len(tried)
        self._unjudged = []
        apparent = []
        for c in pool:
            verdict = detector.judge_pair(self.ev, c.source, c.target)
            if verdict == "untested":
                self._unjudged.append(c)
            elif verdict in ("pending", "polluter", "state-setter"):
                apparent.append(c)
        return detector.followers(self.ev, self.index, apparent, self.pairs.done)


def _confirm_within(
    conf: Confirmer,
    pairs: _Pairs,
    follow: _FollowUps,
    budget: float | None,
    durations: dict[NodeId, float],
    floor: float = 0.0,
) -> None:
    """Try candidates in priority order for ``budget`` seconds of real time (and past it,
    for at most ``floor`` seconds in all, until ``_MIN_TRIED`` candidates are tried).

    Each chunk is led by the repetitions the chunks before it asked for, and apparent
    edges move the other writers of their state to the front (:class:`_FollowUps`), so
    that what differed is settled within the budget, not in rounds after it.  Cleaner
    trials wait until the candidates run out (or for the rounds after the budget): they
    name no new dependency.

    Chunks are sized with the recorded durations of their tests, scaled by what the last
    chunk really took against that estimate (the first chunks are small): a few slow tests
    (parso's ``test_on_itself``, seconds each) must not make a chunk overrun the budget.
    The next chunk is handed out before the last one ends, so that the processes never
    wait for us.
    """
    t0 = time.perf_counter()
    deadline = math.inf if budget is None else t0 + budget

    def estimate(seq: detector.Seq) -> float:
        return detector.estimate_cost(seq, durations, per_test=_PER_TEST)

    scale = 2.0  # real seconds per estimated second: a cautious guess until measured
    measured = False
    inflight: deque[tuple[set[int], float, float, int]] = deque()  # ids, estimate, t, n
    last_done = t0
    finished = 0.0  # estimated seconds of the chunks done
    hard = t0 + floor
    while True:
        now = time.perf_counter()
        free = deadline - now - scale * sum(e for _i, e, _t, _n in inflight)
        more = free > 0.05 * (budget or 1.0) or (len(pairs.tried) < _MIN_TRIED and now < hard)
        if len(inflight) < 2 and more:
            # Chunks of at most 40% of what is left, so that the rate is measured again
            # before the budget is spent.
            allowed = max(0.4 * free / scale, 50 * _PER_TEST)
            if not measured:
                allowed = min(allowed, 200 * _PER_TEST)
            pairs.push_front(follow.followers())
            chunk = follow.seqs(conf.inflight(), cleaners=pairs.exhausted)
            room = allowed - sum(estimate(s) for s in chunk)
            if not pairs.exhausted and room > 0:
                chunk += pairs.take(room, estimate)
            if chunk:
                ids = conf.start(chunk)
                inflight.append((ids, sum(estimate(s) for s in chunk), now, len(chunk)))
                continue
        if not inflight:
            break
        ids, est, submitted, n = inflight.popleft()
        conf.wait_for(ids, "pairs")
        done = time.perf_counter()
        # The rate over every chunk so far: with two chunks in flight the second one
        # is often complete by the time the first one is, and timing it alone says 0.
        finished += est
        scale = max((done - t0) / max(finished, 1e-6), 0.05)
        measured = True
        conf.phases.append(("pairs", n, round(done - max(submitted, last_done), 3)))
        last_done = done


# ------------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    opts, rest = parser.parse_known_args(args)
    progress = Progress(opts.quiet)
    try:
        return _deps(opts, rest, progress)
    except DepsError as exc:
        sys.stderr.write(f"{PROG}: {exc}\n")
        return exc.code


def _check_outputs(opts: argparse.Namespace) -> None:
    from isolator._graphout import GRAPH_SUFFIXES, dot_available

    if opts.graph:
        suffix = Path(opts.graph).suffix.lower()
        if suffix not in GRAPH_SUFFIXES:
            raise DepsError(f"--graph {opts.graph}: use a .dot, .svg or .html file name")
        if suffix == ".svg" and not dot_available():
            raise DepsError(
                "--graph .svg needs Graphviz `dot`, which is not installed; "
                "use a .dot or .html file name"
            )
    for name in ("output", "graph"):
        value = getattr(opts, name)
        if value and Path(value).is_dir():
            raise DepsError(f"--{name} {value} is a directory")
        if value:
            # Known before the runs, not after them.
            parent = Path(value).parent
            if not parent.is_dir():
                raise DepsError(f"--{name} {value}: no directory {parent}")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise DepsError(f"--{name} {value}: cannot write in {parent}")
    if opts.jobs < 0 or opts.max_cleaners < 0 or opts.budget < 0:
        raise DepsError("--jobs, --max-cleaners and --budget take non-negative numbers")
    if not opts.stall_timeout > 0:  # (NaN too)
        raise DepsError("--stall-timeout takes a positive number of seconds")


def _terminated(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # (as Ctrl-C: what was confirmed is kept, nothing is left)


def _deps(opts: argparse.Namespace, rest: list[str], progress: Progress) -> int:
    _check_outputs(opts)
    pytest_args, dropped = filter_pytest_args(rest)
    if dropped:
        progress.say("ignoring " + " ".join(dropped) + " (every selected test must run)")
    main = threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGTERM, _terminated) if main else None
    work = Path(tempfile.mkdtemp(prefix="isolator-deps-"))
    try:
        return _run(opts, pytest_args, work, progress)
    finally:
        if opts.keep_work:
            progress.say(f"work files kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
        if main:
            signal.signal(signal.SIGTERM, before)


def _run(opts: argparse.Namespace, pytest_args: list[str], work: Path, progress: Progress) -> int:
    t_start = time.perf_counter()
    progress.say("recording run")
    ev = detector.Evidence()
    durations: dict[NodeId, float] = {}
    conf = Confirmer(pytest_args, work, ev, durations, opts.jobs, progress)
    conf.stall_floor = opts.stall_timeout
    try:
        # The recording process serves the confirmation afterwards: no second start-up
        # and collection (unless a test killed it and it had to be restarted).
        rec = record(pytest_args, work, progress, opts.tracer, serve=not opts.record_only)
        if rec.serving is not None:
            conf.adopt(rec.serving)
    except KeyboardInterrupt:
        conf.close(interrupted=True)
        sys.stderr.write(f"{PROG}: interrupted during the recording run; nothing stored\n")
        return 130
    except BaseException:
        conf.close(interrupted=True)
        raise
    try:
        code = _after_record(opts, rec, conf, ev, durations, work, progress, t_start)
    except BaseException as exc:
        _join(rec.finishing, interrupted=isinstance(exc, KeyboardInterrupt))
        raise
    _join(rec.finishing)
    return code


def _after_record(
    opts: argparse.Namespace,
    rec: Recorded,
    conf: Confirmer,
    ev: detector.Evidence,
    durations: dict[NodeId, float],
    work: Path,
    progress: Progress,
    t_start: float,
) -> int:
    records = [r for r in rec.records if detector.is_known(r.outcome)]
    if not records:
        conf.close(interrupted=True)
        why = _error_line(work / "record-0.log")
        raise DepsError("the recording run produced no results" + (f": {why}" if why else ""), 1)
    index = detector.CandidateIndex(records)
    n_candidates = index.count()
    progress.say(
        f"recorded {len(rec.records)} tests in {rec.wall:.1f} s; {n_candidates} candidate pairs"
    )
    notes = list(rec.notes)
    durations.update({r.nodeid: r.duration for r in records})
    ev.recorded.update({r.nodeid: r.outcome for r in records})
    pairs = _Pairs(index, ev)
    follow = _FollowUps(ev, index, records, pairs, opts.max_cleaners)
    interrupted = False
    # The process that checks what is confirmed (see _vet) starts and collects now, while
    # the confirmation runs.
    vet_child = None
    if n_candidates and not opts.record_only and hasattr(os, "fork"):
        vet_child = _Child(conf.pytest_args, work, "vet", fork=True)
    t_confirm = time.perf_counter()
    if opts.record_only:
        pairs.take(_RECORD_ONLY_SHOWN * 2)
    elif n_candidates:
        budget = None if opts.budget == 0 else max(opts.budget * rec.wall, _MIN_BUDGET)
        try:
            # The budget covers the whole confirmation: what the last chunks still ask
            # for (repetitions, cleaners, chains) is left part of it.
            first = None if budget is None else _FIRST_ROUND_SHARE * budget
            _confirm_within(conf, pairs, follow, first, durations, floor=rec.wall)
            for _ in range(_MAX_ROUNDS):
                late = budget is not None and time.perf_counter() - t_confirm > budget
                extra = pairs.add(follow.followers()) if not late else []
                more = follow.seqs(Counter())
                if not more and not extra:
                    break
                conf.run("repeats and cleaners", more + extra)
        except KeyboardInterrupt:
            interrupted = True
            conf.close(interrupted=True)
            notes.append(
                "interrupted during confirmation: results confirmed before the interruption "
                "are kept; the rest are candidates"
            )
    conf.close(wait=False)  # their shutdown overlaps our output
    untried = n_candidates - len(pairs.tried)
    if untried > 0:
        why = "--record-only" if opts.record_only else "confirmation budget; --budget 0 lifts it"
        notes.append(f"{untried} candidate pairs were not tried ({why})")
    confirm_wall = time.perf_counter() - t_confirm
    for seq in conf.crashes:
        notes.append("crashed the interpreter, not judged: " + " -> ".join(seq))
    for seq in conf.stalls:
        notes.append(
            f"still running after {conf.stall_floor:.0f} s or more, {_STALL_FACTOR:.0f} times "
            "its recorded time; stopped, not judged: " + " -> ".join(seq)
        )
    candidates = pairs.tried
    graph = detector.build_graph(ev, records, candidates, follow.cleaner_seqs, notes)
    graph = DependencyGraph(
        tests=tuple(rec.collected) or graph.tests,
        dependencies=graph.dependencies,
        cleaners=graph.cleaners,
        notes=graph.notes,
    )
    vetted = 0
    t_vet = time.perf_counter()
    if vet_child is not None:
        try:
            if graph.confirmed() and not interrupted:
                graph, vetted = _vet(graph, vet_child, progress, conf.stall_limit)
        finally:
            if vetted:
                vet_child.stop()  # (idle by now: it sees the stop file at once)
            else:
                _stop_child(vet_child.proc)  # (perhaps still collecting: not needed)
    vet_wall = time.perf_counter() - t_vet
    stats: dict[str, Any] = dict(detector.counts(ev, records, candidates))
    stats["candidates"] = n_candidates
    stats["tried"] = len(candidates)
    stats.update(
        {
            "tests_recorded": len(rec.records),
            "crashed": rec.crashed,
            "tracer": rec.backend,
            "record_seconds": round(rec.wall, 3),
            "confirm_seconds": round(confirm_wall, 3),
            "total_seconds": round(time.perf_counter() - t_start, 3),
            "sequences_run": conf.sequences_run,
            # Confirmation processes, the recording process included when it served.
            "confirm_processes": conf.spawned,
            "recording_served": rec.serving is not None,
            "phases": [list(p) for p in conf.phases],
            "test_executions": conf.executions,
            "not_tried": untried,
            "vetted_sequences": vetted,
            "vet_seconds": round(vet_wall, 3),
            "interrupted": interrupted,
            "record_only": bool(opts.record_only),
        }
    )
    try:
        _emit(opts, graph, ev, records, candidates, stats, rec, progress)
    finally:
        conf.wait()
    if interrupted:
        sys.stderr.write(
            f"{PROG}: interrupted; kept {len(graph.confirmed())} confirmed dependencies "
            f"in {Path(rec.rootdir) / STORE_DIR / DEPS_FILE}\n"
        )
        return 130
    return 0


def _vet(
    graph: DependencyGraph,
    child: _Child,
    progress: Progress,
    stall: Callable[[Sequence[NodeId]], float] = lambda seq: math.inf,
) -> tuple[DependencyGraph, int]:
    """Check the confirmed dependencies in fresh processes: each target alone (twice),
    and each polluter then its victim, every sequence in a child forked from a process
    that collected and ran nothing (``child``).  The confirmation shares one process
    between its runs, and a reset that missed some state (one deeper than isolator
    watches) lets an earlier run decide a later one: a test that passes alone looked
    brittle.  A dependency these runs contradict is kept as a candidate, with a note.
    A sequence still running after ``stall(seq)`` seconds stops the check: what ran
    stands.  Returns the graph and the number of sequences run."""
    deps = graph.confirmed()
    targets = sorted({d.target for d in deps})
    seqs: list[list[str]] = [[t] for t in targets for _ in range(2)]
    pairs = sorted({(d.source, d.target) for d in deps if d.kind == "polluter"})
    seqs += [[a, b] for a, b in pairs]
    progress.say(f"checking {len(deps)} confirmed dependencies in fresh processes")
    child.submit({k: tuple(seq) for k, seq in enumerate(seqs)})
    alone: dict[NodeId, list[str]] = {}
    after: dict[tuple[NodeId, NodeId], str] = {}
    waiting = set(range(len(seqs)))
    running: tuple[int, float] | None = None  # (id, when it started)
    while waiting:
        lines = child.read()
        for line in lines:
            if line.get("type") == "start":
                running = (line.get("id", -1), time.monotonic())
            if line.get("type") in ("result", "missing"):
                waiting.discard(line.get("id", -1))
                running = None
            if line.get("type") != "result":
                continue
            tests, outcomes = line.get("tests") or [], line.get("outcomes") or []
            if len(tests) != len(outcomes) or not tests:
                continue
            if len(tests) == 1:
                alone.setdefault(tests[0], []).append(outcomes[0])
            else:
                after[(tests[0], tests[1])] = outcomes[1]
        if not lines and child.proc.poll() is not None:
            break  # (it could not collect, or crashed: what it ran stands)
        if running is not None and 0 <= running[0] < len(seqs):
            if time.monotonic() - running[1] > stall(seqs[running[0]]):
                _stop_child(child.proc)
                progress.say("a fresh-process check ran too long: stopped")
                break
        if not lines:
            time.sleep(0.01)
    kept: list[Dependency] = []
    notes = list(graph.notes)
    dropped: set[tuple[NodeId, NodeId]] = set()
    for d in graph.dependencies:
        why = _contradicted(d, alone.get(d.target), after.get((d.source, d.target)))
        if d.confirmed and why:
            d = replace(d, confirmed=False)
            dropped.add((d.source, d.target))
            notes.append(
                f"not confirmed in fresh processes: {d.target} {why} (the runs that "
                f"shared a process said it depends on {d.source})"
            )
        kept.append(d)
    if not dropped:
        return graph, len(seqs)
    cleaners = tuple(c for c in graph.cleaners if (c.polluter, c.victim) not in dropped)
    graph = replace(graph, dependencies=tuple(kept), cleaners=cleaners, notes=tuple(notes))
    return graph, len(seqs)


def _contradicted(dep: Dependency, alone: list[str] | None, after: str | None) -> str | None:
    """Why the fresh runs contradict ``dep`` (None: they agree, or did not run)."""
    if alone:
        bad = [detector.is_bad(o) for o in alone]
        if dep.kind == "state-setter" and not all(bad):
            return f"passes alone ({detector.outcomes_text(alone)})"
        if dep.kind == "polluter" and any(bad):
            return f"fails alone ({detector.outcomes_text(alone)})"
    if dep.kind == "polluter" and after is not None and not detector.is_bad(after):
        return f"passes after it ({after})"
    return None


def _emit(
    opts: argparse.Namespace,
    graph: DependencyGraph,
    ev: detector.Evidence,
    records: list[detector.TestRecord],
    candidates: list[detector.Candidate],
    stats: dict[str, Any],
    rec: Recorded,
    progress: Progress,
) -> None:
    from isolator import _graphout

    statuses = {
        (f.candidate.source, f.candidate.target): f.status
        for f in detector.findings(ev, records, candidates)
    }
    errors: list[str] = []
    try:
        stored = save_graph(rec.rootdir, graph)
    except (OSError, StoreError) as exc:
        errors.append(f"cannot store the result in {Path(rec.rootdir) / STORE_DIR}: {exc}")
        stored = None
    text_table = _graphout.table(graph, include_candidates=bool(opts.record_only))
    if opts.format == "json":
        doc = _graphout.to_json(
            graph,
            statuses,
            {
                "stats": stats,
                "candidates": [
                    {
                        "source": c.source,
                        "target": c.target,
                        "state": list(c.state),
                        "written_at": list(c.written_at),
                        "status": statuses.get((c.source, c.target), "candidate"),
                    }
                    for c in candidates
                ],
            },
        )
        text = json.dumps(doc, indent=1) + "\n"
        if opts.output:
            _write_text(opts.output, text)
            sys.stdout.write((text_table or "no confirmed order dependencies") + "\n")
        else:
            sys.stdout.write(text)
    else:
        out = (text_table or "no confirmed order dependencies") + "\n"
        if opts.record_only and text_table:
            out = "candidates (not confirmed, --record-only):\n" + out
        if opts.output:
            _write_text(opts.output, out)
        else:
            sys.stdout.write(out)
    if opts.graph:
        try:
            _graphout.write_graph(opts.graph, graph)
        except _graphout.OutputError as exc:
            errors.append(str(exc))
    for n in graph.notes:
        progress.say("note: " + n)
    progress.say(_graphout.summary(graph, stats)[len(PROG) + 2 :])
    if stored is not None:
        progress.say(f"stored in {stored}")
    if errors:
        raise DepsError(errors[0], 1)


def _write_text(path: str, text: str) -> None:
    try:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise DepsError(f"cannot write {path}: {exc.strerror or exc}", 1) from None


# ---------------------------------------------------------------------------- explain


def find_store(start: Path) -> Path | None:
    """The nearest ``.isolator/deps.json`` at or above ``start``."""
    for d in (start, *start.parents):
        if (d / STORE_DIR / DEPS_FILE).exists():
            return d
    return None


def explain(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(
        prog="isolator explain",
        allow_abbrev=False,
        description="Say why a test depends on other tests, with the shared state, "
        "from the last `isolator deps` result (.isolator/deps.json).",
    )
    p.add_argument("nodeid", metavar="NODEID")
    p.add_argument("--rootdir", help="where .isolator/ is (default: here or a parent)")
    opts = p.parse_args(args)
    from isolator._graphout import explain as explain_text

    root = Path(opts.rootdir) if opts.rootdir else find_store(Path.cwd())
    if root is None:
        sys.stderr.write(
            f"isolator explain: no {STORE_DIR}/{DEPS_FILE} here or in a parent directory; "
            "run `isolator deps` first\n"
        )
        return 2
    try:
        graph = load_graph(root)
    except StoreError as exc:
        sys.stderr.write(f"isolator explain: {exc}; delete it and run `isolator deps` again\n")
        return 2
    nodeid = _resolve(graph, opts.nodeid)
    if nodeid is None:
        sys.stderr.write(
            f"isolator explain: unknown test id {opts.nodeid!r} "
            f"(not among the {len(graph.tests)} tests in {root / STORE_DIR / DEPS_FILE})\n"
        )
        return 2
    sys.stdout.write(explain_text(graph, nodeid) + "\n")
    return 0


def _resolve(graph: DependencyGraph, given: str) -> NodeId | None:
    if given in graph.tests:
        return given
    # A node id written relative to a subdirectory, or a bare test name: accept a unique
    # match only.
    hits = [t for t in graph.tests if t.endswith("/" + given) or t.endswith("::" + given)]
    return hits[0] if len(hits) == 1 else None
