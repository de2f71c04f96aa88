"""sys.modules between tests, end to end: what a test adds, replaces or deletes is undone."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "isolator", "--reset=minimal", *args
    )


def _lib_project(
    pytester: pytest.Pytester, lib_files: dict[str, str], conftest: str = ""
) -> tuple[Path, Path]:
    """A library directory outside the rootdir, put on sys.path by the conftest of a
    project directory (plus ``conftest``'s lines); returns (library, project)."""
    lib = pytester.mkdir("lib")
    for name, text in lib_files.items():
        path = lib / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    proj = pytester.mkdir("proj")
    (proj / "conftest.py").write_text(f"import sys\nsys.path.insert(0, {str(lib)!r})\n{conftest}")
    return lib, proj


def _run_lib_tests(
    pytester: pytest.Pytester, lib_files: dict[str, str], tests: str
) -> pytest.RunResult:
    """Run ``tests`` (a test module's source) in a project beside a library of
    ``lib_files`` (see _lib_project)."""
    _, proj = _lib_project(pytester, lib_files)
    (proj / "test_lib.py").write_text(tests)
    return _run(pytester, "--rootdir", str(proj), str(proj / "test_lib.py"))


def test_a_replaced_entry_comes_back_even_when_the_count_is_unchanged(
    pytester: pytest.Pytester,
) -> None:
    # colorsys is imported at collection, so it is part of the baseline; the polluter swaps
    # it for a stand-in without adding or removing any entry.
    pytester.makepyfile(
        test_swap="""
import sys, types
import colorsys

def test_swaps():
    sys.modules["colorsys"] = types.ModuleType("colorsys")

def test_sees_the_real_module():
    import colorsys as again
    assert again is colorsys
    assert sys.modules["colorsys"] is colorsys
"""
    )
    result = _run(pytester, "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*<sys.modules>:colorsys (1)*"])


def test_deleted_and_added_entries_in_one_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        helper_a="VALUE = 'a'\n",
        helper_b="VALUE = 'b'\n",
        test_mix="""
import sys
import colorsys
import helper_a

def test_deletes_one_and_imports_another():
    del sys.modules["colorsys"]
    del sys.modules["helper_a"]
    import helper_b
    assert helper_b.VALUE == "b"

def test_fresh_view():
    assert sys.modules["colorsys"] is colorsys
    assert sys.modules["helper_a"] is helper_a
    assert "helper_b" not in sys.modules

def test_imports_again():
    import helper_b
    assert "helper_b" in sys.modules

def test_fresh_again():
    assert "helper_b" not in sys.modules
    assert sys.modules["colorsys"] is colorsys
""",
    )
    _run(pytester).assert_outcomes(passed=4)


def test_a_module_imported_by_a_test_is_gone_for_the_next_and_comes_back_on_import(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_imports="""
import sys

def test_imports_graphlib():
    import graphlib
    assert "graphlib" in sys.modules

def test_does_not_have_it():
    assert "graphlib" not in sys.modules

def test_imports_it_again():
    import graphlib
    assert graphlib.TopologicalSorter({"a": {"b"}}).static_order()
    assert sys.modules["graphlib"] is graphlib

def test_still_fresh():
    assert "graphlib" not in sys.modules
"""
    )
    _run(pytester).assert_outcomes(passed=4)


def test_a_module_comes_back_with_the_namespace_its_import_left(
    pytester: pytest.Pytester,
) -> None:
    # graphlib and email.mime.text are not imported before the tests: the first test's
    # import executes them, its writes into them must not reach the later tests, and the
    # module object (with its classes) is still the same one.
    pytester.makepyfile(
        test_rebinds="""
import importlib.machinery
import importlib.util
import sys

SEEN = []

def test_imports_and_rebinds():
    import graphlib
    import email.mime.text
    graphlib.CUSTOM = 1
    graphlib.TopologicalSorter = None
    del email.mime.text.MIMEText
    SEEN.append((graphlib, graphlib.CycleError))

def test_imports_again_and_sees_a_fresh_namespace():
    import graphlib
    import email.mime.text
    assert not hasattr(graphlib, "CUSTOM")
    assert graphlib.TopologicalSorter({"a": {"b"}}).static_order()
    assert email.mime.text.MIMEText("x")
    assert type(email.mime.text.__loader__) is importlib.machinery.SourceFileLoader
    assert email.mime.text.__spec__.loader is email.mime.text.__loader__

def test_a_spec_lookup_gets_the_real_loader():
    spec = importlib.util.find_spec("colorsys" if "colorsys" not in sys.modules else "tabnanny")
    assert type(spec.loader) is importlib.machinery.SourceFileLoader
"""
    )
    _run(pytester, "-v").assert_outcomes(passed=3)
    plain = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:isolator", "-v")
    plain.assert_outcomes(passed=2, failed=1)


