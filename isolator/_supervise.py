"""``isolator run``: pytest in a supervised child process.

A test that kills the interpreter (``os._exit``, a segfault) would end a plain pytest
run.  The supervisor notices that the child ended without finishing, reports the test
that was running as crashed, and starts a new child on the tests that had not run yet.
JUnit XML of the parts is merged so that no result is lost.
"""

from __future__ import annotations

import atexit
import os
import sys
from typing import Any, NoReturn

# Nothing else is imported before the test process starts (a forked child copies each page
# of this process that it writes to, about 3 us a page here), nor while it runs (imports
# in this process then slow the child down): what reads the child's files (json, XML) is
# imported after a crash or for JUnit XML only.

_MAX_RESTARTS = 50
# The file in which the child asks to continue in a new process (a test left a thread or
# process running), the environment variable telling each child how many processes ran
# before it, and how many new processes such tests may ask for in one run: one, since a
# suite where most tests leave a thread behind (tqdm's monitor, which ends by itself a few
# seconds later) would pay a collection for each; the leaking tests are forked from the
# next run on anyway.
RESTART_FILE = "restart.json"
# Each process's outcome counts, added up after a run that went on in a new process.
COUNTS_FILE = "counts.json"
PART_ENV = "ISOLATOR_PART"
MAX_LEAK_RESTARTS = 1


def _junit_target(args: list[str]) -> tuple[str | None, int, str]:
    """(path, index of the arg, the option spelling) of --junitxml, or (None, -1, "")."""
    for i, a in enumerate(args):
        for opt in ("--junitxml", "--junit-xml"):
            if a == opt and i + 1 < len(args):
                return args[i + 1], i, opt
            if a.startswith(opt + "="):
                return a.split("=", 1)[1], i, opt
    return None, -1, ""


def _with_junit(args: list[str], path: str) -> list[str]:
    target, i, opt = _junit_target(args)
    if target is None:
        return args
    out = list(args)
    if out[i] == opt:
        out[i + 1] = path
    else:
        out[i] = f"{opt}={path}"
    return out


def supervise(pytest_args: list[str], default_reset: bool = False) -> int:
    """Run pytest with isolator until every selected test has run; return the exit code.

    ``default_reset``: no ``--reset`` was given; the process that starts pytest adds
    ``--reset=minimal`` unless pyproject.toml sets a mode (see ``_with_default_reset``).
    """
    work = _work_dir()
    try:
        return _supervise(pytest_args, work, default_reset)
    finally:
        _remove(work)


def _work_dir() -> str:
    """A new directory only this user can enter, for the files of this run: what
    ``tempfile.mkdtemp`` makes, without importing tempfile (and what it imports) here."""
    for var in ("TMPDIR", "TEMP", "TMP"):
        base = os.environ.get(var)
        if base:
            break
    else:
        base = "/tmp"  # noqa: S108  (a private directory in it, made with O_EXCL semantics)
    for n in range(100):
        path = os.path.join(base, f"isolator-run-{os.getpid()}-{n}")
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue  # left by a dead process with the same pid, or another user's
        except OSError:
            break
        return path
    import tempfile

    return tempfile.mkdtemp(prefix="isolator-run-")


def _remove(work: str) -> None:
    """Delete the run's directory: its part directories of plain files, as the child left
    them (shutil, for anything else)."""
    try:
        for part in os.scandir(work):
            if part.is_dir(follow_symlinks=False):
                for entry in os.scandir(part.path):
                    os.unlink(entry.path)
                os.rmdir(part.path)
            else:
                os.unlink(part.path)
        os.rmdir(work)
    except OSError:
        import shutil

        shutil.rmtree(work, ignore_errors=True)


def _now() -> float:
    import time  # (built into the interpreter: no module file is read)

    return time.perf_counter()


