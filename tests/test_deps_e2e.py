"""``isolator deps`` and ``isolator explain`` end to end: real pytest child processes on
copies of data suites (the statekinds suite, small suites written here, and, marked slow,
the real six and parso suites)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import _orders
import pytest
import test_deps_plans

ROOT = Path(__file__).resolve().parents[1]
STATEKINDS = ROOT / "tests" / "data" / "statekinds"
SCHED_SUITE = ROOT / "tests" / "data" / "sched_suite"
EXPERIMENTS = ROOT / "experiments"
ISOLATOR = [sys.executable, "-m", "isolator"]
# The child runs must not shuffle, nor write a cache into the copies.
QUIET = ["-p", "no:randomly", "-p", "no:cacheprovider"]


def isolator(
    cwd: Path, *args: str, timeout: float = 300, exe: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*(exe or ISOLATOR), *args],
        cwd=cwd,
        env=_orders.clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stdout, proc.stdout


def write_suite(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\n", encoding="utf-8")
    return root


# ----------------------------------------------------------------------- statekinds suite


def _normalize(site: str, root: Path) -> str:
    """<file> sites of the copy, relative to its root as in EXPECTED.json."""
    prefix = f"<file>:{root}/"
    return "<file>:" + site[len(prefix) :] if site.startswith(prefix) else site


def test_statekinds_every_planted_dependency_is_found_confirmed_and_named(
    tmp_path: Path,
) -> None:
    expected = json.loads((STATEKINDS / "EXPECTED.json").read_text())
    suite = _orders.fresh_copy(STATEKINDS, tmp_path)
    proc = isolator(
        suite, "deps", "--budget", "0", "--format", "json", "--output", "deps.json",
        "--graph", "deps.html",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    no_traceback(proc)
    doc = json.loads((suite / "deps.json").read_text())
    assert doc["schema"] == "isolator.deps/1"
    confirmed = {(d["source"], d["target"]): d for d in doc["dependencies"] if d["confirmed"]}
    cleaners = {(c["polluter"], c["victim"]): c["cleaners"] for c in doc["cleaners"]}
    problems = []
    for e in expected["dependencies"]:
        key = (e["source"], e["target"])
        d = confirmed.get(key)
        if d is None:
            problems.append(f"not confirmed: {key}")
            continue
        if d["kind"] != e["kind"]:
            problems.append(f"{key}: kind {d['kind']} instead of {e['kind']}")
        sites = [_normalize(s, suite) for s in d["state"]]
        if not any(s.startswith(e["state_object"]) for s in sites):
            problems.append(f"{key}: state {sites}, expected {e['state_object']}")
        if e["kind"] == "polluter" and sorted(cleaners.get(key, [])) != sorted(e["cleaners"]):
            problems.append(f"{key}: cleaners {cleaners.get(key)} instead of {e['cleaners']}")
    planted = {(e["source"], e["target"]) for e in expected["dependencies"]}
    problems += [f"confirmed but not planted: {k}" for k in confirmed if k not in planted]
    for a, b in expected["independent"]:
        if (a, b) in confirmed or (b, a) in confirmed:
            problems.append(f"independent tests linked: {a} {b}")
    assert not problems, "\n".join(problems)
    # The table names every victim and brittle test; the result is stored for explain.
    for e in expected["dependencies"]:
        assert e["target"] in proc.stdout
    stored = json.loads((suite / ".isolator" / "deps.json").read_text())
    assert {(d["source"], d["target"]) for d in stored["dependencies"] if d["confirmed"]} == set(
        confirmed
    )
    page = (suite / "deps.html").read_text()
    assert "<svg" in page and "test_usd_rate" in page
    why = isolator(suite, "explain", "tests/test_caches.py::test_usd_rate")
    assert why.returncode == 0
    assert "test_rate_override_during_refresh" in why.stdout
    assert "sk_app.rates:get_rate" in why.stdout and "test_refresh_rates" in why.stdout


# ------------------------------------------------------------------------ scheduler suite


def test_sched_suite_chain_of_state_setters_is_confirmed_link_by_link(tmp_path: Path) -> None:
    # test_enable_plugin fails alone (it needs test_register_plugin) and is the state-setter
    # of test_plugin_enabled: that edge only shows in [register, enable, enabled].
    expected = json.loads((SCHED_SUITE / "EXPECTED.json").read_text())
    planted = {(e["source"], e["target"], e["kind"]) for e in expected["dependencies"]}
    suite = _orders.fresh_copy(SCHED_SUITE, tmp_path)
    env = {k: v for k, v in _orders.clean_env().items() if not k.startswith("SHOP_")}

    def deps() -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
        proc = subprocess.run(
            [*ISOLATOR, "deps", "--format", "json", "--output", "deps.json", *QUIET],
            cwd=suite,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        no_traceback(proc)
        doc: dict[str, Any] = json.loads((suite / "deps.json").read_text())
        confirmed = {(d["source"], d["target"], d["kind"]) for d in doc["dependencies"]
                     if d["confirmed"]}  # fmt: skip
        assert confirmed == planted, (confirmed ^ planted, proc.stderr)
        return proc, doc

    proc, doc = deps()
    states = {(d["source"], d["target"]): d["state"] for d in doc["dependencies"]}
    for e in expected["dependencies"]:
        assert states[(e["source"], e["target"])][0] == e["state"][0], e
    cleaners = {(c["polluter"], c["victim"]): c["cleaners"] for c in doc["cleaners"]}
    assert cleaners == {
        (e["source"], e["target"]): e["cleaners"]
        for e in expected["dependencies"]
        if e["kind"] == "polluter"
    }
    assert "non-deterministic" not in proc.stderr
    why = isolator(suite, "explain", "tests/test_registry.py::test_plugin_enabled")
    assert why.returncode == 0
    assert "tests/test_registry.py::test_enable_plugin" in why.stdout
    # Again, with the stored result in place: the scheduler must not reorder the runs nor
    # keep state along the chains it knows (brittle tests would pass in the recording).
    assert (suite / ".isolator" / "deps.json").exists()
    deps()


# ---------------------------------------------------------------------------- small suites

SMALL = {
    "app.py": """
        SETTINGS = {"mode": "safe", "level": 1}

        def reset():
            SETTINGS.clear()
            SETTINGS.update({"mode": "safe", "level": 1})
    """,
    "tests/test_small.py": """
        import os

        import app

        def test_victim():
            assert app.SETTINGS["mode"] == "safe"

        def test_level_reader():
            assert app.SETTINGS["level"] == 1

        def test_polluter():
            app.SETTINGS["mode"] = "fast"

        def test_cleaner():
            app.reset()

        def test_brittle():
            assert os.environ.get("SMALL_FLAG") == "on"

        def test_setter():
            os.environ["SMALL_FLAG"] = "on"

        def test_crash():
            os._exit(3)
    """,
}


def test_small_suite_with_a_crash_dot_graph_explain_and_record_only(tmp_path: Path) -> None:
    suite = write_suite(tmp_path / "small", SMALL)
    proc = isolator(suite, "deps", "--graph", "g.dot", "--format", "json", "--output",
                    "o.json", *QUIET)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    no_traceback(proc)
    assert "tests/test_small.py::test_crash crashed the interpreter" in proc.stderr
    doc = json.loads((suite / "o.json").read_text())
    edges = {(d["source"].split("::")[1], d["target"].split("::")[1], d["kind"])
             for d in doc["dependencies"] if d["confirmed"]}  # fmt: skip
    assert edges == {
        ("test_polluter", "test_victim", "polluter"),
        ("test_setter", "test_brittle", "state-setter"),
    }
    (cl,) = doc["cleaners"]
    assert cl["cleaners"] == ["tests/test_small.py::test_cleaner"]
    victim = next(d for d in doc["dependencies"] if d["target"].endswith("test_victim"))
    assert victim["state"] == ["app:SETTINGS['mode']"]
    assert victim["written_at"] == ["tests/test_small.py:13"]
    assert doc["stats"]["crashed"] == ["tests/test_small.py::test_crash"]
    # Table on stdout, graph file, stored result, explain.
    assert "tests/test_small.py::test_victim (victim)" in proc.stdout
    assert (
        '"tests/test_small.py::test_polluter" -> "tests/test_small.py::test_victim"'
        in (suite / "g.dot").read_text()
    )
    why = isolator(suite, "explain", "tests/test_small.py::test_victim")
    assert why.returncode == 0
    assert "fails after tests/test_small.py::test_polluter" in why.stdout
    assert "app:SETTINGS['mode'] (written at tests/test_small.py:13)" in why.stdout
    assert "tests/test_small.py::test_cleaner" in why.stdout
    # --record-only: candidates, no confirmation runs.
    cheap = isolator(suite, "deps", "--record-only", *QUIET)
    assert cheap.returncode == 0, cheap.stderr
    assert "candidates (not confirmed, --record-only)" in cheap.stdout
    assert "test_polluter (candidate)" in cheap.stdout


def test_unknown_node_id_is_a_one_line_error(tmp_path: Path) -> None:
    suite = write_suite(tmp_path / "small", SMALL)
    proc = isolator(suite, "deps", "tests/test_small.py::test_nope", *QUIET)
    assert proc.returncode == 2
    no_traceback(proc)
    lines = [ln for ln in proc.stderr.splitlines() if not ln.startswith("isolator deps: rec")]
    assert len(lines) == 1 and "test_nope" in lines[0], proc.stderr
    assert not (suite / ".isolator" / "deps.json").exists()


HIDDEN_SETTERS = {
    # A submodule one test imports, that another reaches through its package only.
    "pkg/__init__.py": "",
    "pkg/sub/__init__.py": "",
    "pkg/sub/mod.py": "X = 42\n",
    "tests/test_chain.py": """
        import pkg

        def test_imports_submodule():
            import pkg.sub.mod
            assert pkg.sub.mod.X == 42

        def test_uses_chain():
            assert pkg.sub.mod.X == 42
    """,
    # doctest_namespace filled by a function fixture that the docs' doctests do not get.
    "tests/conftest.py": """
        import pytest

        @pytest.fixture(autouse=True)
        def add_helper(doctest_namespace):
            doctest_namespace["helper"] = 7
    """,
    "docs/guide.txt": """
        >>> helper * 6
        42
    """,
}


def test_setters_through_a_submodule_chain_and_doctest_namespace(tmp_path: Path) -> None:
    # Both brittle tests pass in declared order only after their setter: the setter of
    # the first reaches it through code no test reads by name, the second's through
    # pytest's own doctest set-up.
    suite = write_suite(tmp_path / "hidden", HIDDEN_SETTERS)
    args = ["--doctest-glob=*.txt", "tests", "docs", *QUIET]
    proc = isolator(suite, "deps", "--format", "json", "--output", "o.json", *args)
    assert proc.returncode == 0, proc.stderr
    no_traceback(proc)
    doc = json.loads((suite / "o.json").read_text())
    found = {(d["source"], d["target"], d["kind"]): d["state"]
             for d in doc["dependencies"] if d["confirmed"]}  # fmt: skip
    chain = ("tests/test_chain.py::test_imports_submodule", "tests/test_chain.py::test_uses_chain")
    assert found.pop((*chain, "state-setter")) == ["<sys.modules>:pkg.sub",
                                                    "<sys.modules>:pkg.sub.mod"]  # fmt: skip
    # Each test of the tests directory gets the fixture, so each one sets the doctest up.
    assert found and set(found) <= {(c, "docs/guide.txt::guide.txt", "state-setter") for c in chain}
    # (On 3.13 the setter that fails alone also imports _suggestions for its traceback.)
    assert all("<fixture>:doctest_namespace['helper']" in state for state in found.values())
    # The scheduler pulls each setter in when only its brittle test is selected.
    for target in ("tests/test_chain.py::test_uses_chain", "docs/guide.txt"):
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "isolator", "--order=declared",
             "--doctest-glob=*.txt", *QUIET, target],
            cwd=suite, env=_orders.clean_env(), capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert run.returncode == 0, run.stdout + run.stderr
        assert "pulled in tests/test_chain.py::test_imports_submodule" in run.stdout, run.stdout


LATE_CLASS = {
    "mod.py": "FLAGS = []\n",
    # (The plan runner's own test runs the same file: tests/test_deps_plans.py.)
    "tests/test_late.py": test_deps_plans.MODULE_STATE,
}


def test_a_class_set_up_inside_a_sequence_is_torn_down_with_it(tmp_path: Path) -> None:
    # test_needs fails alone and passes after test_sets.  The sequence [test_sets,
    # test_reads] set TestB up with test_sets' write kept, so the core took the write into
    # the class's baseline; TestB stayed set up for the next sequence, where test_needs
    # "passed alone", and the setter was dropped as non-deterministic (wcmatch's
    # test_glob.py: 31 brittle tests, none found).
    suite = write_suite(tmp_path / "late", LATE_CLASS)
    proc = isolator(suite, "deps", "--format", "json", "--output", "o.json", *QUIET)
    assert proc.returncode == 0, proc.stderr
    data = json.loads((suite / "o.json").read_text())
    found = [(d["kind"], d["source"], d["target"]) for d in data["dependencies"] if d["confirmed"]]
    assert found == [("state-setter", "tests/test_late.py::TestA::test_sets",
                      "tests/test_late.py::TestB::test_needs")]  # fmt: skip
    assert data["stats"]["flaky"] == 0, data["notes"]


BASE_HELPERS = {
    # wcmatch's test_glob.py: the helpers of a base class read what an earlier test of
    # the subclass set through ``cls`` (an options case), and set_up writes the default
    # on the subclass before every class's tests.
    "tests/test_opts.py": """
        import pytest

        class _Base:
            @classmethod
            def setup_class(cls):
                cls.mode = "plain"

            @classmethod
            def apply(cls, mode):
                cls.mode = mode

            @classmethod
            def expect(cls, mode):
                assert cls.mode == mode

        class TestOpts(_Base):
            def test_set_loud(self):
                self.apply("loud")

            def test_filler(self):
                pass

            def test_needs_loud(self):
                self.expect("loud")

            def test_set_plain(self):
                self.apply("plain")
    """,
}


def test_a_setter_through_a_base_class_helper_is_named_with_the_subclass(tmp_path: Path) -> None:
    # The helpers' reads (cls.mode in _Base) are recorded as the attribute of the class the
    # test runs in, where test_set_loud's write landed: the dependency names TestOpts.mode,
    # not only what the class's set-up writes for every test of it.
    suite = write_suite(tmp_path / "opts", BASE_HELPERS)
    proc = isolator(suite, "deps", "--format", "json", "--output", "o.json", *QUIET)
    assert proc.returncode == 0, proc.stderr
    no_traceback(proc)
    data = json.loads((suite / "o.json").read_text())
    found = {(d["kind"], d["source"], d["target"]): d["state"]
             for d in data["dependencies"] if d["confirmed"]}  # fmt: skip
    setter = ("state-setter", "tests/test_opts.py::TestOpts::test_set_loud",
              "tests/test_opts.py::TestOpts::test_needs_loud")  # fmt: skip
    assert setter in found, data
    assert found[setter][0] == "test_opts:TestOpts.mode", found[setter]


ORDER_LOGGED = {
    "conftest.py": """
        import os, pytest

        @pytest.hookimpl(trylast=True)
        def pytest_collection_modifyitems(items):
            with open(os.environ["ORDER_LOG"], "a") as f:
                f.write(" ".join(item.name for item in items) + "\\n")
    """,
    "tests/test_many.py": """
        import pytest
        import state

        @pytest.mark.parametrize("i", range(12))
        def test_n(i):
            state.SEEN.append(i)

        def test_needs_first():
            assert state.SEEN[:1] == [0]
    """,
    "state.py": "SEEN = []\n",
}


@pytest.mark.skipif(
    importlib.util.find_spec("pytest_randomly") is None, reason="needs pytest-randomly"
)
def test_pytest_randomly_does_not_shuffle_the_recording_run(tmp_path: Path) -> None:
    """With pytest-randomly installed and not named, deps records in declared order (as
    it says), so that its runs find the same dependencies; named, it is the user's."""
    suite = write_suite(tmp_path / "ordered", ORDER_LOGGED)
    log = tmp_path / "order.log"
    declared = " ".join([f"test_n[{i}]" for i in range(12)] + ["test_needs_first"])
    env = {**_orders.clean_env(), "ORDER_LOG": str(log)}
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD")  # (pytest-randomly loads as it does for users)
    proc = subprocess.run(
        [*ISOLATOR, "deps", "--record-only", "-p", "no:cacheprovider"],
        cwd=suite, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert log.read_text().splitlines()[0] == declared
    log.unlink()
    proc = subprocess.run(
        [*ISOLATOR, "deps", "--record-only", "-p", "no:cacheprovider", "-p", "randomly",
         "--randomly-seed=3"],
        cwd=suite, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert log.read_text().splitlines()[0] != declared  # (seed 3 shuffles these 13)


LASTFAILED = {
    "tests/test_lf.py": """
        import os

        def test_polluter():
            os.environ["LF_FLAG"] = "1"

        def test_victim():
            assert "LF_FLAG" not in os.environ

        def test_fails():
            assert False
    """,
}


def test_provoked_failures_do_not_become_the_last_failed_tests(tmp_path: Path) -> None:
    # With pytest's cache on, as users run it: the confirmation runs fail the victim on
    # purpose, and --lf must still select what failed in the suite's own order.
    suite = write_suite(tmp_path / "lf", LASTFAILED)
    proc = isolator(suite, "deps", "--format", "json", "--output", "o.json", "-p", "no:randomly")
    assert proc.returncode == 0, proc.stderr
    assert "tests/test_lf.py::test_victim (victim)" in proc.stdout
    lastfailed = json.loads((suite / ".pytest_cache/v/cache/lastfailed").read_text())
    assert list(lastfailed) == ["tests/test_lf.py::test_fails"]
    # The recording process went on to serve the confirmation: one process in all.
    stats = json.loads((suite / "o.json").read_text())["stats"]
    assert stats["recording_served"] and stats["confirm_processes"] == 1


UNRESET = {
    "deep.py": """
        STATE = {}
        # Deeper than isolator watches: what a test appends here is not put back.
        ROOT = {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {"i": []}}}}}}}}}

        def leaf():
            return ROOT["a"]["b"]["c"]["d"]["e"]["f"]["g"]["h"]["i"]
    """,
    "tests/test_unreset.py": """
        import deep

        def test_clears():
            deep.STATE["cleared"] = True
            deep.leaf().clear()

        def test_expects_empty():
            seen = (deep.STATE.get("poisoned"), deep.STATE.get("cleared"))
            assert deep.leaf() == []

        def test_poisons():
            deep.STATE["poisoned"] = True
            deep.leaf().append("x")
    """,
}


def test_a_dependency_that_fresh_processes_contradict_is_not_confirmed(tmp_path: Path) -> None:
    # The runs that confirm share one process, and a reset cannot put back what isolator
    # does not watch: after the recording run, test_expects_empty failed "alone", and
    # passed after test_clears, which empties the deep list.  That made a confirmed
    # state-setter edge (wcmatch had 90 of them, all false).  Alone in a fresh process it
    # passes: the edge stays a candidate, with a note saying why.
    suite = write_suite(tmp_path / "unreset", UNRESET)
    proc = isolator(suite, "deps", "--format", "json", "--output", "o.json", *QUIET)
    assert proc.returncode == 0, proc.stderr
    no_traceback(proc)
    data = json.loads((suite / "o.json").read_text())
    assert [d for d in data["dependencies"] if d["confirmed"]] == []
    note = "not confirmed in fresh processes: tests/test_unreset.py::test_expects_empty passes"
    assert any(n.startswith(note) for n in data["notes"]), data["notes"]
    assert data["stats"]["vetted_sequences"] == 2
    # Plain pytest agrees: it passes alone.
    alone = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:isolator", *QUIET,
         "tests/test_unreset.py::test_expects_empty"],
        cwd=suite, env=_orders.clean_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert alone.returncode == 0, alone.stdout


OWN_FILES = {
    "mod.py": """
        SEEN = []
    """,
    "tests/test_own.py": """
        import mod

        def test_polluter():
            with open("out-a.txt", "w") as f:
                f.write("a")
            mod.SEEN.append("a")
            assert False  # (what a failing test's code wrote counts: the journal too)

        def test_victim():
            with open("out-b.txt", "w") as f:
                f.write("b")
            assert mod.SEEN == []
    """,
}


def test_isolators_own_files_are_no_tests_state(tmp_path: Path) -> None:
    # Both tests write a file outside their tmp dirs: isolator's copy-on-write journal in
    # .isolator/ is opened during each, and was named as the state linking them (parso's
    # test_change_and_undo -> test_simple).
    suite = write_suite(tmp_path / "own", OWN_FILES)
    proc = isolator(suite, "deps", "--format", "json", "--output", "o.json", *QUIET)
    assert proc.returncode == 0, proc.stderr
    data = json.loads((suite / "o.json").read_text())
    (dep,) = [d for d in data["dependencies"] if d["confirmed"]]
    assert (dep["source"], dep["target"]) == ("tests/test_own.py::test_polluter",
                                              "tests/test_own.py::test_victim")  # fmt: skip
    assert dep["state"] == ["mod:SEEN"]


CTRL_C = {
    "tests/test_ctrl_c.py": """
        import os
        import time

        def test_polluter():
            os.environ["CTRLC_FLAG"] = "1"

        def test_victim():
            assert "CTRLC_FLAG" not in os.environ

        def test_slow_cleaner():
            # Slow only right after the polluter, that is in the cleaner trial: the
            # recording run resets the flag after every test, and a failed deletion
            # reads nothing, so [polluter, cleaner] is no candidate pair.  Nothing
            # depends on when the harness looks.
            try:
                del os.environ["CTRLC_FLAG"]
            except KeyError:
                return
            open(os.environ["CTRLC_MARKER"], "w").close()
            time.sleep(120)
    """,
}


def test_ctrl_c_during_confirmation_keeps_what_was_confirmed(tmp_path: Path) -> None:
    suite = write_suite(tmp_path / "ctrlc", CTRL_C)
    marker = tmp_path / "marker"
    env = _orders.clean_env()
    env.update(CTRLC_MARKER=str(marker))
    # A shell that started the tests in the background (`cmd &` without job control,
    # nohup) hands SIGINT down ignored, and Python keeps it ignored: the command is
    # started with the default disposition, as a terminal's Ctrl-C would find it.
    cmd = [*ISOLATOR, "deps", "--jobs", "1", *QUIET]
    exec_with_sigint = (
        "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", exec_with_sigint, *cmd],
        cwd=suite,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    with proc:  # closes the pipes however the test ends
        try:
            # The pair is run, then its repetitions; the cleaner trial comes after them
            # (in the same plan) and hangs.  Only the marker is waited for, with a
            # deadline: the pipes are read once the command has ended (a few lines, far
            # below their size).
            deadline = time.monotonic() + 180
            while not marker.exists():
                assert time.monotonic() < deadline, "the cleaner trial never started"
                assert proc.poll() is None, proc.communicate()
                time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "interrupted; kept 1 confirmed dependencies" in err
    stored = json.loads((suite / ".isolator" / "deps.json").read_text())
    confirmed = [(d["source"], d["target"]) for d in stored["dependencies"] if d["confirmed"]]
    assert confirmed == [
        ("tests/test_ctrl_c.py::test_polluter", "tests/test_ctrl_c.py::test_victim")
    ]
    assert "tests/test_ctrl_c.py::test_victim (victim)" in out


# ----------------------------------------------------------------------------- real suites


def _suites() -> ModuleType:
    if "suites" in sys.modules:
        return sys.modules["suites"]
    spec = importlib.util.spec_from_file_location("suites", EXPERIMENTS / "suites.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["suites"] = module
    spec.loader.exec_module(module)
    return module


def _real_suite(name: str, tmp_path: Path) -> tuple[Any, Path]:
    suites = _suites()
    try:
        info = suites.prepare(name)
    except suites.SuiteUnavailable as exc:
        pytest.skip(str(exc))
    # Work on a copy of the sources: the result is stored in the copy's .isolator/.
    dest = tmp_path / name
    shutil.copytree(
        info.path, dest, ignore=shutil.ignore_patterns(".venv", "*.egg-info", "__pycache__",
                                                      ".isolator", ".pytest_cache")
    )  # fmt: skip
    return info, dest


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "polluter", "victim", "with_cleaners"),
    [
        ("six", "test_six.py::test_move_items[html_parser]", "test_six.py::test_lazy", False),
        (
            "parso",
            "test/test_diff_parser.py::test_change_and_undo",
            "test/test_diff_parser.py::test_simple",
            True,
        ),
    ],
)
def test_real_suite_dependency_is_found(
    tmp_path: Path, name: str, polluter: str, victim: str, with_cleaners: bool
) -> None:
    info, dest = _real_suite(name, tmp_path)
    proc = subprocess.run(
        [str(info.bin_dir / "isolator"), "deps", "--format", "json", "--output", "o.json",
         *info.pytest_args],
        cwd=dest,
        env=info.env(),
        capture_output=True,
        text=True,
        timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((dest / "o.json").read_text())
    found = {(d["source"], d["target"]) for d in doc["dependencies"] if d["confirmed"]}
    assert (polluter, victim) in found, proc.stderr[-3000:]
    if with_cleaners:
        cl = {(c["polluter"], c["victim"]): c["cleaners"] for c in doc["cleaners"]}
        assert cl.get((polluter, victim)), doc["cleaners"]
    assert f"{victim} (victim)" in proc.stdout
    assert os.path.exists(dest / ".isolator" / "deps.json")


HANGS_AFTER = {
    "gate.py": """
        CLOSED = False
        COUNT = []
    """,
    "tests/test_gate.py": """
        import gate

        def test_closes():
            gate.CLOSED = True

        def test_waits():
            while gate.CLOSED:  # forever, after test_closes in one process
                pass

        def test_counts():
            gate.COUNT.append(1)

        def test_needs_empty():
            assert gate.COUNT == []
    """,
}


def test_a_sequence_that_never_ends_is_stopped_and_not_judged(tmp_path: Path) -> None:
    # An order the suite never runs may make a test wait forever; the confirmation used to
    # wait with it (six's deps run spent minutes in one import, in an order of its own).
    # Past --stall-timeout (and 20 times the recorded time) the process is stopped, the
    # sequence reported unjudged, and the rest of the confirmation goes on.
    suite = write_suite(tmp_path / "hang", HANGS_AFTER)
    t0 = time.monotonic()
    proc = isolator(
        suite, "deps", "--stall-timeout", "2", "--jobs", "1", "--format", "json",
        "--output", "o.json", *QUIET, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - t0 < 60
    no_traceback(proc)
    data = json.loads((suite / "o.json").read_text())
    found = [(d["kind"], d["source"], d["target"]) for d in data["dependencies"] if d["confirmed"]]
    assert found == [("polluter", "tests/test_gate.py::test_counts",
                      "tests/test_gate.py::test_needs_empty")]  # fmt: skip
    stopped = [n for n in data["notes"] if "stopped, not judged" in n]
    assert stopped == [
        "still running after 2 s or more, 20 times its recorded time; stopped, not judged: "
        "tests/test_gate.py::test_closes -> tests/test_gate.py::test_waits"
    ], data["notes"]


def test_a_stall_timeout_that_is_no_positive_number_is_refused(tmp_path: Path) -> None:
    suite = write_suite(tmp_path / "hang", HANGS_AFTER)
    for bad in ("0", "-1", "nan", "x"):
        proc = isolator(suite, "deps", "--stall-timeout", bad, *QUIET, timeout=60)
        assert proc.returncode != 0
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith("isolator deps") and "--stall-timeout" in last, proc.stderr
        no_traceback(proc)
