"""isolator beside pyfakefs (real runs of its pytest plugin): the fake filesystem replaces
os, shutil, io and pathlib in loaded modules while tests run, and pauses a higher-scoped
one between tests."""

from __future__ import annotations

import pytest

pytest.importorskip("pyfakefs")


def test_file_operations_in_a_fake_filesystem_are_not_journaled(
    pytester: pytest.Pytester,
) -> None:
    # shutil.rmtree raises its audit event in the fake filesystem too: the file guard used
    # to copy the fake tree aside with the faked shutil (AttributeError out of the audit
    # hook into the test), and to report fake temporary directories as not restorable.
    real = pytester.path / "data" / "real.txt"
    real.parent.mkdir()
    real.write_text("real content")
    pytester.makepyfile(
        test_fake=f"""
import os, shutil, tempfile
REAL = {str(real)!r}
def test_rmtree(fs):
    os.makedirs("/fakeonly/bar/res")
    shutil.rmtree("/fakeonly/bar")
    assert not os.path.exists("/fakeonly/bar")
def test_windows_rmtree(fs):
    from pyfakefs.fake_filesystem import OSType
    fs.os = OSType.WINDOWS
    os.makedirs("C:/foo/bar/res")
    shutil.rmtree("C:/foo/bar")
    assert not os.path.exists("C:/foo/bar")
def test_temporary_directory(fs):
    with tempfile.TemporaryDirectory() as d:
        open(os.path.join(d, "x"), "w").close()
def test_write_over_a_real_path(fs):
    assert not os.path.exists(REAL)
    os.makedirs(os.path.dirname(REAL))
    with open(REAL, "w") as f:
        f.write("fake content")
    shutil.move(REAL, REAL + ".moved")
def test_real_file_still_there():
    with open(REAL) as f:
        assert f.read() == "real content"
""",
    )
    for _ in range(2):
        result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "isolator")
        result.assert_outcomes(passed=5)
        assert "could not reset" not in result.stdout.str()
        assert "forked child" not in result.stdout.str()
    assert real.read_text() == "real content"


def test_a_module_scoped_fake_filesystem_paused_between_tests(
    pytester: pytest.Pytester,
) -> None:
    # pyfakefs pauses fs_module after each test and resumes it at the next setup; the
    # check after a test used to put the fake modules back while it was paused, and
    # pytest's own code then ran on the fake filesystem (INTERNALERROR).
    pytester.makepyfile(
        test_mod="""
import os, pathlib, pytest
@pytest.fixture(scope="module", autouse=True)
def use_fs(fs_module):
    fs_module.create_file(os.path.join("foo", "bar"))
    yield fs_module
def test_1():
    assert os.path.exists(os.path.join("foo", "bar"))
    assert type(pathlib).__name__ == "FakePathlibModule"
def test_2():
    assert os.path.exists(os.path.join("foo", "bar"))
""",
        test_real="""
import os, pathlib
def test_3():
    assert not os.path.exists(os.path.join("foo", "bar"))
    assert type(pathlib).__name__ == "module"
""",
    )
    for mode in ("minimal", "full"):
        result = pytester.runpytest_subprocess(
            "-p", "no:randomly", "-p", "isolator", f"--reset={mode}"
        )
        result.assert_outcomes(passed=3)
        assert "INTERNALERROR" not in result.stdout.str()
