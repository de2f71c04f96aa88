"""Batched worker events under isolator's xdist scheduler: real ``pytest -n 2`` runs of a
small suite with a dependency graph, checked through what the controller reports (every
test once, chains kept, crashes blamed on the right test) and through the messages the
workers really sent."""

from __future__ import annotations

import json
import re
import sys

import pytest
import test_sched_e2e

from isolator._store import save_graph
from isolator._types import Dependency, DependencyGraph

pytest.importorskip("xdist")

# The two execnet socket servers of the scheduler's end-to-end tests.
socket_gateways = test_sched_e2e.socket_gateways

MODULES = 4
PER_MODULE = 40
SETTER = "tests/test_m0.py::test_set_mode"
BRITTLE = "tests/test_m3.py::test_needs_mode"
CRASH = "tests/test_m1.py::test_crash"

# Counts the messages each worker sends: registered before isolator wraps the worker's
# ``sendevent`` (its pytest_configure is trylast), so it sees what goes over the channel.
COUNTING_CONFTEST = """
import json, os

_counts = {}


def pytest_configure(config):
    if not hasattr(config, "workerinput"):
        return
    for plugin in config.pluginmanager.get_plugins():
        if hasattr(plugin, "sendevent") and hasattr(plugin, "torun"):
            send = plugin.sendevent

            def counting(name, **kwargs):
                _counts[name] = _counts.get(name, 0) + 1
                send(name, **kwargs)

            plugin.sendevent = counting


def pytest_unconfigure(config):
    if hasattr(config, "workerinput"):
        name = os.environ["PYTEST_XDIST_WORKER"]
        with open(f"messages-{name}.json", "w") as fh:
            json.dump(_counts, fh)
"""


def make_suite(pytester: pytest.Pytester, *, crash: bool = False, fail: str = "") -> int:
    """Four modules of quick tests; a setter in the first, its brittle test in the last.
    Returns the number of tests."""
    pytester.makepyfile(modestate="STATE = {}\n")
    tests = pytester.mkdir("tests")
    (tests / "conftest.py").write_text(COUNTING_CONFTEST)
    ids = []
    for m in range(MODULES):
        body = ["import os", "import modestate", ""]
        for i in range(PER_MODULE):
            name = f"test_{i:03d}"
            ids.append(f"tests/test_m{m}.py::{name}")
            check = "assert False" if f"tests/test_m{m}.py::{name}" == fail else "pass"
            body += [f"def {name}():", f"    {check}", ""]
        if m == 0:
            body += ["def test_set_mode():", "    modestate.STATE['mode'] = 'on'", ""]
            ids.append(SETTER)
        if m == 1 and crash:
            # In the middle of the module: tests before it ran on the same worker, and
            # their events may still have been buffered when it died.
            body.insert(3 + 3 * (PER_MODULE // 2), "def test_crash():\n    os._exit(3)\n")
            ids.append(CRASH)
        if m == MODULES - 1:
            body += ["def test_needs_mode():", "    assert modestate.STATE['mode'] == 'on'", ""]
            ids.append(BRITTLE)
        (tests / f"test_m{m}.py").write_text("\n".join(body))
    dep = Dependency("state-setter", SETTER, BRITTLE, ("modestate:STATE['mode']",), True)
    save_graph(pytester.path, DependencyGraph(tests=tuple(ids), dependencies=(dep,)))
    return len(ids)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "isolator", "-p", "no:randomly", "-p", "no:cacheprovider", "--reset=none",
        "-v", *args, timeout=300,
    )  # fmt: skip


def reported(result: pytest.RunResult) -> dict[str, list[tuple[str, str]]]:
    """Node id -> [(worker, outcome), ...] from the ``-v`` lines of the controller."""
    out: dict[str, list[tuple[str, str]]] = {}
    for m in re.finditer(
        r"^\[(gw\d+)\] \[\s*\d+%\] (PASSED|FAILED|ERROR) (\S+)", result.stdout.str(), re.M
    ):
        out.setdefault(m.group(3), []).append((m.group(1), m.group(2)))
    return out


def messages(pytester: pytest.Pytester) -> dict[str, dict[str, int]]:
    return {
        p.stem.split("-", 1)[1]: json.loads(p.read_text())
        for p in pytester.path.glob("messages-gw*.json")
    }


def test_workers_send_a_few_messages_and_every_report_arrives(pytester: pytest.Pytester) -> None:
    n = make_suite(pytester)
    result = run(pytester, "-n", "2")
    result.assert_outcomes(passed=n)
    seen = reported(result)
    assert len(seen) == n and all(len(v) == 1 for v in seen.values())
    assert seen[SETTER][0][0] == seen[BRITTLE][0][0]  # the chain stayed on one worker
    sent = messages(pytester)
    assert set(sent) == {"gw0", "gw1"}
    total = sum(sum(c.values()) for c in sent.values())
    # Plain xdist: six messages per test.  Batched: one per up to 64 tests, plus the
    # handful every worker sends (ready, collection, finished).
    assert sum(c.get("isolator_events", 0) for c in sent.values()) >= 2
    assert total < n / 4, sent
    assert not any(c.get("testreport") for c in sent.values()), sent


def test_a_failure_still_stops_the_run_with_x(pytester: pytest.Pytester) -> None:
    fail = "tests/test_m0.py::test_005"
    make_suite(pytester, fail=fail)
    result = run(pytester, "-n", "2", "-x")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # as plain xdist with -x
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] == 1
    assert reported(result)[fail] == [(reported(result)[fail][0][0], "FAILED")]
    result.stdout.fnmatch_lines(["*Interrupted: stopping after 1 failures*"])


