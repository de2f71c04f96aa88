"""The scheduler end to end: real pytest runs of ``tests/data/sched_suite`` with the
dependency graph ``isolator deps`` confirms on it, under random orders, selection,
pytest-xdist and execnet gateways, each compared with plain pytest on the same suite."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from isolator._store import load_graph

DATA = Path(__file__).parent / "data"
SUITE = DATA / "sched_suite"
DRIVER = DATA / "sched_driver.py"
T = "tests/"
S_CURRENCY = T + "test_a_setup.py::test_configure_currency"
S_TAX = T + "test_a_setup.py::test_configure_tax"
B_EUR = T + "test_pricing.py::test_price_in_eur"
B_TAX = T + "test_pricing.py::test_price_with_tax"
V_NOTAX = T + "test_0_defaults.py::test_no_tax_by_default"
REGISTER = T + "test_registry.py::test_register_plugin"
ENABLE = T + "test_registry.py::test_enable_plugin"
ENABLED = T + "test_registry.py::test_plugin_enabled"
P_DEBUG = T + "test_flags.py::test_turn_on_debug"
C_DEBUG = T + "test_flags.py::test_reset_debug"
V_QUIET = T + "test_output.py::test_quiet_output"
P_MODE = T + "test_env.py::test_sets_mode"
V_MODE = T + "test_env.py::test_default_mode"
N_TESTS = 38

# The planted dependencies (issue 4: the scheduler runs on what `isolator deps` confirms).
PLANTED = json.loads((SUITE / "EXPECTED.json").read_text())["dependencies"]
# Tests whose outcome depends on the order: the only ones allowed to fail in plain runs.
ORDER_DEPENDENT = {e["target"] for e in PLANTED}
assert ORDER_DEPENDENT == {B_EUR, B_TAX, V_NOTAX, ENABLE, ENABLED, V_QUIET, V_MODE}
CHAINS = [[S_CURRENCY, B_EUR], [S_TAX, B_TAX], [REGISTER, ENABLE, ENABLED]]


def _env() -> dict[str, str]:
    # TOX_ENV_DIR would move pytest's cache (--lf, failed-first) of every run into tox's
    # env dir, shared by all of them.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "SHOP_", "TOX_"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run(suite: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=suite,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def drive(suite: Path, runs: list[list[str]], name: str) -> list[dict[str, Any]]:
    """Many pytest runs in one process (tests/data/sched_driver.py)."""
    runs_file = suite / f"{name}.runs.json"
    out_file = suite / f"{name}.out.json"
    runs_file.write_text(json.dumps(runs))
    proc = subprocess.run(
        [sys.executable, str(DRIVER), str(runs_file), str(out_file)],
        cwd=suite,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: list[dict[str, Any]] = json.loads(out_file.read_text())
    return result


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the suite with the graph `isolator deps` stored in its .isolator/ (one
    detector run for the whole module, a second or two)."""
    dest = tmp_path_factory.mktemp("sched") / "suite"
    shutil.copytree(SUITE, dest, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    proc = subprocess.run(
        [sys.executable, "-m", "isolator", "deps", "-q", "-p", "no:randomly",
         "-p", "no:cacheprovider"],
        cwd=dest,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    graph = load_graph(dest)
    assert len(graph.tests) == N_TESTS, graph.tests
    found = {(d.kind, d.source, d.target) for d in graph.confirmed()}
    missing = {(e["kind"], e["source"], e["target"]) for e in PLANTED} - found
    assert not missing, (missing, proc.stdout, proc.stderr)
    cleaners = {(c.polluter, c.victim): c.cleaners for c in graph.cleaners}
    assert C_DEBUG in cleaners[(P_DEBUG, V_QUIET)], graph.cleaners
    return dest


@pytest.fixture
def suite(template: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "suite"
    shutil.copytree(template, dest)
    return dest


def summary(out: str) -> str:
    """The 'isolator order' section of a pytest run's output."""
    m = re.search(r"=+ isolator order =+\n(.*?)(?:\n=+ |\Z)", out, re.S)
    assert m, out
    return m.group(1)


def per_worker_sequences(out: str) -> dict[str, list[str]]:
    """Execution order per xdist worker, from ``-v`` output (``[gw0] [ 5%] PASSED id``)."""
    seqs: dict[str, list[str]] = {}
    for m in re.finditer(r"^\[(gw\d+)\] \[\s*\d+%\] (?:PASSED|FAILED|ERROR) (\S+)", out, re.M):
        seqs.setdefault(m.group(1), []).append(m.group(2))
    return seqs


def assert_chains_kept(seqs: dict[str, list[str]]) -> None:
    for chain in CHAINS:
        holders = [w for w, seq in seqs.items() if chain[0] in seq]
        assert len(holders) == 1
        seq = seqs[holders[0]]
        i = seq.index(chain[0])
        assert seq[i : i + len(chain)] == chain, (chain, seq)
    for victim, polluter in ((V_QUIET, P_DEBUG), (V_MODE, P_MODE), (V_NOTAX, S_TAX)):
        for seq in seqs.values():
            if victim in seq and polluter in seq:
                assert seq.index(victim) < seq.index(polluter) or (
                    victim == V_QUIET and C_DEBUG in seq[seq.index(polluter) : seq.index(victim)]
                )


# -- 1. twenty seeds, serial and -n 2, isolator vs plain -----------------------------------


def test_twenty_seeds_serial_and_xdist_keep_dependencies(template: Path) -> None:
    base = ["-qq", "-p", "no:cacheprovider"]
    seeds = range(1, 21)

    def iso(seed: int, *extra: str) -> list[str]:
        # Half the seeds through pytest-randomly's shuffle, half through --order=random.
        if seed % 2:
            return [*base, "-p", "randomly", f"--randomly-seed={seed}", *extra]
        return [*base, "-p", "no:randomly", "--order=random", f"--seed={seed}", *extra]

    def plain(seed: int, *extra: str) -> list[str]:
        return [*base, "-p", "no:isolator", "-p", "randomly", f"--randomly-seed={seed}", *extra]

    xdist = ("-n", "2", "--dist", "load")
    jobs = {
        "iso": [iso(s) for s in seeds] + [iso(s, *xdist) for s in seeds],
        "plain": [plain(s) for s in seeds] + [plain(s, *xdist) for s in seeds],
    }
    with ThreadPoolExecutor(2) as pool:
        futures = {k: pool.submit(drive, template, runs, k) for k, runs in jobs.items()}
        results = {k: f.result() for k, f in futures.items()}

    for r in results["iso"]:
        assert (r["exit"], r["failed"], r["passed"]) == (0, [], N_TESTS), r
    serial, parallel = results["plain"][:20], results["plain"][20:]
    for label, rs in (("serial", serial), ("-n 2", parallel)):
        failing = [r for r in rs if r["failed"]]
        assert len(failing) >= 10, f"plain {label}: only {len(failing)}/20 runs failed"
        for r in failing:
            assert set(r["failed"]) <= ORDER_DEPENDENT, r
            assert r["passed"] + len(r["failed"]) == N_TESTS


def test_xdist_runs_chains_on_one_worker_in_order(suite: Path) -> None:
    proc = run(suite, "-v", "-p", "no:randomly", "--order=random", "--seed=11", "-n", "2")
    assert proc.returncode == 0, proc.stdout[-3000:]
    seqs = per_worker_sequences(proc.stdout)
    assert set(seqs) == {"gw0", "gw1"} and sum(map(len, seqs.values())) == N_TESTS
    assert_chains_kept(seqs)
    text = summary(proc.stdout)
    assert "order: random (seed 11)" in text
    assert re.search(r"gw\d: chain tests/test_registry.py::test_register_plugin -> ", text)


# -- 2. selection pulls in setters ---------------------------------------------------------


def test_k_selection_pulls_in_the_setters(suite: Path) -> None:
    iso = run(suite, "-p", "no:randomly", "-k", "test_plugin_enabled")
    assert iso.returncode == 0, iso.stdout[-2000:]
    assert "3 passed, 35 deselected" in iso.stdout
    text = summary(iso.stdout)
    assert f"pulled in {ENABLE} (state-setter of {ENABLED})" in text
    assert f"pulled in {REGISTER} (state-setter of {ENABLE})" in text

    plain = run(suite, "-p", "no:randomly", "-p", "no:isolator", "-k", "test_plugin_enabled")
    assert plain.returncode == 1
    assert "1 failed, 37 deselected" in plain.stdout


def test_node_id_selection_pulls_in_setters_from_other_files(suite: Path) -> None:
    iso = run(suite, "-p", "no:randomly", "-v", B_TAX)
    assert iso.returncode == 0, iso.stdout[-2000:]
    assert iso.stdout.index(f"{S_TAX} PASSED") < iso.stdout.index(f"{B_TAX} PASSED")
    assert f"pulled in {S_TAX}" in summary(iso.stdout)
    plain = run(suite, "-p", "no:randomly", "-p", "no:isolator", B_TAX)
    assert plain.returncode == 1


def test_last_failed_pulls_in_setters(suite: Path) -> None:
    first = run(suite, "-p", "no:isolator", "-p", "randomly", "--randomly-seed=3")
    assert first.returncode == 1
    lf = run(suite, "-p", "no:randomly", "--lf", "-v")
    assert lf.returncode == 0, lf.stdout[-3000:]
    assert "run-last-failure: rerun previous" in lf.stdout
    text = summary(lf.stdout)
    assert "pulled in" in text
    for line in text.splitlines():
        if line.startswith("pulled in "):
            nodeid = line.split()[2]
            assert f"{nodeid} PASSED" in lf.stdout


def test_k_selection_under_xdist(suite: Path) -> None:
    proc = run(suite, "-p", "no:randomly", "-k", "price_in_eur or plugin_enabled", "-n", "2")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "5 passed" in proc.stdout
    assert f"pulled in {S_CURRENCY}" in summary(proc.stdout)


# -- 3. execnet gateways --------------------------------------------------------------------


def test_two_popen_gateways(suite: Path) -> None:
    proc = run(suite, "-v", "-p", "no:randomly", "--order=reverse", "-d", "--tx", "2*popen")
    assert proc.returncode == 0, proc.stdout[-3000:]
    seqs = per_worker_sequences(proc.stdout)
    assert len(seqs) == 2
    assert_chains_kept(seqs)


@pytest.fixture
def socket_gateways() -> Iterator[list[int]]:
    """Two execnet socket servers on 127.0.0.1 (random ports), killed after the test.

    Each runs in its own process group under coreutils ``timeout`` (a bound on its lifetime
    should this test process die); teardown kills the whole group, server included.
    """
    spec = importlib.util.find_spec("execnet.script.socketserver")
    assert spec is not None and spec.origin is not None
    limit = ["timeout", "120"] if shutil.which("timeout") else []
    procs = [
        subprocess.Popen(
            [*limit, sys.executable, "-u", spec.origin, "127.0.0.1:0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=_env(),
            start_new_session=True,
        )
        for _ in range(2)
    ]
    try:
        ports = []
        deadline = time.monotonic() + 30
        for p in procs:
            assert p.stdout is not None
            while time.monotonic() < deadline:
                line = p.stdout.readline()
                m = re.search(r"Entering Accept loop \('127\.0\.0\.1', (\d+)\)", line)
                if m:
                    ports.append(int(m.group(1)))
                    break
                assert line, "socket server exited"
        assert len(ports) == 2
        yield ports
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(timeout=10)
            if p.stdout is not None:
                p.stdout.close()


def test_socket_gateways(suite: Path, socket_gateways: list[int]) -> None:
    tx = [
        a for port in socket_gateways for a in ("--tx", f"socket=127.0.0.1:{port}//chdir={suite}")
    ]
    proc = run(suite, "-v", "-p", "no:randomly", "--order=random", "--seed=5", "-d", *tx)
    assert proc.returncode == 0, proc.stdout[-3000:]
    seqs = per_worker_sequences(proc.stdout)
    assert len(seqs) == 2 and sum(map(len, seqs.values())) == N_TESTS
    assert_chains_kept(seqs)
    assert "chain" in summary(proc.stdout)


# -- reset modes ----------------------------------------------------------------------------


def test_minimal_reset_keeps_state_along_chains(suite: Path) -> None:
    for seed in (1, 2):
        proc = run(suite, "-p", "isolator", "--reset=minimal", "-p", "no:randomly",
                   "--order=random", f"--seed={seed}")  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-3000:]
        assert f"{N_TESTS} passed" in proc.stdout
        assert "reset=minimal" in summary(proc.stdout)
    # Control: without the graph the resetter undoes each setter's state, brittles fail.
    (suite / ".isolator" / "deps.json").unlink()
    proc = run(suite, "-p", "isolator", "--reset=minimal", "-p", "no:randomly")
    assert proc.returncode == 1
    assert "test_price_in_eur" in proc.stdout


# -- orders ---------------------------------------------------------------------------------


def collected(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in proc.stdout.splitlines() if "::" in line and " " not in line]


def test_failed_first_respects_setters(suite: Path) -> None:
    first = run(suite, "-p", "no:isolator", "-p", "randomly", "--randomly-seed=3", "-rf")
    assert first.returncode == 1, first.stdout[-3000:]
    failed = re.findall(r"^FAILED (\S+)", first.stdout, re.M)
    lastfailed = json.loads((suite / ".pytest_cache/v/cache/lastfailed").read_text())
    assert failed and set(failed) <= set(lastfailed)
    order = collected(run(suite, "-p", "no:randomly", "--order=failed-first", "--co", "-q"))
    assert sorted(order) == sorted(json.loads((suite / ".isolator/deps.json").read_text())["tests"])
    # Failed tests (with their setters and the victims that must precede those) come
    # before every independent test.
    first_independent = min(i for i, t in enumerate(order) if "test_misc" in t)
    assert max(order.index(t) for t in lastfailed) < first_independent
    for chain in CHAINS:
        i = order.index(chain[0])
        assert order[i : i + len(chain)] == chain


def test_changed_first_since_last_run(suite: Path) -> None:
    assert run(suite, "-p", "no:randomly", "--order=declared").returncode == 0
    env_file = suite / "tests" / "test_env.py"
    env_file.write_text(env_file.read_text() + "\n# edited\n")
    proc = run(suite, "-p", "no:randomly", "--order=changed-first", "--co", "-q")
    assert collected(proc)[:2] == [V_MODE, P_MODE]
    assert "changed-first: 2 test(s) cover changed files" in summary(proc.stdout)


def test_changed_first_since_git_ref(suite: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=suite, check=True, capture_output=True)

    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base")
    (suite / "shopcfg.py").write_text((suite / "shopcfg.py").read_text() + "\n# edited\n")
    proc = run(suite, "-p", "no:randomly", "--changed-since=HEAD", "--co", "-q")
    order = collected(proc)
    # Every test that imports shopcfg comes before the ones that do not.
    untouched = [i for i, t in enumerate(order) if "test_env" in t or "test_misc" in t]
    assert untouched == list(range(len(order) - len(untouched), len(order)))
    assert "changed-first: 11 test(s) cover changed files" in summary(proc.stdout)

    bad = run(suite, "--changed-since=no-such-ref", "--co", "-q")
    assert bad.returncode == 4
    err = [line for line in bad.stderr.splitlines() if line.strip()]
    assert len(err) == 1 and "--changed-since no-such-ref" in err[0], bad.stderr


def test_explain_order_lists_every_decision(suite: Path) -> None:
    proc = run(suite, "-p", "no:randomly", "--order=reverse", "--explain-order")
    assert proc.returncode == 0
    text = summary(proc.stdout)
    assert f"chain (no reset between): {REGISTER} -> {ENABLE} -> {ENABLED}" in text
    assert f"victim {V_MODE} before polluter {P_MODE}" in text
    assert "--explain-order lists them" not in text


# -- 5. bad input ---------------------------------------------------------------------------


def test_stale_graph_warns_and_falls_back(suite: Path) -> None:
    setup = suite / "tests" / "test_a_setup.py"
    setup.write_text(setup.read_text().replace("test_configure_currency", "test_set_currency"))
    out = suite / "tests" / "test_output.py"
    out.write_text(out.read_text() + "\n\ndef test_new_one():\n    pass\n")
    for extra in ((), ("-n", "2")):
        proc = run(suite, "-p", "no:randomly", "--order=random", "--seed=2", *extra)
        assert "Traceback" not in proc.stdout + proc.stderr
        text = summary(proc.stdout)
        assert "stale dependency graph: 2 collected test(s) not in deps.json" in text
        assert "test_configure_currency); their partners keep their declared order" in text
        # The renamed setter and its brittle test keep their declared order: both pass.
        assert proc.returncode == 0, proc.stdout[-3000:]


def test_corrupt_graph_is_one_warning_line(suite: Path) -> None:
    (suite / ".isolator" / "deps.json").write_text("{{{")
    proc = run(suite, "-p", "no:randomly")
    assert proc.returncode == 0
    lines = [line for line in proc.stdout.splitlines() if "deps.json" in line]
    assert lines and all("unreadable or corrupt" in line for line in lines)
    assert "Traceback" not in proc.stdout + proc.stderr


def test_bad_order_option_is_a_usage_error(suite: Path) -> None:
    proc = run(suite, "--order=sideways")
    assert proc.returncode == 4
    assert "invalid choice: 'sideways'" in proc.stderr


# -- fixed cost of runs that do not use the scheduler (issue 2) -----------------------------

MODULES_PROBE = """
import json, sys


def pytest_sessionfinish(session):
    loaded = sorted(m for m in sys.modules if m.startswith("isolator."))
    if session.config.pluginmanager.has_plugin("isolator-sched"):
        loaded.append("<isolator-sched registered>")
    with open("loaded.json", "w") as fh:
        json.dump(loaded, fh)
"""


@pytest.mark.parametrize("args", [[], ["-p", "isolator", "--reset=none"]])
def test_no_graph_no_order_imports_no_scheduler(pytester: pytest.Pytester, args: list[str]) -> None:
    # isolator is loaded (entry point or -p), its order plugin too, but it has nothing
    # to order: the scheduler stage stays unimported, no hook of the plugin runs.
    pytester.makeconftest(MODULES_PROBE)
    pytester.makepyfile(test_a="def test_one():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:randomly", *args)
    result.assert_outcomes(passed=1)
    loaded = json.loads((pytester.path / "loaded.json").read_text())
    assert "isolator._schedplugin" in loaded
    assert "isolator.scheduler" not in loaded
    assert "<isolator-sched registered>" not in loaded


def test_an_order_or_a_graph_imports_the_scheduler(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(MODULES_PROBE)
    pytester.makepyfile(test_a="def test_one():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:randomly", "--order=reverse")
    result.assert_outcomes(passed=1)
    loaded = json.loads((pytester.path / "loaded.json").read_text())
    assert {"isolator.scheduler", "<isolator-sched registered>"} <= set(loaded)


def test_a_corrupt_graph_is_still_reported_without_an_order(pytester: pytest.Pytester) -> None:
    # Inactive (no usable graph, no --order), but with a warning to show.
    pytester.makepyfile(test_a="def test_one():\n    pass\n")
    (pytester.path / ".isolator").mkdir()
    (pytester.path / ".isolator" / "deps.json").write_text("{")
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*isolator: warning:*running without the dependency graph*"])


# -- items sharing a node id ------------------------------------------------------------------

SAME_ID_CONFTEST = """
import pytest


def pytest_collect_file(file_path, parent):
    if file_path.suffix == ".cases":
        return Cases.from_parent(parent, path=file_path)


class Cases(pytest.File):
    def collect(self):
        for word in self.path.read_text().split():
            yield Case.from_parent(self, name="case", word=word)  # every item named alike


class Case(pytest.Item):
    def __init__(self, *, word, **kw):
        super().__init__(**kw)
        self.word = word

    def runtest(self):
        self.user_properties.append(("word", self.word))  # (files written are put back)
        assert self.word != "bad"
"""


def test_items_sharing_a_node_id_all_run_in_every_order(pytester: pytest.Pytester) -> None:
    # docopt-ng's test cases share node ids: reordering by id ran one item of each id
    # (the failure hidden), failed-first raised INTERNALERROR, and xdist with a graph too.
    pytester.makeconftest(SAME_ID_CONFTEST)
    (pytester.path / "test_x.cases").write_text("one bad three\n")
    (pytester.path / "test_y.py").write_text("def test_y():\n    pass\n")
    xml = pytester.path / "out.xml"

    def run(*args: str) -> list[str]:
        result = pytester.runpytest_subprocess(
            "-p", "no:randomly", "-p", "isolator", f"--junitxml={xml}", *args
        )
        result.assert_outcomes(passed=3, failed=1)
        assert "INTERNALERROR" not in result.stdout.str()
        props = ElementTree.parse(xml).iter("property")
        return [p.get("value", "") for p in props if p.get("name") == "word"]

    assert run() == ["one", "bad", "three"]
    assert run("--order=reverse") == ["three", "bad", "one"]
    assert sorted(run("--order=random", "--seed=3")) == ["bad", "one", "three"]
    assert run("--order=failed-first") == ["one", "bad", "three"]  # the failed id first
    deps = subprocess.run(
        [sys.executable, "-m", "isolator", "deps", "-p", "no:randomly"],
        cwd=pytester.path, env=_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert deps.returncode == 0, deps.stdout + deps.stderr
    assert sorted(run("-n", "2")) == ["bad", "one", "three"]  # the graph's xdist scheduler


CHAIN_INTO_CLASS = """
import sys
import pytest
import state


def test_a():
    state.X = 1
    state.REG["a"] = 1
    state.ITEMS.append("a")
    import extra_mod


@pytest.fixture(scope="class")
def cfix():
    state.Y = 2
    state.REG["fix"] = 2
    yield
    state.Y = None
    del state.REG["fix"]


class TestB:
    def test_b(self, cfix):
        assert state.X == 1 and state.REG == {"a": 1, "fix": 2} and state.ITEMS == ["a"]
        assert "extra_mod" in sys.modules

    def test_c(self, cfix):
        assert state.X is None and state.REG == {"fix": 2} and state.ITEMS == []
        assert state.Y == 2 and "extra_mod" not in sys.modules


def test_d():
    assert state.X is None and state.Y is None and state.REG == {} and state.ITEMS == []
    assert "extra_mod" not in sys.modules
"""


def test_a_setter_chain_into_a_class_leaves_its_state_out_of_the_class_fixture(
    pytester: pytest.Pytester,
) -> None:
    """A state-setter kept for the first test of a class whose class-scoped fixture sets
    up: the fixture's baseline takes the fixture's own writes only.  The setter's (a
    global, a dict entry beside the fixture's, a list, an import) are put back after the
    brittle test, as without the fixture; the class's other tests get the fixture's."""
    pytester.makepyfile(
        state="X = None\nY = None\nREG = {}\nITEMS = []\n",
        extra_mod="LOADED = True\n",
        test_chain=CHAIN_INTO_CLASS,
    )
    deps = subprocess.run(
        [sys.executable, "-m", "isolator", "deps", "-p", "no:randomly", "--format", "json"],
        cwd=pytester.path, env=_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert deps.returncode == 0, deps.stdout + deps.stderr
    found = {(d["kind"], d["source"], d["target"]) for d in json.loads(deps.stdout)["dependencies"]}
    assert ("state-setter", "test_chain.py::test_a", "test_chain.py::TestB::test_b") in found
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "isolator", "-v")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*1 state-setter chain(s) kept together*"])


PARAM_FIXTURE = """
import pytest

@pytest.fixture(scope="module", params=["x", "y"])
def mode(request):
    return request.param

def test_a(mode):
    pass

def test_b(mode):
    pass
"""


def test_declared_and_reverse_orders_keep_the_grouping_by_fixture_parameters(
    pytester: pytest.Pytester,
) -> None:
    # pytest runs a module-scoped fixture's tests grouped by its parameter, setting it up
    # once for each.  --order=declared took the raw collection order (test_a[x], test_a[y],
    # test_b[x], ...) instead, which set the fixture up again for every test: typeguard's
    # module fixture, which instruments a module, made its file 25 times slower.
    pytester.makepyfile(test_params=PARAM_FIXTURE)
    xml = pytester.path / "out.xml"

    def order(*args: str) -> list[str]:
        result = pytester.runpytest_subprocess("-p", "no:randomly", f"--junitxml={xml}", *args)
        result.assert_outcomes(passed=4)
        return [c.get("name", "") for c in ElementTree.parse(xml).iter("testcase")]

    plain = order("-p", "no:isolator")
    assert plain == ["test_a[x]", "test_b[x]", "test_a[y]", "test_b[y]"]
    assert order("-p", "isolator", "--order=declared") == plain
    assert order("-p", "isolator", "--order=reverse") == plain[::-1]


def test_random_order_sets_up_each_module_fixture_once(pytester: pytest.Pytester) -> None:
    # --order=random shuffles modules, then classes and tests within each: a module- or
    # class-scoped fixture is set up once per parameter, as in declared order.
    pytester.makeconftest(
        """
import pytest
@pytest.fixture(scope="module", params=["x", "y"])
def resource(request):
    print(f"\\nSETUP {request.module.__name__} {request.param}")
    return request.param
"""
    )
    for m in range(3):
        pytester.makepyfile(
            **{
                f"test_m{m}": "\n".join(
                    f"def test_{i}(resource):\n    pass\nclass TestC{i}:\n"
                    f"    def test_a(self, resource):\n        pass\n"
                    f"    def test_b(self):\n        pass"
                    for i in range(4)
                )
            }
        )
    seen = set()
    for seed in (1, 2, 3):
        result = pytester.runpytest_subprocess(
            "-p", "no:randomly", "-p", "isolator", "--order=random", f"--seed={seed}", "-s", "-v"
        )  # fmt: skip
        result.assert_outcomes(passed=3 * 4 * 5)
        setups = [line for line in result.stdout.lines if line.startswith("SETUP ")]
        assert len(setups) == len(set(setups)) == 6, setups
        seen.add(tuple(line for line in result.stdout.lines if "PASSED" in line))
    assert len(seen) == 3
