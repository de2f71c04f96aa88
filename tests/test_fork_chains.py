"""State-setter chains in forked children: ``--reset=fork`` and the fork fallback run a
chain (no reset between its tests) in one child, and still isolate polluters from victims.
Real pytest runs in subprocesses, with the dependency graph in ``.isolator/deps.json``."""

from __future__ import annotations

import json
import sys

import pytest

from isolator._fork import CAN_FORK
from isolator._store import save_graph
from isolator._types import Dependency, DependencyGraph

pytestmark = pytest.mark.skipif(not CAN_FORK, reason="needs os.fork")

SETTER = "tests/test_a_setup.py::test_set_currency"
POLLUTER = "tests/test_a_setup.py::test_turn_on_debug"
VICTIM = "tests/test_b_shop.py::test_quiet_by_default"
BRITTLE = "tests/test_b_shop.py::test_price_in_eur"
BRITTLE2 = "tests/test_c_more.py::test_rate_after_eur"
AFTER = "tests/test_c_more.py::test_clean_after_the_chain"
TESTS = (SETTER, POLLUTER, VICTIM, BRITTLE, BRITTLE2, AFTER)

PKG = 'SETTINGS = {"currency": "USD"}\nFLAGS = {"debug": False}\n'
SETUP = """
import shopcfg

def test_set_currency():
    shopcfg.SETTINGS["currency"] = "EUR"

def test_turn_on_debug():
    shopcfg.FLAGS["debug"] = True
"""
SHOP = """
import shopcfg

def test_quiet_by_default():
    assert shopcfg.FLAGS["debug"] is False

def test_price_in_eur():
    assert shopcfg.SETTINGS["currency"] == "EUR"
    shopcfg.SETTINGS["rate"] = 1.1
"""
MORE = """
import shopcfg

def test_rate_after_eur():
    assert shopcfg.SETTINGS.get("rate") == 1.1

def test_clean_after_the_chain():
    assert shopcfg.SETTINGS == {"currency": "USD"}
"""


def _suite(pytester: pytest.Pytester, chain: bool = True, **bodies: str) -> None:
    """The shop suite: setter -> brittle -> brittle2 across three modules, and a polluter
    that runs before its victim in declared order."""
    pytester.makepyfile(shopcfg=PKG)
    tests = pytester.mkdir("tests")
    files = {"test_a_setup": SETUP, "test_b_shop": SHOP, "test_c_more": MORE, **bodies}
    for name, body in files.items():
        (tests / f"{name}.py").write_text(body)
    deps = [Dependency("polluter", POLLUTER, VICTIM, ("shopcfg:FLAGS['debug']",), True)]
    if chain:
        deps += [
            Dependency("state-setter", SETTER, BRITTLE, ("shopcfg:SETTINGS['currency']",), True),
            Dependency("state-setter", BRITTLE, BRITTLE2, ("shopcfg:SETTINGS['rate']",), True),
        ]
    save_graph(pytester.path, DependencyGraph(tests=TESTS, dependencies=tuple(deps)))


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "isolator", "-rA", *args
    )


def _outcomes(result: pytest.RunResult) -> dict[str, str]:
    out = {}
    for line in result.stdout.lines:
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "ERROR") and rest.startswith("tests/"):
            out[rest.split(" ")[0]] = word.lower()
    return out


def test_without_the_chain_fork_mode_breaks_the_brittle_tests(pytester: pytest.Pytester) -> None:
    # The control: each test in a child of its own cannot see its setter's state.
    _suite(pytester, chain=False)
    got = _outcomes(_run(pytester, "--reset=fork"))
    assert got[BRITTLE] == "failed" and got[BRITTLE2] == "failed"
    assert got[VICTIM] == "passed"