def _supervise(pytest_args: list[str], work: str, default_reset: bool) -> int:
    junit, _, _ = _junit_target(pytest_args)
    # --junitxml from the configuration (ini addopts), which the child tells of, and the
    # parts written for it.
    ini_junit: str | None = None
    ini_parts: list[str] = []
    done: list[str] = []
    crashed: list[tuple[str, str]] = []
    between: list[tuple[str, str]] = []  # died after this test was over
    parts: list[str] = []
    codes: list[int] = []
    env = dict(os.environ, ISOLATOR_RUN="1")
    failed = 0  # failed reports of the parts so far (each part carries on their count)
    sups: list[str] = []
    t0 = _now()
    for attempt in range(_MAX_RESTARTS + 1):
        sup = os.path.join(work, f"part{attempt}")
        os.makedirs(sup)
        sups.append(sup)
        args = list(pytest_args)
        if junit is not None:
            part = os.path.join(work, f"junit{attempt}.xml")
            parts.append(part)
            args = _with_junit(args, part)
            # Its presence asks the child to stream every report there, to rebuild this
            # part's XML if the child crashes (without --junitxml nothing needs them).
            open(os.path.join(sup, "results.jsonl"), "w").close()
        cmd = [sys.executable, "-m", "pytest", "-p", "isolator", *args]
        cmd.append(f"--isolator-supervised={sup}")
        if junit is None:
            ini_parts.append(os.path.join(work, f"junit{attempt}.xml"))
            cmd.append(f"--isolator-junit-part={ini_parts[-1]}")
        if failed:
            cmd.append(f"--isolator-failed-before={failed}")
        if done:
            resume = os.path.join(work, f"resume{attempt}.json")
            from isolator._store import write_json_atomic

            write_json_atomic(resume, done)
            cmd.append(f"--isolator-resume={resume}")
        env[PART_ENV] = str(attempt)
        proc = _start(cmd, env, sup, default_reset)
        try:
            status = proc.wait()
        except KeyboardInterrupt:
            import signal
            import subprocess

            # pytest in the child got the SIGINT too and ends its own way.
            try:
                status = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                status = proc.wait()
            return 130 if status in (0, 2) else status
        # (What reads the child's files is imported only when needed: a finished run
        # needs none of it, and imports made while the child runs slow it down.)
        if ini_junit is None and os.path.exists(os.path.join(sup, "junit_target.json")):
            from isolator import _parts

            ini_junit = _parts.junit_target(sup)
        if os.path.exists(os.path.join(sup, RESTART_FILE)):
            from isolator import _parts

            restart = _parts.restart_request(sup)
            if restart is not None:
                # A test left a thread or process running: the rest go on in a new
                # process (the child said why in its output).
                collected, _, _ = _parts.progress(sup)
                done += collected[:restart]
                codes.append(1 if _parts.read_failed(sup) else 0)
                failed = _parts.failed_so_far(sup)
                continue
        finished = os.path.exists(os.path.join(sup, "finished"))
        if finished:
            codes.append(status)
            break
        from isolator import _parts

        collected, running, over = _parts.progress(sup)
        if running is None:
            # Died before running a test (collection or configuration): nothing to resume.
            codes.append(status if status > 0 else 3)
            break
        nodeid = collected[running]
        from isolator._status import describe_status

        how = describe_status(_as_wait_status(status))
        if junit is not None or ini_junit is not None:
            # The crashed part wrote no XML: rebuild it from the results it streamed.
            part = parts[-1] if junit is not None else ini_parts[-1]
            _parts.junit_from_results(os.path.join(sup, "results.jsonl"), part)
        done += collected[: running + 1]
        sys.stdout.flush()
        left = len(collected) - running - 1
        failed = _parts.failed_so_far(sup) + (0 if over else 1)  # (the crash fails its test)
        limit = _parts.maxfail(sup)
        stop = bool(limit and failed >= limit)
        if not left:
            rest = "no test was left to run"
        elif stop:
            rest = f"--maxfail={limit} is reached: the remaining {left} test(s) do not run"
        else:
            rest = f"the remaining {left} test(s) continue in a new process"
        if over:
            # Between two tests (a plugin's reporting hook, say): no test to blame; the
            # run still fails, as pytest's own run would have (an internal error).
            between.append((nodeid, how))
            codes.append(3)
            sys.stderr.write(
                f"\nisolator: the test process died after {nodeid} was over ({how}); {rest}\n"
            )
        else:
            crashed.append((nodeid, how))
            codes.append(1)
            sys.stderr.write(
                f"\nisolator: {nodeid} crashed the test process ({how}); it counts as failed; "
                f"{rest}\n"
            )
        if stop or not left:
            break
    else:
        sys.stderr.write(f"isolator: giving up after {_MAX_RESTARTS} crashed processes\n")
    if junit is None and ini_junit is not None:
        junit, parts = ini_junit, ini_parts
    if junit is not None:
        from isolator import _parts

        if len(parts) == 1 and not crashed and not between:
            _parts.move_junit(parts[0], junit)  # one uninterrupted run: pytest's own report
        else:
            _parts.merge_junit(parts, junit, crashed)
    if crashed:
        sys.stderr.write(
            f"isolator: {len(crashed)} test(s) crashed the interpreter: "
            + ", ".join(f"{n} ({how})" for n, how in crashed)
            + "\n"
        )
    if between:
        sys.stderr.write(
            f"isolator: the test process died {len(between)} time(s) between tests: "
            + ", ".join(f"after {n} ({how})" for n, how in between)
            + "\n"
        )
    if len(sups) > 1 and not crashed and not between:
        from isolator import _parts

        line = _parts.whole_run_line(sups, _now() - t0)
        if line is not None:
            sys.stdout.write(line + "\n")
    return _combine(codes)


