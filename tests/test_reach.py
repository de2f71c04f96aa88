"""The import scan behind the per-test scopes (``isolator._reach``)."""

from __future__ import annotations

import json
import pathlib
import types
from typing import Any

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


def test_state_another_modules_table_watches_is_in_the_scope_of_the_modules_that_reach_it(
    pytester: pytest.Pytester,
) -> None:
    # A borg (astroid's AstroidManager): its instances share a dict held by the class.
    # The instance bound in pkgb.aaa_manager is walked first, so that table watches the
    # shared dict; pkgb.core reaches it through the class, and a test that only imports
    # pkgb.core must get it reset (astroid's transforms and module cache).
    pytester.mkpydir("pkgb")
    (pytester.path / "pkgb" / "__init__.py").write_text("from pkgb.aaa_manager import MANAGER\n")
    (pytester.path / "pkgb" / "core.py").write_text(
        "class Core:\n"
        "    brain = {'cache': {}}\n"
        "    def __init__(self):\n"
        "        self.cache = Core.brain['cache']\n"
        "def fill(key):\n"
        "    Core.brain['cache'][key] = object()\n"
    )
    (pytester.path / "pkgb" / "aaa_manager.py").write_text(
        "from pkgb.core import Core\nMANAGER = Core()\n"
    )
    pytester.makepyfile(
        test_borg="""
from pkgb import core
def test_fills():
    core.fill("x")
    assert "x" in core.Core.brain["cache"]
def test_sees_it_empty():
    assert core.Core.brain["cache"] == {}
"""
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "isolator", "--reset=minimal"
    )
    result.assert_outcomes(passed=2)


class _Odd(list):  # type: ignore[type-arg]
    """A list subclass: compared pair by pair, apart from builtin containers."""


class _Obj:
    def __init__(self) -> None:
        self.v = [1]


_Obj.__module__ = "t_a"  # a project class: its instances' classes are watched
_PROJECT = ("t_a", "t_m", "t_z")


def _flat(scope: _reach.Scope) -> dict[str, list[int]]:
    names = (
        "lives snaps cells cell_old fns fn_defaults fn_kwdefaults caches cache_sizes "
        "plain_lives plain_snaps odd_lives odd_snaps plain_cells plain_old class_objs class_old"
    )
    return {n: list(map(id, getattr(scope, n))) for n in names.split()}


def _settle(scope: _reach.Scope) -> None:
    """Read every table's tags once (as the first check after a baseline does)."""
    for t in scope.tables:
        t.dirty_watches()
    assert scope.dirty_tables() == []


def test_a_scope_puts_a_changed_tables_watches_in_place_as_a_new_layout_would() -> None:
    # A learned memo entry adds watches to one table of hundreds: the scope splices that
    # table's new parts into its flat lists instead of joining every table again.  The
    # result must be what a scope laid out anew has, table by table, for tables before
    # and after the changed one, with every kind of watch (compared builtin containers,
    # odd ones, classes of instances, functions' defaults).
    import types

    from isolator._state import StateTable

    seen: set[int] = set()
    tables = []
    mods = []
    for name in ("t_a", "t_m", "t_z"):
        mod = types.ModuleType(name)
        mod.L = [1, 2]  # type: ignore[attr-defined]
        mod.S = {1}  # type: ignore[attr-defined]
        mod.O = _Odd([3])  # type: ignore[attr-defined]
        mod.I = _Obj()  # type: ignore[attr-defined]
        mod.D = {"k": [4]}  # type: ignore[attr-defined]
        exec("def f(x=[]): return x", mod.__dict__)
        t = StateTable(seen)
        t.add_module(mod, _PROJECT)
        tables.append(t)
        mods.append(mod)
    scope = _reach.Scope(tables)
    _settle(scope)
    before = {n: getattr(scope, n) for n in ("lives", "plain_lives", "odd_lives", "class_objs")}
    for t, mod in ((tables[1], mods[1]), (tables[0], mods[0])):
        entry = ([5], _Odd([6]), _Obj())
        mod.D["new"] = entry
        t.snaps[t.sites.index(f"{mod.__name__}:D")]["new"] = entry
        t.watch_kept(t.sites.index(f"{mod.__name__}:D"), [("new", entry)], _PROJECT)
    _settle(scope)
    for name, flat in before.items():
        assert getattr(scope, name) is flat, name  # spliced in place, not laid out again
    assert _flat(scope) == _flat(_reach.Scope(tables))
    # (3.13 compares instance dicts by contents, as odd watches too.)
    assert sum(type(x) is _Odd for x in scope.odd_lives) == 5 and len(scope.class_objs) == 5
    # The spliced watches are checked: a change inside the middle table's new entry and
    # one in the last table are both found, each in its own table.
    mods[1].D["new"][1].append(7)
    mods[2].L.append(3)
    assert scope.dirty_tables() == [tables[1], tables[2]]


def _three_tables() -> tuple[list[Any], list[types.ModuleType]]:
    from isolator._state import StateTable

    seen: set[int] = set()
    tables, mods = [], []
    for name in _PROJECT:
        mod = types.ModuleType(name)
        mod.L = [1, 2]  # type: ignore[attr-defined]
        mod.O = _Odd([3])  # type: ignore[attr-defined]
        mod.D = {"k": [4]}  # type: ignore[attr-defined]
        t = StateTable(seen)
        t.add_module(mod, _PROJECT)
        tables.append(t)
        mods.append(mod)
    return tables, mods


def test_a_new_scope_reuses_the_segments_of_unchanged_tables_only() -> None:
    # Every fixture set-up that changes a table makes the scopes anew: the tables whose
    # parts stayed keep their segments, a changed table's are made from its new parts,
    # and the flat lists are what a layout from scratch gives.
    tables, mods = _three_tables()
    scope = _reach.Scope(tables)
    _settle(scope)
    old = list(scope._segs)
    t, mod = tables[1], mods[1]
    i = t.sites.index("t_m:D")
    entry = ([5], _Odd([6]))
    mod.D["new"] = entry  # type: ignore[attr-defined]
    t.snaps[i]["new"] = entry
    t.watch_kept(i, [("new", entry)], _PROJECT)
    again = _reach.Scope(tables)
    assert again._segs[0] is old[0] and again._segs[2] is old[2]
    assert again._segs[1] is not old[1]
    for table in tables:
        table.segs = None
    assert _flat(again) == _flat(_reach.Scope(tables))


def test_the_import_probe_lengths_see_plain_and_odd_containers_change() -> None:
    # The builtin containers are measured in C, the container subclasses one by one (as
    # their built-in base counts): a change in either kind shows, whichever is beside.
    tables, mods = _three_tables()
    scope = _reach.Scope(tables)
    _settle(scope)
    assert scope.subclassed
    first = scope.lengths()
    assert len(first) == len(scope.lives)
    mods[2].L.append(3)  # type: ignore[attr-defined]
    second = scope.lengths()
    assert second != first
    list.append(mods[0].O, 4)  # type: ignore[attr-defined]
    assert scope.lengths() != second


def test_a_seen_set_beside_others_reads_them_and_adds_to_its_own() -> None:
    from isolator._state import SeenBeside

    a, b = {1, 2}, {3}
    seen = SeenBeside([a, b])
    assert 1 in seen and 3 in seen and 4 not in seen
    seen.add(4)
    assert 4 in seen and 4 not in a and 4 not in b
    b.add(5)  # (the others only grow: what they watch later stays theirs)
    assert 5 in seen
    # Of another one, its own part: what it reads beside belongs to those sets' tables.
    outer = SeenBeside([seen])
    assert 4 in outer and 1 not in outer
