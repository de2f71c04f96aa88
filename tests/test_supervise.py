"""`isolator run` (the supervised pytest) and pytest's temporary directories, end to end."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

SUITE = """
import pytest

def test_passes():
    pass

def test_fails():
    assert 1 == 2

@pytest.mark.skip(reason="not today")
def test_skipped():
    pass
"""


def _run(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTEST_ADDOPTS": "-p no:randomly -p no:cacheprovider", **env},
    )


def _shape(path: Path) -> tuple[object, ...]:
    root = ET.parse(path).getroot()
    suite = root.find("testsuite")
    assert suite is not None
    attrs = {k: v for k, v in suite.attrib.items() if k not in ("time", "timestamp", "hostname")}
    cases = [
        (c.get("classname", ""), c.get("name", ""), [child.tag for child in c])
        for c in suite.iter("testcase")
    ]
    return root.tag, root.attrib, attrs, cases


def test_an_uninterrupted_run_reports_what_pytest_reports(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mixed=SUITE)
    plain = _run(pytester.path, "pytest", "-p", "no:isolator", "--junitxml=plain/report.xml")
    assert plain.returncode == 1, plain.stdout + plain.stderr
    run = _run(pytester.path, "isolator", "run", "--junitxml=out/report.xml")
    assert run.returncode == 1, run.stdout + run.stderr
    assert _shape(pytester.path / "out" / "report.xml") == _shape(
        pytester.path / "plain" / "report.xml"
    )


def test_a_project_inside_another_sessions_temporary_directory_keeps_its_files(
    pytester: pytest.Pytester,
) -> None:
    # pytester puts this project under the outer session's pytest-of-<user>/pytest-N (and
    # the inner session's temporary directories next to it, without the temproot pytester
    # sets): only the inner session's own directory is the tests' to write freely.
    pytester.makepyfile(
        test_files="""
import pathlib

def test_writes():
    pathlib.Path("written.txt").write_text("left behind")

def test_fresh():
    assert not pathlib.Path("written.txt").exists()
"""
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_DEBUG_TEMPROOT"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "isolator", "-p", "no:randomly"],
        cwd=pytester.path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_temporary_directory_is_made_for_a_run_that_asks_for_none(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makepyfile(test_plain="def test_nothing():\n    pass\n")
    temproot = tmp_path / "temproot"
    temproot.mkdir()
    result = _run(pytester.path, "pytest", "-p", "isolator", PYTEST_DEBUG_TEMPROOT=str(temproot))
    assert result.returncode == 0, result.stdout + result.stderr
    assert list(temproot.iterdir()) == []


def test_a_forked_test_and_the_others_share_one_temporary_directory(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makepyfile(
        test_forked="""
import pytest

@pytest.mark.isolator_fork
def test_in_a_child(tmp_path_factory):
    (tmp_path_factory.getbasetemp() / "from-child.txt").write_text("child")

def test_in_the_parent(tmp_path_factory):
    assert (tmp_path_factory.getbasetemp() / "from-child.txt").read_text() == "child"
"""
    )
    temproot = tmp_path / "temproot"
    temproot.mkdir()
    result = _run(pytester.path, "pytest", "-p", "isolator", PYTEST_DEBUG_TEMPROOT=str(temproot))
    assert result.returncode == 0, result.stdout + result.stderr


def test_files_under_pytests_temporary_directories_are_the_tests_own(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makepyfile(
        test_tmp="""
def test_writes(tmp_path_factory):
    (tmp_path_factory.getbasetemp() / "shared.txt").write_text("kept")

def test_reads(tmp_path_factory):
    assert (tmp_path_factory.getbasetemp() / "shared.txt").read_text() == "kept"