def test_a_library_module_whose_import_has_effects_is_imported_anew(
    pytester: pytest.Pytester,
) -> None:
    # Two library modules outside the rootdir, imported only by tests: ``chatty`` warns
    # and configures a logger when imported (effects the resets undo, so reinstating it
    # would skip them: it must be executed again, as in a fresh process), ``quiet`` only
    # defines things (it comes back as the same object, and its import is not executed
    # twice). The warning names the importing test file, as without isolator.
    _, proj = _lib_project(
        pytester,
        {
            "chatty.py": "import logging, warnings\n"
            "logging.getLogger('chatty').setLevel(logging.ERROR)\n"
            "warnings.warn('chatty is deprecated', DeprecationWarning, stacklevel=2)\n",
            "quiet.py": "import sys\nsys.quiet_runs = getattr(sys, 'quiet_runs', 0) + 1\n",
        },
    )
    body = """
import logging
import sys
import pytest

def _check():
    with pytest.warns(DeprecationWarning) as rec:
        import chatty
    assert rec[0].filename == __file__
    assert logging.getLogger("chatty").level == logging.ERROR
    import quiet
    assert sys.quiet_runs == 1

def test_first():
    _check()

def test_second():
    _check()
"""
    (proj / "test_lib.py").write_text(body)
    result = _run(pytester, "--rootdir", str(proj), str(proj / "test_lib.py"))
    result.assert_outcomes(passed=2)


@pytest.mark.parametrize(
    ("effect", "check"),
    [
        ("os.environ['LIB_EFFECT'] = 'set'", "os.environ.get('LIB_EFFECT') == 'set'"),
        (
            "logging.getLogger('lib.effect').setLevel(logging.ERROR)",
            "logging.getLogger('lib.effect').level == logging.ERROR",
        ),
        ("sys.path.append('/lib-effect')", "'/lib-effect' in sys.path"),
        ("warnings.simplefilter('error', UserWarning)", "warnings.filters[0][2] is UserWarning"),
    ],
    ids=["environ", "logging", "sys.path", "warnings"],
)
def test_a_library_module_that_only_changes_process_state_when_imported_runs_again(
    pytester: pytest.Pytester, effect: str, check: str
) -> None:
    # Its import changes nothing but process-wide state, which the reset after each test
    # undoes: a later import must run it again (a fresh process would), also when it is
    # imported inside another module's first import, and when the test had already changed
    # other state before importing it.
    prelude = "import logging, os, sys, warnings\n"
    body = f"""
{prelude}
import pytest

def test_direct():
    import effect
    assert {check}

def test_nested():
    import outer
    assert {check}

def test_after_other_changes(monkeypatch):
    monkeypatch.setenv("OTHER", "1")
    logging.getLogger("other").setLevel(logging.WARNING)
    import effect
    assert {check}

def test_direct_again():
    import effect
    assert {check}
"""
    result = _run_lib_tests(
        pytester,
        {"effect.py": prelude + effect + "\n", "outer.py": "import effect\n"},
        body,
    )
    result.assert_outcomes(passed=4)


REGISTRY_LIB = {
    "registry.py": "REGISTERED = set()\n\n"
    "def register(key):\n"
    "    if key in REGISTERED:\n"
    "        raise ValueError(f'{key} was already registered')\n"
    "    REGISTERED.add(key)\n",
    # Its import warns (so it is executed again on each import) and registers itself.
    "plugin_mod.py": "import warnings, registry\n"
    "warnings.warn('plugin_mod is old', DeprecationWarning)\n"
    "registry.register('plugin')\n"
    "class Thing:\n    pass\n",
    # Pure itself, but it imports a module that is executed again (a new object each time).
    "dep.py": "import warnings\nwarnings.warn('dep is old', DeprecationWarning)\n",
    "user.py": "import dep, registry\nregistry.register('user')\n",
    "needs_env.py": "import os, warnings, registry\n"
    "warnings.warn('needs_env is old', DeprecationWarning)\n"
    "if os.environ.get('NEEDS') != '1':\n"
    "    raise RuntimeError('NEEDS is not set')\n"
    "registry.register('needs')\n",
}


def test_a_module_that_an_earlier_import_registered_comes_back_when_running_it_again_fails(
    pytester: pytest.Pytester,
) -> None:
    # Executing the module again meets the registry entry its first execution left (in
    # another library's object, which no reset puts back): it comes back as that execution
    # left it, as a fresh process's single import would have it.  An ImportError, or the
    # environment it reads set otherwise, is the import's own outcome and stands.
    tests = """
import sys
import pytest

def test_first():
    import plugin_mod
    assert plugin_mod.Thing

def test_again():
    import plugin_mod
    assert plugin_mod.Thing

def test_user():
    import user

def test_user_again():
    import user

def test_an_import_made_to_fail_still_fails(monkeypatch):
    monkeypatch.setitem(sys.modules, "registry", None)
    with pytest.raises(ImportError):
        import plugin_mod

def test_with_the_environment(monkeypatch):
    monkeypatch.setenv("NEEDS", "1")
    import needs_env

def test_without_it():
    with pytest.raises(RuntimeError):
        import needs_env
"""
    result = _run_lib_tests(pytester, REGISTRY_LIB, tests)
    result.assert_outcomes(passed=7)
    result.stdout.fnmatch_lines(
        ["brought back 2 module(s) as an earlier test's import left them:*"
         "plugin_mod (ValueError: plugin was already registered)*"
         "user (ValueError: user was already registered)*"]
    )  # fmt: skip


