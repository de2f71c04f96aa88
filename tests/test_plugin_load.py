"""How pytest loads isolator: its modules are imported as Python imports them."""

from __future__ import annotations

import pytest

# Loaded with -p before the entry points: marks the isolator package for assertion
# rewriting, as pytest does for a distribution installed from a wheel (an editable install
# names no package files, so pytest marks nothing of it).
MARK_PLUGIN = """
import sys

for finder in sys.meta_path:
    if hasattr(finder, "mark_rewrite"):
        finder.mark_rewrite("isolator")
"""

REPORT_CONFTEST = """
import json
import sys


def pytest_sessionfinish(session):
    loaders = {
        name: type(getattr(mod.__spec__, "loader", None)).__name__
        for name, mod in list(sys.modules.items())
        if name.startswith("isolator.") and getattr(mod, "__spec__", None) is not None
    }
    with open("loaders.json", "w") as fh:
        json.dump(loaders, fh)
"""


@pytest.mark.parametrize("runner", ["pytest", "isolator-run"])
@pytest.mark.parametrize("mark", [False, True], ids=["editable", "marked"])
def test_isolator_modules_are_not_assertion_rewritten(
    pytester: pytest.Pytester, mark: bool, runner: str
) -> None:
    # A module imported through pytest's rewriter costs about a millisecond more, and a
    # full parse and rewrite where its __pycache__ cannot be written.  `isolator run` has
    # imported the package before pytest starts (and marks it) in the same process.
    import json
    import sys

    pytester.makepyfile(mark_isolator=MARK_PLUGIN)
    pytester.makeconftest(REPORT_CONFTEST)
    pytester.makepyfile(test_a="def test_one():\n    pass\n")
    pytester.syspathinsert()
    args = ["-p", "mark_isolator"] if mark else []
    if runner == "pytest":
        result = pytester.runpytest_subprocess(*args, "-p", "no:randomly", "--reset=minimal")
        result.assert_outcomes(passed=1)
    else:
        # pytester.run puts the test directory first on the child's PYTHONPATH.
        result = pytester.run(
            sys.executable, "-m", "isolator", "run", "--reset=minimal", *args, timeout=120
        )
        assert result.ret == 0, result.stdout.str() + result.stderr.str()
        result.assert_outcomes(passed=1)
    loaders = json.loads((pytester.path / "loaders.json").read_text())
    for name in (
        "isolator.plugin",
        "isolator._schedplugin",
        "isolator._depsplugin",
        "isolator.resetter",
    ):
        assert name in loaders
    rewritten = sorted(n for n, loader in loaders.items() if loader == "AssertionRewritingHook")
    assert rewritten == []


def test_a_resetting_run_leaves_ctypes_unimported_as_a_fresh_process_does(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # isolator reads dict version tags, slot areas and the random generator's position,
    # and uses type watchers where there are, through _ctypes directly: a test that looks
    # at what is imported sees the modules of a plain run.  (Other plugins are left out:
    # some import ctypes themselves.)
    import sys

    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(
        test_mods="""
import random, sys

def test_report():
    random.random()
    print("CTYPES", "ctypes" in sys.modules)
"""
    )
    plain = pytester.run(sys.executable, "-m", "pytest", "-s", timeout=120)
    plain.stdout.fnmatch_lines(["*CTYPES False*"])
    result = pytester.run(
        sys.executable, "-m", "isolator", "run", "--reset=minimal", "-s", timeout=120
    )
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*CTYPES False*", "*--reset=minimal: 1 tests checked*"])