def test_a_crashed_worker_is_blamed_on_the_test_that_crashed_it(
    pytester: pytest.Pytester,
) -> None:
    n = make_suite(pytester, crash=True)
    result = run(pytester, "-n", "2")
    assert result.ret == 1
    result.stdout.fnmatch_lines([f"*worker 'gw*' crashed while running '{CRASH}'*"])
    seen = reported(result)
    # Tests that finished on the crashed worker but whose reports died with it run again
    # elsewhere: every other test passes, and is reported once.
    assert seen[CRASH] == [(seen[CRASH][0][0], "FAILED")]
    others = {t: v for t, v in seen.items() if t != CRASH}
    assert len(others) == n - 1
    assert all(v == [(v[0][0], "PASSED")] for v in others.values()), others
    result.assert_outcomes(passed=n - 1, failed=1)


@pytest.mark.skipif(sys.platform == "win32", reason="execnet socket server, POSIX tools")
def test_a_crash_on_a_socket_gateway_is_blamed_on_the_right_test(
    pytester: pytest.Pytester, socket_gateways: list[int]
) -> None:
    # A worker on another host cannot write the breadcrumb file: its events go out as each
    # test starts, so xdist still knows which test it was running.
    make_suite(pytester, crash=True)
    tx = [
        a
        for port in socket_gateways
        for a in ("--tx", f"socket=127.0.0.1:{port}//chdir={pytester.path}")
    ]
    result = run(pytester, "-d", *tx, "--max-worker-restart=0")
    assert result.ret == 1
    result.stdout.fnmatch_lines([f"*worker 'gw*' crashed while running '{CRASH}'*"])
    seen = reported(result)
    assert seen[CRASH] == [(seen[CRASH][0][0], "FAILED")]
    assert all(len(v) == 1 for v in seen.values())


def test_recorded_durations_start_the_long_tests_first(pytester: pytest.Pytester) -> None:
    # Two long tests at the very end of the collection: the first run records every test's
    # duration, the second starts one long test on each worker before anything else.
    pytester.makepyfile(modestate="STATE = {}\n")
    tests = pytester.mkdir("tests")
    ids = []
    for m in range(2):
        body = ["import time", "import modestate", ""]
        for i in range(40):
            ids.append(f"tests/test_m{m}.py::test_{i:03d}")
            body += [f"def test_{i:03d}():", "    pass", ""]
        (tests / f"test_m{m}.py").write_text("\n".join(body))
    body = ["import time", "import modestate", ""]
    body += ["def test_set():", "    modestate.STATE['x'] = 1", ""]
    body += ["def test_need():", "    assert modestate.STATE['x'] == 1", ""]
    for name in ("test_long_a", "test_long_b"):
        body += [f"def {name}():", "    time.sleep(0.4)", ""]
    (tests / "test_z.py").write_text("\n".join(body))
    ids += [
        f"tests/test_z.py::{t}" for t in ("test_set", "test_need", "test_long_a", "test_long_b")
    ]
    dep = Dependency("state-setter", ids[-4], ids[-3], ("modestate:STATE['x']",), True)
    save_graph(pytester.path, DependencyGraph(tests=tuple(ids), dependencies=(dep,)))

    run(pytester, "-n", "2").assert_outcomes(passed=len(ids))
    stored = json.loads((pytester.path / ".isolator" / "durations.json").read_text())
    assert set(stored["tests"]) == set(ids)
    assert stored["tests"][ids[-1]] >= 0.4

    result = run(pytester, "-n", "2")
    result.assert_outcomes(passed=len(ids))
    first: dict[str, str] = {}
    for m in re.finditer(r"^\[(gw\d+)\] \[\s*\d+%\] PASSED (\S+)", result.stdout.str(), re.M):
        first.setdefault(m.group(1), m.group(2))
    # Each worker reports a long test first: it started there, since a worker that had run
    # quick tests before it would have reported those first.
    assert sorted(first.values()) == ids[-2:], first