"""
    )
    temproot = tmp_path / "temproot"
    temproot.mkdir()
    result = _run(pytester.path, "pytest", "-p", "isolator", PYTEST_DEBUG_TEMPROOT=str(temproot))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "<file>" not in result.stdout


def test_exit_handlers_of_the_tests_run_as_under_plain_pytest(pytester: pytest.Pytester) -> None:
    # The supervised pytest ends without the interpreter's teardown, but what the code under
    # test registered with atexit (flushing a log, removing a temporary directory) still runs.
    pytester.makepyfile(
        test_atexit="""
import atexit, pathlib

def test_registers():
    atexit.register(pathlib.Path("at-exit.txt").write_text, "ran")
"""
    )
    run = _run(pytester.path, "isolator", "run")
    assert run.returncode == 0, run.stdout + run.stderr
    assert (pytester.path / "at-exit.txt").read_text() == "ran"


HOLDER = """
import threading
LOCK = threading.Lock()
STOP = threading.Event()

def hold_in_background():
    taken = threading.Event()
    def run():
        with LOCK:
            taken.set()
            STOP.wait()
    threading.Thread(target=run, daemon=True, name="holder").start()
    taken.wait()
"""


def test_the_tests_after_one_that_left_a_thread_running_continue_in_a_new_process(
    pytester: pytest.Pytester,
) -> None:
    # The thread holds a lock the next test takes: in the same process that test would wait
    # forever (as under plain pytest); alone, it passes.  The first run already gives the
    # fresh-interpreter outcomes; the next one forks the leaking test instead.
    pytester.makepyfile(
        holder=HOLDER,
        test_a="""
import holder
def test_leaves_a_thread():
    holder.hold_in_background()
    assert holder.LOCK.locked()
def test_fails():
    assert False
""",
        test_b="""
import holder
def test_takes_the_lock():
    assert holder.LOCK.acquire(timeout=20)
    holder.LOCK.release()
""",
    )
    for run_no in (1, 2):
        run = _run(pytester.path, "isolator", "run", "-v", "--junitxml=out/report.xml")
        assert run.returncode == 1, run.stdout + run.stderr
        assert "test_b.py::test_takes_the_lock PASSED" in run.stdout
        suite = ET.parse(pytester.path / "out" / "report.xml").getroot().find("testsuite")
        assert suite is not None
        assert (suite.get("tests"), suite.get("failures")) == ("3", "1")
        if run_no == 1:
            assert "the remaining tests continue in a new process" in run.stdout
            # Each process printed its own counts; the supervisor adds them up.
            assert "isolator: the whole run, in 2 processes: 1 failed, 2 passed in" in run.stdout
        else:
            assert "continue in a new process" not in run.stdout
            assert "ran 1 test(s) in a forked child" in run.stdout
            assert "the whole run" not in run.stdout


def test_the_tests_after_one_that_left_an_asyncio_task_pending_continue_in_a_new_process(
    pytester: pytest.Pytester,
) -> None:
    # The task would run during the next test's turn of the session's loop: the first run
    # gives the later test its fresh-interpreter outcome in a new process, the next forks.
    pytester.makeconftest(
        """
import asyncio, pytest
@pytest.fixture(scope="session")
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()
"""
    )
    pytester.makepyfile(
        test_a="""
import asyncio
FIRED = []
async def fire():
    await asyncio.sleep(0.01)
    FIRED.append(1)
def test_leaves_a_task(loop):
    async def leave():
        asyncio.get_running_loop().create_task(fire())
    loop.run_until_complete(leave())
def test_sees_nothing_fire(loop):
    loop.run_until_complete(asyncio.sleep(0.05))
    assert FIRED == []
"""
    )
    for run_no in (1, 2):
        run = _run(pytester.path, "isolator", "run", "-v", "-W", "ignore")
        assert run.returncode == 0, run.stdout + run.stderr
        assert "test_a.py::test_sees_nothing_fire PASSED" in run.stdout
        if run_no == 1:
            assert "left <asyncio task>:" in run.stdout
            assert "the remaining tests continue in a new process" in run.stdout
        else:
            assert "continue in a new process" not in run.stdout
            assert "ran 1 test(s) in a forked child" in run.stdout


def test_a_pool_worker_that_only_a_reference_cycle_kept_running_is_not_left_running(
    pytester: pytest.Pytester,
) -> None:
    # An idle pool's worker thread ends when its executor is freed; here only a cycle holds
    # the executor (as an exception's traceback holds the frame that made it), so the
    # worker ends at the next collection.  It used to be reported as left running: the
    # rest of the run went on in a new process, and the test was forked from then on.
    pytester.makepyfile(
        test_pool="""