def test_the_modules_a_reinstated_module_imported_come_back_in_import_order(
    pytester: pytest.Pytester,
) -> None:
    # ``libpkg.top`` imports ``libpkg.leaf`` at its import; both are library modules
    # (outside the rootdir) imported only by tests. When a later test imports ``top``
    # again, neither is executed again (an import inside another's first import leaves
    # the outer one pure): ``leaf`` comes back too, the same object, bound on its
    # package, before ``top`` in sys.modules (as a first import orders them); and a test
    # that imports neither finds neither, as in a fresh process.
    result = _run_lib_tests(
        pytester,
        {
            "libpkg/__init__.py": "",
            "libpkg/leaf.py": "import sys\nsys.leaf_runs = getattr(sys, 'leaf_runs', 0) + 1\n"
            "VALUE = 42\n",
            "libpkg/top.py": "import sys\nfrom libpkg import leaf\nDOUBLE = leaf.VALUE * 2\n"
            "sys.top_runs = getattr(sys, 'top_runs', 0) + 1\n",
        },
        """
import sys

def _check():
    import libpkg.top
    leaf = sys.modules["libpkg.leaf"]
    assert libpkg.top.leaf is leaf and libpkg.leaf is leaf
    assert libpkg.top.DOUBLE == 84 and sys.leaf_runs == 1 and sys.top_runs == 1
    names = list(sys.modules)
    assert names.index("libpkg") < names.index("libpkg.leaf") < names.index("libpkg.top")

def test_first():
    _check()

def test_neither():
    assert "libpkg.top" not in sys.modules and "libpkg.leaf" not in sys.modules

def test_second():
    _check()
""",
    )
    result.assert_outcomes(passed=3)


def test_a_library_whose_name_starts_like_a_runner_module_is_unloaded_too(
    pytester: pytest.Pytester,
) -> None:
    # The test runner's own modules stay loaded (``py``, ``pytest``...); a library named
    # ``pyhelper`` is a library like any other: a fresh process does not have it.
    result = _run_lib_tests(
        pytester,
        {"pyhelper.py": "VALUE = 1\n"},
        """
import sys

def test_first():
    import pyhelper
    assert pyhelper.VALUE == 1

def test_fresh():
    assert "pyhelper" not in sys.modules

def test_again():
    import pyhelper
    assert pyhelper.VALUE == 1
""",
    )
    result.assert_outcomes(passed=3)


def test_a_package_imported_after_its_submodule_comes_back_with_it(
    pytester: pytest.Pytester,
) -> None:
    # The import system moves a package to the end of sys.modules once its __init__ has
    # run, after the submodule that __init__ imported (multiprocessing and its .process):
    # a module that imported both lists the submodule first. Bringing the submodule back
    # brings its package back first, whose own import brings the submodule with it.
    result = _run_lib_tests(
        pytester,
        {
            "fam/__init__.py": "from fam import sub\n",
            "fam/sub.py": "import sys\nsys.sub_runs = getattr(sys, 'sub_runs', 0) + 1\n",
            "user.py": "import fam\nVALUE = fam.sub.__name__\n",
        },
        """
import sys

def test_first():
    import user
    assert user.VALUE == "fam.sub" and sys.sub_runs == 1

def test_fresh():
    assert "fam" not in sys.modules and "fam.sub" not in sys.modules

def test_again():
    import user
    assert user.fam.sub is sys.modules["fam.sub"] and sys.sub_runs == 1
""",
    )
    result.assert_outcomes(passed=3)


def test_a_module_a_finder_imports_while_finding_comes_back_as_itself(
    pytester: pytest.Pytester,
) -> None:
    # A library meta path finder that imports the module an alias stands for while it
    # makes the alias's spec (as six.moves does): after the unload at the end of the first
    # test, the second test's import of the alias brings the same module back, without
    # executing it again.
    lib = pytester.mkdir("lib")
    (lib / "realmod.py").write_text(
        "import sys\nsys.real_runs = getattr(sys, 'real_runs', 0) + 1\nVALUE = 7\n"
    )
    (lib / "aliasfinder.py").write_text(
        """
import importlib, importlib.abc, importlib.util, sys

class _Loader(importlib.abc.Loader):
    def __init__(self, target):
        self.target = target

    def create_module(self, spec):
        return self.target

    def exec_module(self, module):
        pass

class AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "alias_of_real":
            return None
        real = importlib.import_module("realmod")
        return importlib.util.spec_from_loader(name, _Loader(real))

sys.meta_path.append(AliasFinder())
"""
    )
    proj = pytester.mkdir("proj")
    (proj / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(lib)!r})\nimport aliasfinder\n"
    )
    (proj / "test_alias.py").write_text(
        """
import sys

def _check():
    import alias_of_real
    assert alias_of_real.VALUE == 7 and sys.real_runs == 1
    assert sys.modules["realmod"] is alias_of_real
    seen = getattr(sys, "real_seen", None)
    assert seen is None or seen is alias_of_real
    sys.real_seen = alias_of_real

def test_first():
    _check()

def test_neither():
    assert "realmod" not in sys.modules and "alias_of_real" not in sys.modules

def test_second():
    _check()
"""
    )
    result = _run(pytester, "--rootdir", str(proj), str(proj / "test_alias.py"))
    result.assert_outcomes(passed=3)


