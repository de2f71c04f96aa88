"""Library classes' attributes rebound by a test, without monkeypatch: put back after it
where the interpreter can say which classes changed (type watchers, CPython 3.12+)."""

from __future__ import annotations

import sys

import pytest

pytestmark = pytest.mark.skipif(
    sys.version_info < (3, 12), reason="type watchers are CPython 3.12+"
)

LIBRARY = """
class Config:
    level = "info"
    debug = False

class Strict(type):
    def __setattr__(cls, name, value):
        raise AttributeError("read-only class")

class Frozen(metaclass=Strict):
    mode = "safe"

class Base:
    registry = "base"

class Child(Base):
    pass
"""

TESTS = """
import liblib

def test_rebinds():
    liblib.Config.level = "debug"
    liblib.Config.added = 1
    type.__setattr__(liblib.Frozen, "mode", "unsafe")
    liblib.Base.registry = "changed"
    del liblib.Config.debug

def test_sees_the_library_as_imported():
    assert liblib.Config.level == "info"
    assert not hasattr(liblib.Config, "added")
    assert liblib.Frozen.mode == "safe"
    assert liblib.Child.registry == "base"
    assert liblib.Config.debug is False

def test_rebinds_again():
    liblib.Config.level = "trace"
    assert liblib.Config.level == "trace"

def test_sees_the_library_as_imported_again():
    assert liblib.Config.level == "info"
"""


def _suite(pytester: pytest.Pytester) -> str:
    lib = pytester.mkdir("lib")
    (lib / "liblib.py").write_text(LIBRARY)
    proj = pytester.mkdir("proj")
    (proj / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(lib)!r})\nimport liblib\n"
    )
    (proj / "test_lib.py").write_text(TESTS)
    return str(proj)


def _run(pytester: pytest.Pytester, proj: str, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "isolator", "-v",
        "--rootdir", proj, proj, *args,
    )  # fmt: skip


def test_a_library_class_attribute_a_test_rebinds_is_put_back(pytester: pytest.Pytester) -> None:
    proj = _suite(pytester)
    result = _run(pytester, proj, "--reset=minimal")
    result.assert_outcomes(passed=4)
    out = result.stdout.str()
    assert "liblib:Config.level (2)" in out
    # Without resets the same order fails: the dependence is real.
    _run(pytester, proj, "--reset=none").assert_outcomes(passed=2, failed=2)


def test_library_class_attributes_set_by_a_session_fixture_are_baseline_until_its_teardown(
    pytester: pytest.Pytester,
) -> None:
    lib = pytester.mkdir("lib")
    (lib / "liblib.py").write_text(LIBRARY)
    proj = pytester.mkdir("proj")
    (proj / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(lib)!r})\n"
        "import liblib, pytest\n"
        "@pytest.fixture(scope='module')\n"
        "def verbose():\n"
        "    liblib.Config.level = 'verbose'\n"
        "    yield\n"
    )
    (proj / "test_a.py").write_text(
        "import liblib\n"
        "def test_uses(verbose):\n"
        "    assert liblib.Config.level == 'verbose'\n"
        "    liblib.Config.level = 'mine'\n"
        "def test_uses_again(verbose):\n"
        "    assert liblib.Config.level == 'verbose'\n"
    )
    (proj / "test_b.py").write_text(
        "import liblib\ndef test_after():\n    assert liblib.Config.level == 'info'\n"
    )
    _run(pytester, proj, "--reset=minimal").assert_outcomes(passed=3)