from concurrent.futures import ThreadPoolExecutor

def test_pool_in_a_cycle():
    pool = ThreadPoolExecutor(max_workers=1)
    assert pool.submit(int, "1").result() == 1
    cycle = {"pool": pool}
    cycle["self"] = cycle

def test_after():
    pass
"""
    )
    run = _run(pytester.path, "isolator", "run")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "could not reset" not in run.stdout
    assert "continue in a new process" not in run.stdout
    assert not (pytester.path / ".isolator" / "fork.json").exists()


def test_a_process_dying_between_tests_blames_none_and_the_report_names_tests_as_pytest(
    pytester: pytest.Pytester,
) -> None:
    # A plugin's code after a test was over (its protocol wrapper, outside isolator's)
    # ended the process: the test that had passed was reported passed and crashed, twice
    # in the XML; and the rebuilt XML named class tests unlike pytest's own report.
    pytester.makeconftest(
        """
import os, pytest
@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    result = yield
    if item.name == "test_k" and not os.environ.get("DONE_ONCE"):
        os.environ["DONE_ONCE"] = "1"
        os._exit(7)
    return result
"""
    )
    pytester.makepyfile(
        test_a="""
import pytest
class TestK:
    def test_k(self):
        pass
@pytest.mark.parametrize("n", [1, 2])
def test_p(n):
    assert n == 1
"""
    )
    proc = _run(pytester.path, "isolator", "run", "--junitxml=out/report.xml")
    assert "Traceback" not in proc.stderr
    assert "test_a.py::TestK::test_k was over (exit code 7)" in proc.stderr, proc.stderr
    assert "crashed the test process" not in proc.stderr
    assert proc.returncode == 3, proc.stdout + proc.stderr
    cases = ET.parse(pytester.path / "out" / "report.xml").getroot().iter("testcase")
    got = sorted((c.get("classname"), c.get("name"), c.find("failure") is None) for c in cases)
    assert got == [
        ("test_a", "test_p[1]", True),
        ("test_a", "test_p[2]", False),
        ("test_a.TestK", "test_k", True),
    ]


def test_a_test_crashing_in_its_teardown_has_one_entry_in_the_report(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_t="""
import os, pytest
@pytest.fixture
def dies():
    yield
    os._exit(9)
def test_crashes_after_passing(dies):
    pass
def test_after():
    pass
"""
    )
    proc = _run(pytester.path, "isolator", "run", "--junitxml=out/report.xml")
    assert "test_t.py::test_crashes_after_passing crashed the test process" in proc.stderr
    assert proc.returncode == 1, proc.stdout + proc.stderr
    cases = ET.parse(pytester.path / "out" / "report.xml").getroot().iter("testcase")
    got = sorted((c.get("name"), c.find("failure") is None) for c in cases)
    assert got == [("test_after", True), ("test_crashes_after_passing", False)]


def test_tests_see_the_command_line_and_main_module_of_python_m_pytest_not_isolators(
    tmp_path: Path,
) -> None:
    # Code that parses sys.argv (a CLI's main() called without arguments) sees pytest's
    # command line (`python -m pytest -p isolator ...`), not isolator's `run`.  And the
    # main module is pytest's: hypothesis scans "local" modules, __main__ among them, for
    # constants; with the environment inside the project, isolator's console script
    # counted as local and hypothesis wrote a file into the project that plain pytest
    # does not.
    (tmp_path / "test_argv.py").write_text(
        "import os, sys\n"
        "def test_argv():\n"
        "    assert os.path.basename(sys.argv[0]) == '__main__.py'\n"
        "    assert os.path.basename(os.path.dirname(sys.argv[0])) == 'pytest'\n"
        "    assert 'run' not in sys.argv and 'test_argv.py' in sys.argv\n"
        "def test_main():\n"
        "    main = sys.modules['__main__']\n"
        "    assert main.__name__ == '__main__'\n"
        "    assert main.__spec__.name == 'pytest.__main__', main.__spec__\n"
        "    assert main.__file__.endswith(os.path.join('pytest', '__main__.py'))\n"
        "    assert main.__package__ == 'pytest'\n"
    )
    plain = _run(tmp_path, "pytest", "-p", "no:isolator", "test_argv.py")
    assert plain.returncode == 0, plain.stdout + plain.stderr
    proc = _run(tmp_path, "isolator", "run", "--reset=minimal", "test_argv.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr


POLLUTED = """
import os