def test_a_project_module_imported_by_tests_comes_back_as_its_import_left_it(
    pytester: pytest.Pytester,
) -> None:
    # ``pkg.lazy`` is imported inside tests only (a deferred import): it comes back as the
    # same module with its containers and globals as its import left them, without being
    # executed again. ``pkg.plugin`` registers itself in ``pkg.registry`` (baseline state,
    # which the reset empties) when imported: it is executed again, so each test that
    # imports it finds the registration a fresh process would.
    pytester.makepyfile(
        **{
            "pkg/__init__.py": "",
            "pkg/registry.py": "REGISTRY = {}\n",
            "pkg/plugin.py": "from pkg.registry import REGISTRY\nREGISTRY['plugin'] = 1\n",
            "pkg/lazy.py": (
                "import sys\n"
                "sys.lazy_runs = getattr(sys, 'lazy_runs', 0) + 1\n"
                "CACHE = {}\nITEMS = [1]\nMODE = 'fresh'\n"
                "def remember(k):\n    CACHE[k] = len(CACHE)\n    return CACHE[k]\n"
            ),
        }
    )
    pytester.makepyfile(
        test_lazy="""
import sys
from pkg.registry import REGISTRY

def _use(name):
    from pkg import lazy
    import pkg.plugin
    assert REGISTRY == {"plugin": 1}
    assert lazy.CACHE == {} and lazy.ITEMS == [1] and lazy.MODE == "fresh"
    assert lazy.remember("a") == 0
    lazy.ITEMS.append(2)
    lazy.MODE = "used"
    REGISTRY[name] = name  # differs per test: an entry recomputed the same is a memo
    assert sys.lazy_runs == 1

def test_first():
    _use("first")

def test_second():
    _use("second")

def test_third():
    _use("third")
"""
    )
    _run(pytester, "-v").assert_outcomes(passed=3)
    # Without isolation the second test sees the first one's leftovers.
    plain = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:isolator")
    plain.assert_outcomes(passed=1, failed=2)


def test_an_import_that_only_appends_to_a_list_runs_again_beside_a_container_subclass(
    pytester: pytest.Pytester,
) -> None:
    # ``pkg.plugin``'s import only appends to a list of ``pkg.registry`` (seen by the
    # lengths the probe takes around a first import), and the registry also holds a list
    # subclass with a ``__len__`` of its own (measured as a list counts): the append is
    # still seen, the reset empties the list, and the second test's import runs the
    # module again, as in a fresh process.
    pytester.makepyfile(
        **{
            "pkg/__init__.py": "",
            "pkg/registry.py": (
                "class Bag(list):\n    def __len__(self):\n        return 0\n\n"
                "BAG = Bag([1])\nITEMS = []\n"
            ),
            "pkg/plugin.py": "from pkg import registry\nregistry.ITEMS.append('plugin')\n",
        }
    )
    pytester.makepyfile(
        test_plugin="""
from pkg import registry

def _use():
    import pkg.plugin
    assert registry.ITEMS == ["plugin"]

def test_first():
    _use()

def test_second():
    _use()
"""
    )
    _run(pytester).assert_outcomes(passed=2)


def test_a_project_module_changed_while_unloaded_comes_back_as_its_import_left_it(
    pytester: pytest.Pytester,
) -> None:
    # The middle test changes the containers of ``pkg.lazy`` while the module is
    # unloaded (no test imported it: it finds the module object among all objects). The
    # module's state was put back when it was unloaded; its reinstatement must still see
    # the change and put it back.
    pytester.makepyfile(
        **{
            "pkg/__init__.py": "",
            "pkg/lazy.py": "CACHE = {}\nITEMS = [1]\nSEEN = {'a'}\n",
        }
    )
    pytester.makepyfile(
        test_held="""
import gc, types

def test_import():
    from pkg import lazy
    assert lazy.CACHE == {} and lazy.ITEMS == [1] and lazy.SEEN == {'a'}

def test_change_unloaded():
    found = [
        m for m in gc.get_objects()
        if isinstance(m, types.ModuleType) and m.__name__ == "pkg.lazy"
    ]
    assert len(found) == 1
    found[0].CACHE["k"] = 1
    found[0].ITEMS.append(2)
    found[0].SEEN.add('b')

def test_import_again():
    from pkg import lazy
    assert lazy.CACHE == {} and lazy.ITEMS == [1] and lazy.SEEN == {'a'}
"""
    )
    _run(pytester, "-v").assert_outcomes(passed=3)
    # In one plain process the last test sees the change.
    plain = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:isolator")
    plain.assert_outcomes(passed=2, failed=1)


def test_a_module_comes_back_only_from_where_an_import_would_find_it(
    pytester: pytest.Pytester,
) -> None:
    # The first test puts a directory on sys.path and imports a module from it; after the
    # reset the directory is gone from sys.path, so a new import must not find the module.
    plugins = pytester.mkdir("plugins")
    (plugins / "skplug.py").write_text("VERSION = '1.2'\n")
    pytester.makepyfile(
        test_path=f"""
import importlib
import sys
import pytest

def test_adds_and_imports():
    sys.path.insert(0, {str(plugins)!r})
    assert importlib.import_module("skplug").VERSION == "1.2"

def test_cannot_import_it():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("skplug")

def test_adds_it_again():
    sys.path.insert(0, {str(plugins)!r})
    assert importlib.import_module("skplug").VERSION == "1.2"
"""
    )
    _run(pytester, "-v").assert_outcomes(passed=3)