def test_fork_mode_runs_a_chain_in_one_child(pytester: pytest.Pytester) -> None:
    _suite(pytester)
    result = _run(pytester, "--reset=fork", "--explain-order")
    assert _outcomes(result) == dict.fromkeys(TESTS, "passed")
    result.stdout.fnmatch_lines(
        [
            f"*chain (no reset between): {SETTER} -> {BRITTLE} -> {BRITTLE2}",
            "*ran 6 test(s) in a forked child: --reset=fork (6)",
        ]
    )
    # The polluter ran before its victim (no polluter edge under a resetting mode)...
    lines = result.stdout.lines
    assert _index(lines, POLLUTER) < _index(lines, VICTIM)
    # ...and the chain ran back to back.
    chain = [_index(lines, t) for t in (SETTER, BRITTLE, BRITTLE2)]
    assert chain == sorted(chain) and chain[-1] - chain[0] == 2


def _index(lines: list[str], nodeid: str) -> int:
    return next(i for i, line in enumerate(lines) if line.startswith(f"PASSED {nodeid}"))


def test_fork_mode_chain_under_xdist(pytester: pytest.Pytester) -> None:
    _suite(pytester)
    result = _run(pytester, "--reset=fork", "-n", "2")
    assert _outcomes(result) == dict.fromkeys(TESTS, "passed")


@pytest.mark.parametrize(
    "forked",
    [SETTER, BRITTLE, BRITTLE2],
    ids=["setter", "brittle", "last"],
)
def test_fork_fallback_takes_the_whole_chain(pytester: pytest.Pytester, forked: str) -> None:
    # Any forked member (here --isolator-fork; fork.json and the marker feed the same
    # plan) forks the chain from its first test: the chain passes, and its state never
    # reaches the tests that run in this process afterwards.
    _suite(pytester)
    result = _run(pytester, "--reset=minimal", f"--isolator-fork={forked}")
    assert _outcomes(result) == dict.fromkeys(TESTS, "passed")
    result.stdout.fnmatch_lines(["*ran 3 test(s) in a forked child*"])


def test_unrestorable_setter_state_forks_the_chain_next_time(pytester: pytest.Pytester) -> None:
    # A setter whose state cannot be copied: the first run shares it along the chain and
    # reports it; from the next run on the chain runs in one child and nothing is left.
    _suite(
        pytester,
        test_a_setup=SETUP.replace(
            'shopcfg.SETTINGS["currency"] = "EUR"',
            'shopcfg.SETTINGS["currency"] = "EUR"\n    next(shopcfg.IDS)',
        ),
    )
    (pytester.path / "shopcfg.py").write_text("IDS = (n for n in range(99))\n" + PKG)
    first = _run(pytester, "--reset=minimal")
    assert _outcomes(first) == dict.fromkeys(TESTS, "passed")
    first.stdout.fnmatch_lines(["*could not reset after*shopcfg:IDS*"])
    assert json.loads((pytester.path / ".isolator" / "fork.json").read_text())
    second = _run(pytester, "--reset=minimal")
    assert _outcomes(second) == dict.fromkeys(TESTS, "passed")
    assert "could not reset after" not in second.stdout.str()
    second.stdout.fnmatch_lines(["*ran 3 test(s) in a forked child*"])


def test_a_crash_inside_a_chain_is_reported_and_the_run_goes_on(
    pytester: pytest.Pytester,
) -> None:
    crash = SHOP.replace('shopcfg.SETTINGS["rate"] = 1.1', "import os; os._exit(3)")
    _suite(pytester, test_b_shop=crash)
    result = _run(pytester, "--reset=fork")
    got = _outcomes(result)
    assert got[SETTER] == "passed" and got[AFTER] == "passed"
    assert got[BRITTLE] == "failed"
    # The chain's child is gone: the last test runs without its state, in a new child.
    assert got[BRITTLE2] == "failed"
    result.stdout.fnmatch_lines(["*the test process crashed (exit code 3)*"])


def test_stopping_inside_a_chain_ends_its_child(pytester: pytest.Pytester) -> None:
    # -x after the setter failed: the rest of the chain does not run, and the run ends
    # (the child waiting for the chain's next test is told to stop, not left behind).
    _suite(pytester, test_a_setup=SETUP.replace('= "EUR"', '= "EUR"\n    assert False'))
    pytester.makeconftest(CHILDREN_LEFT)
    result = _run(pytester, "--reset=fork", "-x")
    assert _outcomes(result) == {SETTER: "failed"}
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert (pytester.path / "children.txt").read_text() == "none"