class _Forked:
    """A pytest run in a forked child of this (light) process: one interpreter start less
    than a subprocess, with the same crash supervision."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is not None:
            return self.returncode
        if timeout is None:
            _, status = os.waitpid(self.pid, 0)
        else:
            import time

            deadline = time.monotonic() + timeout
            while True:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() > deadline:
                    import subprocess

                    raise subprocess.TimeoutExpired(["pytest"], timeout)
                time.sleep(0.05)
        self.returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        try:
            os.kill(self.pid, sig)
        except ProcessLookupError:
            pass


# The console script's own module, once a forked child replaced it (its code is running).
_SCRIPT_MAIN: list[Any] = []


def _as_python_m_pytest_main() -> None:
    """``sys.modules["__main__"]`` as under ``python -m pytest`` (the other branch's
    child): pytest's ``__main__`` module, not the ``isolator`` console script.  Code that
    looks at the main module's file sees pytest's: hypothesis scans "local" modules for
    constants, and with the environment inside the project the script counted as one (it
    wrote a file into the project that plain pytest does not)."""
    import builtins
    import importlib.util
    import types

    try:
        spec = importlib.util.find_spec("pytest.__main__")
    except (ImportError, ValueError):
        return
    if spec is None or spec.origin is None:
        return
    main = types.ModuleType("__main__")
    main.__file__ = spec.origin
    main.__cached__ = spec.cached  # type: ignore[attr-defined]
    main.__loader__ = spec.loader
    main.__package__ = "pytest"
    main.__spec__ = spec
    main.__builtins__ = builtins  # type: ignore[attr-defined]
    try:
        # Its body under its own name: its imports, not the run that `__main__` starts.
        code = spec.loader.get_code(spec.name)  # type: ignore[union-attr]
        main.__name__ = spec.name
        exec(code, main.__dict__)  # noqa: S102
    except Exception:  # noqa: S110  (the names it binds are a detail: the file is what counts)
        pass
    main.__name__ = "__main__"
    _SCRIPT_MAIN.append(sys.modules.get("__main__"))
    sys.modules["__main__"] = main


def _with_default_reset(cmd: list[str]) -> list[str]:
    """``cmd`` with ``--reset=minimal`` first among pytest's arguments, unless
    pyproject.toml in the current directory sets ``[tool.isolator] reset``."""
    from pathlib import Path

    from isolator import _config

    try:
        if _config.load(Path(os.getcwd())).reset is not None:
            return cmd
    except _config.ConfigError:
        pass  # the plugin reports it
    return [*cmd[:5], "--reset=minimal", *cmd[5:]]


def _start(cmd: list[str], env: dict[str, str], sup: str, default_reset: bool = False) -> Any:
    if not hasattr(os, "fork"):
        import subprocess

        return subprocess.Popen(_with_default_reset(cmd) if default_reset else cmd, env=env)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return _Forked(pid)
    code = 3
    try:
        os.environ.update(env)
        if default_reset:
            cmd = _with_default_reset(cmd)
        # As `python -m pytest` does: the invocation directory is importable.
        sys.path.insert(0, os.getcwd())
        import pytest

        # Imported before pytest installs its assertion rewriter, which would load it
        # through its own (slower) loader: it has no assertions to rewrite.
        import isolator.plugin  # noqa: F401

        # The command line tests see, as under `python -m pytest` (the path the other
        # branch's child gets): not isolator's own `run --reset=...`.
        sys.argv = [os.path.join(os.path.dirname(pytest.__file__), "__main__.py"), *cmd[3:]]
        _as_python_m_pytest_main()
        watch = _RunWatch()
        try:
            # The arguments are in sys.argv, as for `python -m pytest`.
            code = int(_pytest_main(pytest, watch))
            sys.stdout.flush()
        except BrokenPipeError:
            # The output went into a pipe closed early (`| head`): as pytest's console
            # entry point does, the rest of the output goes nowhere and the exit code is
            # the one Python gives a closed pipe.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            code = 1
        if watch.session and not watch.isolated:
            # `-p no:isolator` in the arguments, addopts or the ini file: the result
            # stands, said to be one without isolation.
            sys.stderr.write(
                "isolator: the isolator plugin was blocked (-p no:isolator?): this run had no "
                "isolation\n"
            )
        # pytest returned (a session, or --markers, --version...): this process did not die.
        _mark_finished(sup)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        exit_now(code)


def _pytest_main(pytest: Any, watch: object) -> Any:
    """``pytest.main()``, naming ``isolator run`` in usage errors where pytest can name its
    program (its internal ``_main``, pytest 9 on; else they name ``pytest.main()``)."""
    import inspect

    from _pytest import config

    main = getattr(config, "_main", None)
    if main is not None and "prog" in inspect.signature(main).parameters:
        return main(plugins=[watch], prog="isolator run")
    return pytest.main(plugins=[watch])


class _RunWatch:
    """In the test process: whether a session ran, and isolator's core plugin with it."""

    def __init__(self) -> None:
        self.session = False
        self.isolated = False

    def pytest_sessionstart(self, session: Any) -> None:
        self.session = True
        self.isolated = session.config.pluginmanager.has_plugin("isolator-core")


def _mark_finished(sup: str) -> None:
    """Tell the supervisor that pytest returned (the plugin also says so at session end)."""
    with open(os.path.join(sup, "finished"), "w", encoding="ascii") as f:
        f.write("1\n")


def exit_now(code: int) -> NoReturn:
    """End this process as the interpreter would, without tearing its modules down one by
    one (for a pytest process, tens of milliseconds): atexit handlers still run (logging
    shutdown, weakref finalizers, temporary directories) and the standard streams are
    flushed."""
    try:
        run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
        if run_exitfuncs is not None:
            run_exitfuncs()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _as_wait_status(returncode: int) -> int:
    if returncode < 0:
        return -returncode  # WIFSIGNALED form: the signal number in the low bits
    return returncode << 8


def _combine(codes: list[int]) -> int:
    """One exit code for the parts: failures win over success, errors over failures."""
    if not codes:
        return 3
    for worst in (3, 2, 4):
        if worst in codes:
            return worst
    if 1 in codes:
        return 1
    if all(c == 5 for c in codes):
        return 5
    return 0 if all(c in (0, 5) for c in codes) else max(codes)