def test_a_module_imported_under_an_alias_comes_back_without_running_again(
    pytester: pytest.Pytester,
) -> None:
    # An importer that hands out a module under a second name (as six.moves does) makes
    # the import system bind the alias's spec, which has no file, to the module. After the
    # reset the module must still come back from its file, not be executed again.
    lib = pytester.mkdir("lib")
    (lib / "target.py").write_text(
        "import sys\nsys.target_runs = getattr(sys, 'target_runs', 0) + 1\n"
    )
    (lib / "aliaser.py").write_text(
        """
import importlib, importlib.util

class Aliaser:
    def find_spec(self, name, path=None, target=None):
        if name == "aliased_target":
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        return importlib.import_module("target")

    def exec_module(self, module):
        pass
"""
    )
    proj = pytester.mkdir("proj")
    (proj / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(lib)!r})\n"
        "import aliaser\nsys.meta_path.append(aliaser.Aliaser())\n"
    )
    (proj / "test_alias.py").write_text(
        """
import sys

def test_first():
    import aliased_target
    assert aliased_target.__spec__.origin is None
    assert sys.target_runs == 1

def test_second():
    import aliased_target
    import target
    assert target is aliased_target
    assert sys.target_runs == 1
"""
    )
    result = _run(pytester, "--rootdir", str(proj), str(proj / "test_alias.py"))
    result.assert_outcomes(passed=2)


def test_a_module_found_again_is_looked_up_again_when_where_imports_look_changes(
    pytester: pytest.Pytester,
) -> None:
    # A module unloaded after each test comes back without asking every finder again, as
    # long as nothing that decides where an import finds it has changed: a directory put
    # first on sys.path, or a new file announced with importlib.invalidate_caches(), sends
    # the import to the finders (a module seen shadowed is executed again, as in a fresh
    # process).
    lib = pytester.mkdir("lib")
    (lib / "shadowed.py").write_text(
        "import sys\nNAME = 'lib'\nsys.shadowed_runs = getattr(sys, 'shadowed_runs', 0) + 1\n"
    )
    shadow = pytester.mkdir("shadow")
    (shadow / "shadowed.py").write_text("NAME = 'shadow'\n")
    early = pytester.mkdir("early")
    pytester.makeconftest(f"import sys\nsys.path[:0] = [{str(early)!r}, {str(lib)!r}]\n")
    pytester.makepyfile(
        test_where=f"""
import importlib
import sys

def test_first():
    import shadowed
    assert shadowed.NAME == "lib" and sys.shadowed_runs == 1

def test_comes_back():
    import shadowed
    assert shadowed.NAME == "lib" and sys.shadowed_runs == 1

def test_a_new_file_where_imports_look_first():
    with open({str(early / "shadowed.py")!r}, "w") as f:
        f.write("NAME = 'new'\\n")
    importlib.invalidate_caches()
    import shadowed
    assert shadowed.NAME == "new"

def test_the_file_is_gone_and_the_module_comes_back():
    import shadowed
    assert shadowed.NAME == "lib"

def test_comes_back_as_it_was():
    import shadowed
    assert shadowed.NAME == "lib"

def test_a_directory_first_on_the_path():
    sys.path.insert(0, {str(shadow)!r})
    import shadowed
    assert shadowed.NAME == "shadow"

def test_comes_back_again():
    import shadowed
    assert shadowed.NAME == "lib"
"""
    )
    _run(pytester, "-v").assert_outcomes(passed=7)


def test_a_module_on_a_relative_path_entry_is_found_from_the_current_directory(
    pytester: pytest.Pytester,
) -> None:
    # A relative sys.path entry finds modules from the current directory: after a test
    # that changed directory, an unloaded module comes back only when a new import would
    # find the same file from where the test is now.
    for name in ("a", "b"):
        found = pytester.mkdir(name) / "pkgdir"
        found.mkdir()
        (found / "rel.py").write_text(f"NAME = {name!r}\n")
    pytester.makeconftest("import sys\nsys.path.insert(0, 'pkgdir')\n")
    pytester.makepyfile(
        test_rel="""
import sys
import pytest

@pytest.mark.parametrize("where", ["a", "a", "b", "a", "b", "b"])
def test_finds_it_from_here(where, monkeypatch, pytestconfig):
    monkeypatch.chdir(pytestconfig.rootpath / where)
    sys.path_importer_cache.pop("pkgdir", None)
    import rel
    assert rel.NAME == where
"""
    )
    _run(pytester, "-v").assert_outcomes(passed=6)


def test_a_module_a_test_unloads_and_drops_is_collected(pytester: pytest.Pytester) -> None:
    # isolator keeps each module's first import to bring it back after an unload; that
    # must not keep alive a module the test itself took out of sys.modules, also when its
    # namespace leads back to it (jinja2's template modules: functions -> globals -> the
    # environment -> the loader -> the module).
    lib = pytester.mkdir("lib")
    (lib / "plain_mod.py").write_text("X = [1]\n")
    (lib / "selfref_mod.py").write_text("import sys\nME = [sys.modules[__name__]]\n")
    pytester.makepyfile(
        test_drop=f"""
        import gc
        import sys
        import weakref

        sys.path.insert(0, {str(lib)!r})

        def _import_and_drop(name):
            module = __import__(name)
            ref = weakref.ref(module)
            del sys.modules[name], module
            gc.collect()
            return ref

        def test_plain_module():
            assert _import_and_drop("plain_mod")() is None

        def test_module_reaching_itself():
            assert _import_and_drop("selfref_mod")() is None
        """
    )
    _run(pytester, "-v").assert_outcomes(passed=2)