# Written when the session ends: whether this process still has a child process.
CHILDREN_LEFT = """
import os

def pytest_sessionfinish(session):
    try:
        pid, _ = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        pid = None
    with open(os.path.join(str(session.config.rootpath), "children.txt"), "w") as f:
        f.write("none" if pid is None else "still running")
"""


SUBTESTS = """
import unittest

class T(unittest.TestCase):
    def test_unittest_subtests(self):
        for i in range(3):
            with self.subTest(i=i):
                self.assertNotEqual(i, 1)

def test_subtests_fixture(subtests):
    for i in range(3):
        with subtests.test(i=i):
            assert i != 2
"""


@pytest.mark.skipif(pytest.version_tuple < (9,), reason="subtests are built in from pytest 9")
def test_a_forked_test_reports_its_subtests_as_in_its_own_process(
    pytester: pytest.Pytester,
) -> None:
    # Subtests log their own reports while the test runs: in a forked child those reach
    # the parent with the test's phases, and a test whose subtests failed fails, as in a
    # plain run (before, both tests were reported passed).
    pytester.makepyfile(test_sub=SUBTESTS)
    _same_plain_and_forked(
        pytester,
        2,
        dict(failed=3, passed=1),
        [
            "SUBFAILED*test_sub.py::T::test_unittest_subtests - AssertionError: 1 == 1",
            "SUBFAILED*test_sub.py::test_subtests_fixture - assert 2 != 2",
            "FAILED test_sub.py::test_subtests_fixture - contains 1 failed subtest",
        ],
    )


def _same_plain_and_forked(
    pytester: pytest.Pytester, tests: int, outcomes: dict[str, int], lines: list[str]
) -> None:
    """A plain run and a --reset=fork run of pytester's suite report the same."""
    plain = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:isolator")
    forked = _run(pytester, "--reset=fork")
    assert f"ran {tests} test(s) in a forked child" in forked.stdout.str()
    for result in (plain, forked):
        result.assert_outcomes(**outcomes)
        result.stdout.fnmatch_lines(lines)


WARNS = """
import warnings
import pytest

class MyWarning(UserWarning):
    pass

def test_warns_deprecation():
    warnings.warn("old api", DeprecationWarning)

def test_warns_custom():
    warnings.warn("custom thing", MyWarning)

@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_warns_error():
    warnings.warn("boom", RuntimeWarning)
"""


def test_a_forked_test_reports_its_warnings_as_in_its_own_process(
    pytester: pytest.Pytester,
) -> None:
    # Warnings a test shows in a forked child reach the parent's warnings summary, with
    # their category (the test module's own class too), and a filterwarnings mark still
    # turns one into an error (before, a forked run showed no warnings).
    pytester.makepyfile(test_w=WARNS)
    _same_plain_and_forked(
        pytester,
        3,
        dict(failed=1, passed=2, warnings=2),
        [
            "*warnings summary*",
            "test_w.py::test_warns_deprecation",
            "*test_w.py:*: DeprecationWarning: old api",
            "test_w.py::test_warns_custom",
            "*test_w.py:*: MyWarning: custom thing",
        ],
    )


def test_multiprocessings_resource_tracker_is_no_process_a_later_forked_test_left(
    pytester: pytest.Pytester,
) -> None:
    # A spawn-context pool starts multiprocessing's resource tracker, which stays for the
    # life of the process by design; the next test, forked, must not be blamed for it
    # (nor the run split in two).
    pytester.makepyfile(
        test_fk="""
import concurrent.futures
import multiprocessing

import pytest

def test_pool():
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as ex:
        assert ex.submit(abs, -1).result() == 1

@pytest.mark.isolator_fork
def test_forked():
    pass

def test_after():
    pass
"""
    )
    result = pytester.run(
        sys.executable, "-m", "isolator", "run", "-p", "no:randomly", "-p", "no:cacheprovider",
        timeout=120,
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=3)
    out = result.stdout.str()
    assert "could not reset" not in out and "Interrupted" not in out, out
