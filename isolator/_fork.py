"""Run tests in forked children: the fallback for state isolator cannot restore, and
``--reset=fork``.  Children send their reports back through a pipe as JSON.

A state-setter chain (tests after which no reset happens, ``keep_state_after``) must see
its own state: the child that ran a chain member stays alive and runs the next member too,
so the whole chain runs in one child, as it would run in one process.  The parent drives it
one test at a time (``ForkRunner``), so the run order, ``-x`` and xdist batches stay the
parent's, and every test is reported when it ran.
"""

from __future__ import annotations

import importlib
import json
import os
import struct
import sys
import threading
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

import pytest
from _pytest.runner import runtestprotocol

from isolator._status import describe_status

_dumps = json.dumps  # our own references: a test may monkeypatch json or os
_loads = json.loads
_fork = getattr(os, "fork", None)
_exit = os._exit

CAN_FORK = _fork is not None
_HEADER = struct.Struct("!I")

Hook = Callable[[], object] | None


@dataclass
class _Child:
    """A forked child waiting for the next test of its chain (``cmd``: where to say which)."""

    pid: int
    cmd: IO[bytes]
    reports: IO[bytes]


class ForkRunner:
    """Forked runs of one session.

    ``chain`` is the child of an unfinished state-setter chain: it ran the previous test,
    kept its state and waits for the next test, which must run there too.
    """

    def __init__(self) -> None:
        self.chain: _Child | None = None
        # What the child's ``check`` said after the last test run (None: not asked).
        self.last_clean: bool | None = None

    @property
    def chained(self) -> bool:
        return self.chain is not None

    def run(
        self,
        item: pytest.Item,
        nextitem: pytest.Item | None,
        keep: bool = False,
        before: Hook = None,
        after: Hook = None,
        check: Callable[[], bool] | None = None,
    ) -> list[pytest.TestReport]:
        """Run ``item`` in a child (the open chain's, else a new one) and return its reports.

        ``keep``: no reset after ``item``: the child stays alive for ``nextitem``.
        ``before``/``after`` run in a new child before its first test and after its last:
        the filesystem is shared with the parent, so files the tests wrote are put back.
        ``check`` runs in a new child after its only test (not in a chain), and what it
        says is ``last_clean``.
        """
        keep = keep and nextitem is not None
        child = self.chain
        self.last_clean = None
        if child is None:
            child = _spawn(
                item, nextitem if keep else None, keep, before, after, None if keep else check
            )
        else:
            following = nextitem.nodeid if keep and nextitem is not None else None
            msg = {"run": item.nodeid, "next": following, "keep": keep}
            try:
                child.cmd.write(_dumps(msg).encode() + b"\n")
                child.cmd.flush()
            except OSError:
                pass  # the child is gone: reported as a crash below
        data = _read_message(child.reports)
        got = _reports(item, data)
        if isinstance(data, dict) and isinstance(data.get("clean"), bool):
            self.last_clean = data["clean"]
        # An error message means the child stopped after it (see _child_loop).
        if keep and got and isinstance(data, dict) and "error" not in data:
            self.chain = child
        else:
            self.chain = None
            status = _finish(child)
            if not got:
                how = describe_status(status)
                got = [_crash_report(item, f"isolator: the test process crashed ({how})")]
        # The parent's fixture stack must follow the item chain as if the test ran here.
        try:
            item.session._setupstate.teardown_exact(nextitem)
        except Exception:
            pass
        return got

    def close(self) -> None:
        """End an unfinished chain (the run stopped before its next test)."""
        if self.chain is not None:
            child, self.chain = self.chain, None
            _finish(child)


def _spawn(
    item: pytest.Item,
    nextitem: pytest.Item | None,
    keep: bool,
    before: Hook,
    after: Hook,
    check: Callable[[], bool] | None,
) -> _Child:
    assert _fork is not None
    cmd_r, cmd_w = os.pipe()
    rep_r, rep_w = os.pipe()
    pid = _fork()
    if pid == 0:  # child
        code = 0
        try:
            os.close(cmd_w)
            os.close(rep_r)
            code = _child_loop(item, nextitem, keep, cmd_r, rep_w, before, after, check)
        except BaseException:
            code = 70
        finally:
            _exit(code)
    os.close(cmd_r)
    os.close(rep_w)
    return _Child(pid, os.fdopen(cmd_w, "wb"), os.fdopen(rep_r, "rb"))