def test_a_module_whose_file_was_rewritten_is_executed_again(pytester: pytest.Pytester) -> None:
    # Tests that generate a module's source and import it: after an unload, a module comes
    # back as its first import left it only while its file is unchanged.
    gen = pytester.mkdir("gen")
    pytester.makepyfile(
        test_gen=f"""
        import importlib
        import sys

        def _load(source):
            with open({str(gen / "genmod.py")!r}, "w") as f:
                f.write(source)
            sys.path.insert(0, {str(gen)!r})
            importlib.invalidate_caches()
            import genmod
            return genmod.VALUE

        def test_first():
            assert _load("VALUE = 'first'\\n") == "first"

        def test_second():
            assert _load("VALUE = 'second, longer'\\n") == "second, longer"
        """
    )
    _run(pytester, "-v").assert_outcomes(passed=2)


@pytest.mark.parametrize("writer", ["python", "subprocess", "rename"])
def test_an_unloaded_module_rewritten_without_invalidating_caches_is_executed_again(
    pytester: pytest.Pytester, writer: str
) -> None:
    # The first tests import the module (it is unloaded after each, and comes back as its
    # first import left it); the last rewrites its file, through Python, through another
    # process or by renaming a new file over it,
    # without importlib.invalidate_caches(), then imports it: alone in a fresh interpreter
    # that import reads the new file, so a reinstated first import would be wrong.
    lib = pytester.mkdir("lib")
    target = lib / "edited.py"
    target.write_text("VALUE = 'first'\n")
    pytester.makeconftest(f"import sys\nsys.path.insert(0, {str(lib)!r})\n")
    pytester.makepyfile(
        test_edit=f"""
        import os
        import subprocess
        import sys

        TARGET = {str(target)!r}
        NEW = "VALUE = 'second, longer'\\n"

        def test_first():
            import edited
            assert edited.VALUE == "first"

        def test_again():
            import edited
            assert edited.VALUE == "first"

        def test_second():
            if {writer!r} == "python":
                with open(TARGET, "w") as f:
                    f.write(NEW)
            elif {writer!r} == "subprocess":
                code = f"open({{TARGET!r}}, 'w').write({{NEW!r}})"
                subprocess.run([sys.executable, "-c", code], check=True)
            else:
                with open(TARGET + ".new", "w") as f:
                    f.write(NEW)
                os.replace(TARGET + ".new", TARGET)
            import edited
            assert edited.VALUE == "second, longer"
        """
    )
    _run(pytester, "-v").assert_outcomes(passed=3)


@pytest.mark.parametrize(
    "module, first, second",
    [
        (
            "import os\nMODE = os.environ.get('APP_MODE', 'prod')\n",
            "monkeypatch.setenv('APP_MODE', 'dev')",
            "monkeypatch.setenv('APP_MODE', 'test')",
        ),
        (
            "import os\nMODE = dict(os.environ).get('APP_MODE', 'prod')\n",
            "monkeypatch.setenv('APP_MODE', 'dev')",
            "monkeypatch.setenv('APP_MODE', 'test')",
        ),
        (
            "import fakereg\nMODE = fakereg.NAME\n",
            "monkeypatch.setitem(sys.modules, 'fakereg', types.SimpleNamespace(NAME='dev'))",
            "monkeypatch.setitem(sys.modules, 'fakereg', types.SimpleNamespace(NAME='test'))",
        ),
        (
            "from libsrc import mode\nMODE = mode()\n",
            "monkeypatch.setattr(libsrc, 'mode', lambda: 'dev')",
            "monkeypatch.setattr(libsrc, 'mode', lambda: 'test')",
        ),
        (
            "from libsrc import mode\nMODE = mode()\n",
            "monkeypatch.setattr(libsrc, 'mode', libsrc.dev)",
            "monkeypatch.setattr(libsrc, 'mode', libsrc.tst)",
        ),
        (
            "import fakereg\nMODE = fakereg.NAME\n",
            "monkeypatch.setitem(sys.modules, 'fakereg', libsrc.DEV)",
            "monkeypatch.setitem(sys.modules, 'fakereg', libsrc.TEST)",
        ),
        (
            "import sys\nMODE = 'dev' if sys.platform == 'dev-os' else 'test'\n",
            "monkeypatch.setattr(sys, 'platform', 'dev-os')",
            "pass",
        ),
    ],
    ids=[
        "getenv",
        "whole-environ",
        "sys.modules",
        "from-import",
        "from-import-same-object",
        "sys.modules-same-object",
        "platform",
    ],
)
def test_a_module_is_executed_again_when_what_its_first_import_read_differs(
    pytester: pytest.Pytester, module: str, first: str, second: str
) -> None:
    # Settings read at import time: a later test that sets them differently and imports
    # the module gets, in a fresh interpreter, a module executed with its own settings.
    # The test in the middle imports it with the first test's settings (the same objects
    # where it can): it comes back as itself, and what made that check pass must not
    # hold for the last test.
    lib = pytester.mkdir("lib")
    (lib / "readsit.py").write_text(module)
    (lib / "libsrc.py").write_text(
        "import types\n"
        "def mode():\n    return 'prod'\n"
        "def dev():\n    return 'dev'\n"
        "def tst():\n    return 'test'\n"
        "DEV = types.SimpleNamespace(NAME='dev')\n"
        "TEST = types.SimpleNamespace(NAME='test')\n"
    )
    proj = pytester.mkdir("proj")
    (proj / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(lib)!r})\nimport libsrc\n"
    )
    (proj / "test_settings.py").write_text(
        "import sys, types\n"
        "import libsrc\n"
        "def test_first(monkeypatch):\n"
        f"    {first}\n"
        "    import readsit\n"
        "    assert readsit.MODE == 'dev'\n"
        "def test_again(monkeypatch):\n"
        f"    {first}\n"
        "    import readsit\n"
        "    assert readsit.MODE == 'dev'\n"
        "def test_second(monkeypatch):\n"
        f"    {second}\n"
        "    import readsit\n"
        "    assert readsit.MODE == 'test'\n"
    )
    result = _run(pytester, "-v", "--rootdir", str(proj), str(proj / "test_settings.py"))
    result.assert_outcomes(passed=3)


