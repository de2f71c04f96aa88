"""The import scan behind the per-test scopes (``isolator._reach``)."""

from __future__ import annotations

import json
import pathlib

import pytest

from isolator import _reach

SOURCES = {
    "plain": "import os\nimport a.b as c, d\n",
    "from": "from .x import (\n    y,\n    import_module as z,\n)\n"
    "from importlib import import_module\n",
    "comment and string": "# import nothing\nx = 'import os'\n    import late\n",
    "word inside names": "important = 1\nreimport()\nfrom pkg import importer\n",
    "no trailing newline": "import last",
    "empty": "",
}


@pytest.mark.parametrize("text", SOURCES.values(), ids=SOURCES.keys())
def test_the_fast_scan_finds_what_the_pattern_finds(text: str) -> None:
    want = [(m.span(), m.groups()) for m in _reach._IMPORT_RE.finditer(text)]
    got = [(m.span(), m.groups()) for m in _reach._import_matches(text)]
    assert got == want


def test_the_fast_scan_on_the_standard_library() -> None:
    # Real modules, with every import style there is; the scan must agree on each.
    lib = pathlib.Path(pytest.__file__).parent.parent
    files = sorted(pathlib.Path(_reach.__file__).parent.glob("*.py"))
    files += sorted((lib / "_pytest").glob("*.py"))
    files += sorted(pathlib.Path(json.__file__).parent.glob("*.py"))
    assert len(files) > 20
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        want = [m.span() for m in _reach._IMPORT_RE.finditer(text)]
        assert [m.span() for m in _reach._import_matches(text)] == want, path


def test_relative_imports_are_resolved(tmp_path: pathlib.Path) -> None:
    src = tmp_path / "mod.py"
    src.write_text("from . import sib\nfrom ..up import (a,\n b as c)\nimport x.y\n")
    got = _reach.imports_of("pkg.sub.mod", str(src), "pkg.sub")
    assert got == {"pkg.sub", "pkg.sub.sib", "pkg.up", "pkg.up.a", "pkg.up.b", "x.y"}


def test_a_package_reaches_the_submodules_whose_objects_it_reexports(
    pytester: pytest.Pytester,
) -> None:
    # ``pkgx.code()`` runs pkgx.api's code: pkgx.api's state is in the scope of a test
    # that only imports pkgx (isort's ``isort.code``, whose caches grew across a module's
    # tests).
    pytester.mkpydir("pkgx")
    (pytester.path / "pkgx" / "__init__.py").write_text("from .api import code\n")
    (pytester.path / "pkgx" / "api.py").write_text(
        "COUNT = 0\ndef code():\n    global COUNT\n    COUNT += 1\n    return COUNT\n"
    )
    pytester.makepyfile(
        test_b="""
import pkgx
def test_first():
    assert pkgx.code() == 1
def test_second():
    assert pkgx.code() == 1
"""
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "isolator", "--reset=minimal"
    )
    result.assert_outcomes(passed=2)