def test_sets():
    os.environ["ISOLATOR_TEST_LEFT"] = "1"

def test_reads():
    assert "ISOLATOR_TEST_LEFT" not in os.environ
"""


@pytest.mark.parametrize(
    ("pyproject", "outcome"),
    [(None, 0), ("reset = 'none'", 1), ("reset = 'full'", 0), ("fork = ['x']", 0)],
)
def test_isolator_run_without_reset_takes_the_configured_mode_else_minimal(
    pytester: pytest.Pytester, tmp_path: Path, pyproject: str | None, outcome: int
) -> None:
    pytester.makepyfile(test_env=POLLUTED)
    if pyproject is not None:
        pytester.makepyprojecttoml(f"[tool.isolator]\n{pyproject}\n")
    work = tmp_path / "tmp"
    work.mkdir()
    result = _run(pytester.path, "isolator", "run", TMPDIR=str(work))
    assert result.returncode == outcome, result.stdout + result.stderr
    # The supervisor's own directory for the run is gone.
    assert [p.name for p in work.iterdir() if p.name.startswith("isolator-run-")] == []


def test_the_supervisors_directory_is_private_and_never_one_already_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from isolator._supervise import _work_dir

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    # Left by a dead process with this pid, or made by another user: not ours to use.
    taken = tmp_path / f"isolator-run-{os.getpid()}-0"
    taken.mkdir()
    (taken / "keep").write_text("theirs")
    made = Path(_work_dir())
    assert made.parent == tmp_path and made != taken
    assert made.stat().st_mode & 0o777 == 0o700
    assert (taken / "keep").read_text() == "theirs"
    # Where no directory can be made, tempfile's choice.
    monkeypatch.setenv("TMPDIR", str(tmp_path / "missing"))
    elsewhere = Path(_work_dir())
    assert elsewhere.is_dir() and elsewhere.name.startswith("isolator-run-")
    elsewhere.rmdir()


@pytest.mark.parametrize("command", [["run"], ["deps"], ["explain", "test_x.py::test_x"]])
def test_a_command_started_in_a_deleted_directory_says_so_in_one_line(
    tmp_path: Path, command: list[str]
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    script = f"import os, runpy, sys; os.chdir({str(gone)!r}); os.rmdir({str(gone)!r}); "
    script += (
        f"sys.argv = ['isolator', *{command!r}]; runpy.run_module('isolator', run_name='__main__')"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert result.returncode == 4, result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [
        "isolator: the current directory is gone (No such file or directory); run from an "
        "existing directory"
    ]


def test_output_into_a_pipe_closed_early_ends_as_under_plain_pytest(
    pytester: pytest.Pytester,
) -> None:
    # `isolator run | head`: more output than a pipe holds, so pytest's writes meet the
    # closed pipe; pytest's console entry point turns that into exit code 1, no traceback.
    pytester.makepyfile(
        test_many="import pytest\n\n@pytest.mark.parametrize('i', range(2000))\n"
        "def test_i(i):\n    pass\n"
    )
    codes = {}
    for name, cmd in {
        "plain": ["pytest", "-p", "no:isolator"],
        "isolator": ["isolator", "run"],
    }.items():
        proc = subprocess.Popen(
            [sys.executable, "-m", *cmd, "-v", "-p", "no:randomly", "-p", "no:cacheprovider"],
            cwd=pytester.path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.readline()
        proc.stdout.close()
        err = proc.stderr.read().decode()
        proc.stderr.close()
        codes[name] = proc.wait(timeout=120)
        assert "Traceback" not in err, err
    assert codes == {"plain": 1, "isolator": 1}


@pytest.mark.parametrize(("body", "code"), [("pass", 0), ("assert False", 1)])
def test_a_run_with_the_plugin_blocked_keeps_pytests_result_and_says_it_was_not_isolated(
    pytester: pytest.Pytester, body: str, code: int
) -> None:
    pytester.makepyfile(test_one=f"def test_one():\n    {body}\n")
    result = _run(pytester.path, "isolator", "run", "-p", "no:isolator")
    assert result.returncode == code, result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        "isolator: the isolator plugin was blocked (-p no:isolator?): this run had no isolation"
    ]


@pytest.mark.parametrize("option", ["--markers", "--version", "--fixtures", "--collect-only"])
def test_pytest_commands_that_run_no_tests_end_as_under_plain_pytest(
    pytester: pytest.Pytester, option: str
) -> None:
    # Some end before a session (--version) or without one (--markers): pytest returned,
    # so the process did not die, whatever it ran.
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    plain = _run(pytester.path, "pytest", "-p", "no:isolator", option)
    run = _run(pytester.path, "isolator", "run", option)
    assert (run.returncode, run.stderr) == (plain.returncode, plain.stderr)
    assert run.returncode == 0


def test_a_usage_error_names_isolator_run_and_exits_as_pytest_does(
    pytester: pytest.Pytester,
) -> None:
    import inspect

    from _pytest import config

    main = getattr(config, "_main", None)
    if main is None or "prog" not in inspect.signature(main).parameters:
        pytest.skip("this pytest cannot name its program")
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    plain = _run(pytester.path, "pytest", "-p", "no:isolator", "--no-such-option")
    run = _run(pytester.path, "isolator", "run", "--no-such-option")
    assert run.returncode == plain.returncode == 4
    assert "isolator run: error: unrecognized arguments: --no-such-option" in run.stderr
    assert "Traceback" not in run.stderr


LEAKS_BETWEEN_FAILURES = """
import threading, time