def test_a_library_module_under_two_names_is_reset_once_and_stays_reset(
    pytester: pytest.Pytester,
) -> None:
    # A library module bound under a second name in sys.modules (as collections.abc is
    # _collections_abc): each test that rebinds one of its names must find it as the
    # baseline had it, however many tests wrote it before.
    _, proj = _lib_project(
        pytester,
        {"twice.py": "VALUE = 'original'\n"},
        "import twice\nsys.modules['twice_alias'] = twice\n",
    )
    tests = "\n".join(
        f"def test_{i}():\n"
        "    import twice\n"
        "    assert twice.VALUE == 'original'\n"
        f"    twice.VALUE = 'written by {i}'\n"
        for i in range(4)
    )
    (proj / "test_twice.py").write_text(tests)
    result = _run(pytester, "-v", "--rootdir", str(proj), str(proj / "test_twice.py"))
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*twice:VALUE (4)*"])


@pytest.mark.skipif(sys.version_info >= (3, 13), reason="datetime keeps _strptime only up to 3.12")
def test_a_module_that_c_code_keeps_stays_imported_and_its_writes_are_undone(
    pytester: pytest.Pytester,
) -> None:
    # datetime.strptime imports _strptime once and keeps it in a C static variable (3.10
    # to 3.12): unloaded after the first test, it would never come back to sys.modules,
    # where every later test alone in a fresh process finds it after its first call.
    # The first test imports it with a statement (unloaded as usual); the C import of the
    # same object comes after.
    pytester.makepyfile(
        test_strptime="""
import datetime, sys
import pytest

def test_imports_it():
    import _strptime
    assert _strptime.__name__ == "_strptime"

def test_not_there_yet():
    assert "_strptime" not in sys.modules

@pytest.mark.parametrize("n", range(3))
def test_parses_and_finds_the_module(n):
    assert datetime.datetime.strptime("2020-01-0%d" % (n + 1), "%Y-%m-%d").day == n + 1
    assert "_strptime" in sys.modules

def test_marks_it():
    import _strptime
    _strptime.MARK = 1
    _strptime._TimeRE_cache = None

def test_marks_are_gone():
    import _strptime
    assert not hasattr(_strptime, "MARK")
    assert datetime.datetime.strptime("2020", "%Y").year == 2020
"""
    )
    result = _run(pytester, "-v")
    result.assert_outcomes(passed=7)
    result.stdout.fnmatch_lines(["*_strptime:MARK*"])


def test_imports_that_load_another_module_lazily_or_bind_a_submodule_come_back(
    pytester: pytest.Pytester,
) -> None:
    # babel.dates, imported by unpickling locale data in a test: its import loads
    # pytz's zone table on first use (a library global bound from None) and binds
    # babel.localtime on the babel package (a project namespace).  Neither is state the
    # module's reinstatement would skip, so it comes back as itself after each test
    # (executed once: its classes stay the same objects, and memo entries holding their
    # instances compare the same).  An import that sets another module's global is still
    # executed again.
    lib = pytester.mkdir("lib")
    (lib / "zones.py").write_text(
        "_TABLE = None\n"
        "def lookup(name):\n"
        "    global _TABLE\n"
        "    if _TABLE is None:\n"
        "        _TABLE = {n.lower(): n for n in ('UTC', 'Europe/Paris')}\n"
        "    return _TABLE[name.lower()]\n"
        "MODE = 'plain'\n"
    )
    proj = pytester.mkdir("proj")
    (proj / "conftest.py").write_text(f"import sys\nsys.path.insert(0, {str(lib)!r})\n")
    app = proj / "app"
    app.mkdir()
    (app / "__init__.py").write_text("")
    (app / "localtime.py").write_text("import zones\nUTC = zones.lookup('utc')\n")
    (app / "dates.py").write_text(
        "import sys\n"
        "from app import localtime\n"
        "sys.dates_runs = getattr(sys, 'dates_runs', 0) + 1\n"
        "class Pattern:\n"
        "    pass\n"
    )
    (app / "setter.py").write_text(
        "import sys, zones\n"
        "zones.MODE = 'set'\n"
        "sys.setter_runs = getattr(sys, 'setter_runs', 0) + 1\n"
    )
    (proj / "test_app.py").write_text(
        "import sys, zones\n"
        "import app\n"
        "def _check(n):\n"
        "    from app import dates, setter\n"
        "    assert dates.Pattern.__module__ == 'app.dates' and sys.dates_runs == 1\n"
        "    assert zones.MODE == 'set' and sys.setter_runs == n\n"
        "def test_first():\n"
        "    _check(1)\n"
        "def test_zones_fresh():\n"
        "    assert zones._TABLE is None and zones.MODE == 'plain'\n"
        "    assert 'app.dates' not in sys.modules and not hasattr(app, 'localtime')\n"
        "def test_second():\n"
        "    _check(2)\n"
        "def test_third():\n"
        "    _check(3)\n"
    )
    result = _run(pytester, "--rootdir", str(proj), str(proj / "test_app.py"))
    result.assert_outcomes(passed=4)