def _child_loop(
    item: pytest.Item,
    nextitem: pytest.Item | None,
    keep: bool,
    cmd_fd: int,
    rep_fd: int,
    before: Hook,
    after: Hook,
    check: Callable[[], bool] | None = None,
) -> int:
    """Run ``item``, then, while the parent says no reset happens, the tests it names.
    ``check``: asked after ``item`` when it is the child's only test."""
    config = item.config
    by_id: dict[str, pytest.Item] | None = None
    cmd = os.fdopen(cmd_fd, "rb")
    out = os.fdopen(rep_fd, "wb")
    logged = _Logged.install(config)
    _forget_parent_finalizers(item.session)
    _revive_thread_pools()
    if before is not None:
        before()
    while True:
        try:
            # The last test of a child tears down everything the child set up, as in a
            # process of its own (not what it inherited: see _forget_parent_finalizers).
            logged.reports.clear()
            # The parent's warnings capture for this test (filters, marks) was in force
            # when the child was made; what the test warns is recorded here and sent.
            with warnings.catch_warnings(record=True) as caught:
                phases = runtestprotocol(item, nextitem=nextitem if keep else None, log=False)
            reports = _in_order(phases, logged.reports)
            payload: Any = {
                "reports": [
                    config.hook.pytest_report_to_serializable(config=config, report=rep)
                    for rep in reports
                ],
                "failed_subtests": _failed_subtests(config).get(_node_key(item), 0),
                "warnings": [_warning_to_json(w) for w in caught],
            }
            if check is not None:  # (given only to a child of one test: see run)
                try:
                    payload["clean"] = bool(check())
                except Exception:
                    payload["clean"] = False
        except BaseException:
            payload = {"error": traceback.format_exc()}
            keep = False
        data = _dumps(payload).encode()
        out.write(_HEADER.pack(len(data)) + data)
        out.flush()
        if not keep:
            break
        line = cmd.readline()
        if not line:
            break  # the parent stopped the chain
        msg = _loads(line)
        if by_id is None:
            by_id = {}
            for it in item.session.items:
                by_id.setdefault(it.nodeid, it)
        found = by_id.get(msg["run"])
        if found is None:
            err = {"error": f"isolator: {msg['run']} is not in this process's collection"}
            data = _dumps(err).encode()
            out.write(_HEADER.pack(len(data)) + data)
            break
        item = found
        nextitem = by_id.get(msg["next"]) if msg["next"] else None
        keep = bool(msg["keep"])
    out.close()
    if after is not None:
        after()
    return 0


def _revive_thread_pools() -> None:
    """In a new child: the thread pools made in the parent (a session fixture's, asyncio's
    default executor, one an earlier test started) count workers that the child does not
    have, as a fork copies only the thread that forks, and work handed to them would
    wait forever.  Each forgets those workers: its next ``submit`` starts one here."""
    pools = sys.modules.get("concurrent.futures.thread")
    workers = getattr(pools, "_threads_queues", None)
    if not workers:
        return
    for th in list(workers):
        try:
            pool = th._args[0]()  # (the worker's target holds a weak reference to it)
            if pool is not None:
                pool._threads.discard(th)
                pool._idle_semaphore = threading.Semaphore(0)
            del workers[th]  # (nothing to join at the child's exit)
        except Exception:  # noqa: S112  (another version's internals: left as they are)
            continue


def _forget_parent_finalizers(session: pytest.Session) -> None:
    """In a new child: the fixtures set up so far are the parent's, which tears them down
    itself.  Their finalizers must not run here as well: what they stop or remove is the
    parent's (a server's shutdown() waits for a serving thread that exists only in the
    parent, forever).  Fixtures the child sets up register new finalizers, which run."""
    stack = getattr(getattr(session, "_setupstate", None), "stack", None)
    if isinstance(stack, dict):
        for entry in stack.values():
            finalizers = entry[0] if isinstance(entry, tuple) and entry else None
            if isinstance(finalizers, list):
                finalizers.clear()