def test_a():
    assert False

def test_b_leaves_a_thread():
    threading.Thread(target=time.sleep, args=(2,), daemon=True).start()

def test_c():
    assert False

def test_d():
    assert False
"""

CRASHES_BETWEEN_FAILURES = """
import os

def test_a():
    assert False

def test_b_crashes():
    os._exit(3)

def test_c():
    assert False

def test_d():
    assert False

def test_e():
    pass
"""


def _ran(run: subprocess.CompletedProcess[str], names: list[str]) -> list[str]:
    """The tests of ``names`` that ran to an outcome (-v lines)."""
    return [n for n in names if f"::{n} PASSED" in run.stdout or f"::{n} FAILED" in run.stdout]


def test_maxfail_counts_the_failures_of_every_process(pytester: pytest.Pytester) -> None:
    # The process after a restart started counting failures from 0 (test_d ran past
    # --maxfail=2), and after a crash any --maxfail stopped the run as -x does, right
    # after saying that the remaining tests continue.
    pytester.makepyfile(test_leaks=LEAKS_BETWEEN_FAILURES, test_crash=CRASHES_BETWEEN_FAILURES)
    names = ["test_a", "test_b_leaves_a_thread", "test_b_crashes", "test_c", "test_d", "test_e"]
    leaks = _run(pytester.path, "isolator", "run", "-v", "--maxfail=2", "test_leaks.py")
    assert leaks.returncode == 1, leaks.stdout + leaks.stderr
    assert _ran(leaks, names) == ["test_a", "test_b_leaves_a_thread", "test_c"], leaks.stdout
    crash = _run(pytester.path, "isolator", "run", "-v", "--maxfail=3", "test_crash.py")
    assert crash.returncode == 1, crash.stdout + crash.stderr
    # a fails, b crashes (2), c fails (3): the limit, as in one process.
    assert _ran(crash, names) == ["test_a", "test_c"], crash.stdout
    assert "the remaining 3 test(s) continue in a new process" in crash.stderr
    stops = _run(pytester.path, "isolator", "run", "-v", "--maxfail=2", "test_crash.py")
    assert _ran(stops, names) == ["test_a"], stops.stdout
    assert "--maxfail=2 is reached: the remaining 3 test(s) do not run" in stops.stderr


def test_a_repeated_node_id_runs_as_often_after_a_new_process(pytester: pytest.Pytester) -> None:
    # The tests left for the new process were those whose node id had not run: a file
    # given twice with --keep-duplicates lost its second copy's tests after a crash.
    pytester.makepyfile(
        test_twice="""