def test_an_import_hook_the_suite_installed_stays_and_sees_every_import(
    pytester: pytest.Pytester,
) -> None:
    # dill installs its own builtins.__import__ when it is imported (at collection): a
    # test's first import of a module put the interpreter's own back, so the next test
    # ran without the hook; and the imports inside that first import bypassed it.
    _, proj = _lib_project(
        pytester,
        {
            "hooked_new.py": "import colorsys\nVALUE = 1\n",
            "hooked_other.py": "import graphlib\n",
        },
    )
    (proj / "test_hook.py").write_text(
        """
import builtins

SEEN = []
_orig_import = builtins.__import__

def _hook(name, *args, **kwds):
    SEEN.append(name)
    return _orig_import(name, *args, **kwds)

builtins.__import__ = _hook

def test_first_import_of_a_module():
    import hooked_new
    assert hooked_new.VALUE == 1
    assert "hooked_new" in SEEN and "colorsys" in SEEN, SEEN
    from isolator import _modules  # an import statement's, not C code's (no reference count)
    assert "hooked_new" not in _modules.FINDER.from_c

def test_hook_still_installed():
    assert builtins.__import__ is _hook
    import sys
    assert "hooked_new" not in sys.modules  # unloaded, though the hook imported it

def test_a_second_first_import():
    import hooked_other
    assert "graphlib" in SEEN, SEEN
    assert builtins.__import__ is _hook
"""
    )
    result = _run(pytester, str(proj))
    result.assert_outcomes(passed=3)


def test_a_hook_installed_by_a_module_a_test_imports_over_isolators_own_does_not_loop(
    pytester: pytest.Pytester,
) -> None:
    # A module imported inside a test installs a hook over whatever __import__ is in
    # place then: isolator's own, while that first import runs.  Later first imports put
    # isolator's in place over that hook, which calls the one it captured: no loop.
    _, proj = _lib_project(
        pytester,
        {
            "hooking.py": (
                "import builtins\nCALLS = []\n_orig = builtins.__import__\n"
                "def hook(name, *a, **k):\n    CALLS.append(name)\n"
                "    return _orig(name, *a, **k)\nbuiltins.__import__ = hook\n"
            ),
            "later_a.py": "import colorsys\n",
            "later_b.py": "import graphlib\n",
        },
    )
    (proj / "test_loop.py").write_text(
        """
import builtins

def test_installs_a_hook_and_imports_more():
    import hooking
    assert builtins.__import__ is hooking.hook
    import later_a
    assert "later_a" in hooking.CALLS and "colorsys" in hooking.CALLS

def test_after_it():
    assert builtins.__import__.__name__ == "__import__"  # the test's hook was put back
    import later_b

def test_installs_it_again():
    import hooking
    import later_b
    assert "later_b" in hooking.CALLS
"""
    )
    result = _run(pytester, str(proj))
    result.assert_outcomes(passed=3)
    plain = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:isolator", proj)
    plain.assert_outcomes(passed=2, failed=1)  # plain pytest keeps the first test's hook


def test_a_failing_import_shows_no_frames_of_isolators_import_hooks(
    pytester: pytest.Pytester,
) -> None:
    # The failure is the library's: the traceback names the test, the modules and the
    # line that raised, as without isolator, not isolator's import hook and loaders.
    result = _run_lib_tests(
        pytester,
        {
            "outer_lib.py": "import json\nimport broken_lib\n",
            "broken_lib.py": "raise RuntimeError('broken library')\n",
        },
        "def test_imports():\n    import outer_lib\n",
    )
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "RuntimeError: broken library" in out
    assert "_noting_import" not in out
    assert "isolator importlib._bootstrap loader" not in out
    # Nor the import system's frames, which the interpreter cuts out of plain pytest's.
    assert "<frozen importlib" not in out


def test_a_module_that_rebases_its_own_class_while_imported_still_comes_back(
    pytester: pytest.Pytester,
) -> None:
    # A class given new bases by its own module's body (typing does so for a generic
    # NamedTuple) is that module's set-up, not a write to undo: counted as one, it made
    # the import impure, executed again by every test that imports it.  Another module's
    # class rebased by an import is still put back (see test_isolation).
    result = _run_lib_tests(
        pytester,
        {
            "rebased.py": (
                "import sys\n"
                "class Base:\n    pass\n"
                "class Mixin:\n    pass\n"
                "class Own(Base):\n    pass\n"
                "Own.__bases__ = (Base, Mixin)\n"
                "sys.rebased_runs = getattr(sys, 'rebased_runs', 0) + 1\n"
            )
        },
        "import sys\n"
        "def _check():\n"
        "    import rebased\n"
        "    assert rebased.Own.__bases__ == (rebased.Base, rebased.Mixin)\n"
        "    assert sys.rebased_runs == 1\n"
        "def test_first():\n"
        "    _check()\n"
        "def test_gone_between():\n"
        "    assert 'rebased' not in sys.modules\n"
        "def test_second():\n"
        "    _check()\n",
    )
    result.assert_outcomes(passed=3)