class _Logged:
    """In a child: the reports logged while a test runs besides its phases' (subtests
    log one per failed or passed subtest), sent to the parent with them.  The child's
    terminal reporter goes: the parent reports everything the child sends, once."""

    def __init__(self) -> None:
        self.reports: list[pytest.TestReport] = []

    @classmethod
    def install(cls, config: pytest.Config) -> _Logged:
        logged = cls()
        pm = config.pluginmanager
        terminal = pm.get_plugin("terminalreporter")
        if terminal is not None:
            pm.unregister(terminal)
        pm.register(logged, "isolator-forked-child-reports")
        return logged

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.reports.append(report)


def _in_order(
    phases: list[pytest.TestReport], logged: list[pytest.TestReport]
) -> list[pytest.TestReport]:
    """The phase reports with the reports logged during the call before the call's."""
    if not logged:
        return phases
    out: list[pytest.TestReport] = []
    for rep in phases:
        if rep.when == "call":
            out += logged
            logged = []
        out.append(rep)
    return out + logged


def _read_message(f: IO[bytes]) -> Any:
    """One message from a child, or None when it died before sending it all."""
    head = f.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(head)
    body = f.read(size)
    if len(body) < size:
        return None
    try:
        return _loads(body)
    except ValueError:
        return None


def _finish(child: _Child) -> int:
    """Let the child go (it ends on EOF) and reap it; returns its wait status."""
    try:
        child.cmd.close()
    except OSError:
        pass
    child.reports.close()
    _, status = os.waitpid(child.pid, 0)
    return status


def _reports(item: pytest.Item, data: Any) -> list[pytest.TestReport]:
    config = item.config
    if not isinstance(data, dict):
        return []
    if "error" in data:
        return [_crash_report(item, f"isolator: in the forked child: {data.get('error')}")]
    failed = data.get("failed_subtests", 0)
    if isinstance(failed, int) and failed > 0:
        # What pytest counts in the test's process to fail a test whose subtests failed,
        # counted here too, where its reports are shown.
        counts = _failed_subtests(config)
        counts[_node_key(item)] = counts.get(_node_key(item), 0) + failed
    for w in data.get("warnings", ()):
        item.ihook.pytest_warning_recorded.call_historic(
            kwargs=dict(
                warning_message=_warning_from_json(w),
                nodeid=item.nodeid,
                when="runtest",
                location=None,
            )
        )
    got: list[pytest.TestReport] = []
    for d in data.get("reports", ()):
        rep = config.hook.pytest_report_from_serializable(config=config, data=d)
        if rep.skipped and isinstance(rep.longrepr, list):
            # JSON has no tuples; pytest expects (path, lineno, reason) for skips.
            rep.longrepr = tuple(rep.longrepr)
        got.append(rep)
    return got


def _warning_to_json(w: warnings.WarningMessage) -> dict[str, Any]:
    category = w.category
    return {
        "category": [category.__module__, category.__qualname__],
        "message": str(w.message),
        "filename": str(w.filename),
        "lineno": w.lineno,
        "line": w.line,
    }


def _warning_from_json(d: dict[str, Any]) -> warnings.WarningMessage:
    """A warning recorded in a child, for the parent's warnings summary: its category
    class where the parent has it (the same modules are imported there), else
    UserWarning; its message as text."""
    category: Any = UserWarning
    try:
        module, qualname = d["category"]
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
        if isinstance(found, type) and issubclass(found, Warning):
            category = found
    except Exception:
        pass
    return warnings.WarningMessage(
        d.get("message", ""),
        category,
        d.get("filename", ""),
        d.get("lineno", 0),
        None,
        d.get("line"),
    )


def _failed_subtests(config: pytest.Config) -> Any:
    """pytest's count of failed subtests per test (pytest >= 9), else an empty dict."""
    try:
        key = getattr(importlib.import_module("_pytest.subtests"), "failed_subtests_key", None)
    except ImportError:
        return {}
    return {} if key is None else config.stash.get(key, {})


def _node_key(item: pytest.Item) -> Any:
    """How pytest keys that count: the structured node id (``item.id``) where it exists."""
    return getattr(item, "id", item.nodeid)


def _crash_report(item: pytest.Item, why: str) -> pytest.TestReport:
    longrepr: Any = f"{why} while running {item.nodeid}"
    return pytest.TestReport(
        nodeid=item.nodeid,
        location=item.location,
        keywords={k: 1 for k in item.keywords},
        outcome="failed",
        longrepr=longrepr,
        when="call",
        sections=[],
        duration=0.0,
        user_properties=[],
    )