import os

def test_one():
    pass

def test_crashes_once():
    if os.environ.get("ISOLATOR_PART") == "0":  # (the first process of `isolator run`)
        os._exit(3)

def test_three():
    pass
"""
    )
    run = _run(pytester.path, "isolator", "run", "--keep-duplicates", "test_twice.py",
               "test_twice.py")  # fmt: skip
    # The crash fails the first copy's second test; the other four run (two before).
    assert "4 passed" in run.stdout, run.stdout + run.stderr
    assert "the remaining 4 test(s) continue in a new process" in run.stderr
    assert "crashed the test process" in run.stderr


def test_junit_xml_asked_for_in_the_configuration_covers_every_process(
    pytester: pytest.Pytester,
) -> None:
    # The supervisor only knew of --junitxml on the command line: with it in addopts,
    # each process of the run wrote the same file, and the last one's tests were all it
    # held (1 of 3 after a restart); a crashed test had no entry either.
    pytester.makeini("[pytest]\naddopts = --junitxml=reports/out.xml\n")
    pytester.makepyfile(
        test_parts="""
import os, threading, time

def test_leaves_a_thread():
    threading.Thread(target=time.sleep, args=(2,), daemon=True).start()

def test_crashes():
    if os.environ.get("ISOLATOR_PART") == "1":
        os._exit(3)

def test_last():
    pass
"""
    )
    run = _run(pytester.path, "isolator", "run")
    assert run.returncode == 1, run.stdout + run.stderr
    cases = {
        c.get("name"): [child.tag for child in c]
        for c in ET.parse(pytester.path / "reports" / "out.xml").getroot().iter("testcase")
    }
    assert cases == {
        "test_leaves_a_thread": [],
        "test_crashes": ["failure"],
        "test_last": [],
    }, cases


def test_a_module_skipped_at_collection_is_counted_once_across_processes(
    pytester: pytest.Pytester,
) -> None:
    # Each process of the run collects the whole suite, and a module that skips itself at
    # import is reported by each: the run's last line and the merged XML counted it once
    # per process (watchdog's test_fsevents.py, test_kqueue.py ... on Linux).
    pytester.makepyfile(
        test_a="""
import threading, time
def test_leaves_a_thread():
    threading.Thread(target=time.sleep, args=(2,), daemon=True).start()
""",
        test_b="""
def test_after():
    pass
""",
        test_skipped="""
import pytest
pytest.skip("not on this platform", allow_module_level=True)
""",
    )
    run = _run(pytester.path, "isolator", "run", "--junitxml=out.xml")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "continue in a new process" in run.stdout
    assert "isolator: the whole run, in 2 processes: 2 passed, 1 skipped in" in run.stdout
    suite = ET.parse(pytester.path / "out.xml").getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("skipped")) == ("3", "1")
