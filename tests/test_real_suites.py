"""Real third-party suites from PyPI sdists: isolation keeps their outcomes, removes their
known order dependencies.

The suites are fetched and set up by ``experiments/suites.py`` (cached under
``experiments/work/``); without network access or the sdists these tests are skipped.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.slow

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"

# (suite, polluter, victim): the victim passes alone and fails right after the polluter.
KNOWN_VICTIMS = [
    ("six", "test_six.py::test_move_items[html_parser]", "test_six.py::test_lazy"),
    (
        "parso",
        "test/test_diff_parser.py::test_change_and_undo",
        "test/test_diff_parser.py::test_simple",
    ),
]


def _load(name: str) -> ModuleType:
    """Import an experiments/ module by path (experiments/ is not a package)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, EXPERIMENTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


suites = _load("suites")
harness = _load("harness")


def _prepare(name: str) -> Any:
    try:
        return suites.prepare(name)
    except suites.SuiteUnavailable as exc:
        pytest.skip(f"suite {name} unavailable (network or sdist): {exc}")


def _run(cmd: list[str], info: Any, tmp: Path, tag: str) -> Any:
    """Run ``cmd`` in the suite; fail on an abnormal exit; return junit key -> Outcome."""
    res = harness.measure(cmd, info.path, info.env(), tmp / f"{tag}.log", tmp / f"{tag}.xml")
    assert res.rc in (0, 1), f"{tag}: exit {res.rc}\n{harness.tail(res.log, 30)}"
    assert res.junit_ok, f"{tag}: no junitxml\n{harness.tail(res.log, 30)}"
    return res.outcomes


def _outcomes(cmd: list[str], info: Any, tmp: Path, tag: str) -> dict[str, str]:
    return {key: out.outcome for key, out in _run(cmd, info, tmp, tag).items()}


@pytest.mark.parametrize("name", ["six", "parso", "marshmallow"])
def test_minimal_keeps_declared_order_outcomes(name: str, tmp_path: Path) -> None:
    info = _prepare(name)
    plain = _run(info.pytest_cmd(), info, tmp_path, "plain")
    minimal = _run(info.isolator_cmd("minimal"), info, tmp_path, "minimal")
    assert len(plain) > 100, f"{name}: plain pytest collected only {len(plain)} tests"
    # compare() pairs tests whose parametrize ids embed the current time (marshmallow).
    diffs = harness.compare(plain, minimal)
    details = [f"{rk or gk}: plain={ro} minimal={go} {minimal[gk].message if gk else ''}"
               for rk, gk, ro, go in diffs]  # fmt: skip
    assert not diffs, f"{name}: outcomes differ:\n" + "\n".join(details[:20])


@pytest.mark.parametrize(("name", "polluter", "victim"), KNOWN_VICTIMS, ids=["six", "parso"])
def test_known_victim_is_fixed_by_minimal(
    name: str, polluter: str, victim: str, tmp_path: Path
) -> None:
    info = _prepare(name)
    pkey, vkey = harness.junit_key(polluter), harness.junit_key(victim)

    alone = _outcomes(info.pytest_cmd(*info.options, victim), info, tmp_path, "alone")
    assert alone == {vkey: "passed"}, "the victim must pass alone in a fresh interpreter"

    plain = _outcomes(info.pytest_cmd(*info.options, polluter, victim), info, tmp_path, "plain")
    assert plain == {pkey: "passed", vkey: "failed"}, "plain pytest must show the dependency"

    cmd = info.isolator_cmd("minimal", *info.options, polluter, victim)
    isolated = _outcomes(cmd, info, tmp_path, "minimal")
    assert isolated == {pkey: "passed", vkey: "passed"}
