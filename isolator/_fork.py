"""Run one test in a forked child: the fallback for state isolator cannot restore, and
``--reset=fork``.  The child sends its reports back through a pipe as JSON."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import pytest
from _pytest.runner import runtestprotocol

from isolator._status import describe_status

_dumps = json.dumps  # our own reference: a test may monkeypatch json.dumps

CAN_FORK = hasattr(os, "fork")


def run_forked(
    item: pytest.Item,
    nextitem: pytest.Item | None,
    before: Callable[[], object] | None = None,
    after: Callable[[], object] | None = None,
) -> list[pytest.TestReport]:
    """Run ``item``'s protocol in a child process and return its reports.

    ``before``/``after`` run in the child around the test: the filesystem is shared with
    the parent, so files the test wrote are put back before the child exits.
    """
    config = item.config
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            os.close(r)
            if before is not None:
                before()
            reports = runtestprotocol(item, nextitem=None, log=False)
            if after is not None:
                after()
            data = [
                config.hook.pytest_report_to_serializable(config=config, report=rep)
                for rep in reports
            ]
            payload = _dumps(data).encode()
            with os.fdopen(w, "wb") as f:
                f.write(payload)
        except BaseException:
            code = 70
        finally:
            os._exit(code)
    os.close(w)
    chunks = []
    with os.fdopen(r, "rb") as f:
        while True:
            b = f.read(65536)
            if not b:
                break
            chunks.append(b)
    _, status = os.waitpid(pid, 0)
    raw = b"".join(chunks)
    got: list[pytest.TestReport] = []
    if raw:
        try:
            for d in json.loads(raw):
                rep = config.hook.pytest_report_from_serializable(config=config, data=d)
                if rep.skipped and isinstance(rep.longrepr, list):
                    # JSON has no tuples; pytest expects (path, lineno, reason) for skips.
                    rep.longrepr = tuple(rep.longrepr)
                got.append(rep)
        except ValueError:
            got = []
    if not got:
        got = [_crash_report(item, status)]
    # The parent's fixture stack must follow the item chain as if the test ran here.
    try:
        item.session._setupstate.teardown_exact(nextitem)
    except Exception:
        pass
    return got


def _crash_report(item: pytest.Item, status: int) -> pytest.TestReport:
    how = describe_status(status)
    longrepr: Any = f"isolator: the test process crashed ({how}) while running {item.nodeid}"
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
