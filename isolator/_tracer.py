"""Read tracing: which tracked state sites each test reads (and may write).

Three sources, merged per test by :class:`ReadTracer`:

* **Executed project code** (files under the rootdir, not virtualenvs, not isolator):
  each code object that runs maps to the static read set of the static pass
  (``ModuleState.access_for``; without one, the project globals its names refer to) plus
  the process-wide state its names refer to (the ``random``/``decimal``/``warnings``
  modules, ``sys.modules`` entries, the cwd, library module attributes such as
  ``json:dumps``, loggers, memoized functions and closures).  A *backend* reports the code
  that ran, picked in one place (:func:`make_backend`): by default (Python >= 3.11)
  *probes* in the project's own bytecode -- each project function starts by adding its
  number to a set, so code outside the project runs at full speed (a profile or trace
  function on 3.11 takes every instruction of every frame off the specialising
  interpreter's fast path: about one plain run's time again on parso); module bodies
  run during a test come from the ``exec`` audit event, and a higher-scoped yield
  fixture's teardown is credited by the plugin.  On 3.10, and with the ``profile``
  choice: ``sys.monitoring`` PY_START events on >= 3.12, the C profiler behind cProfile
  (``_lsprof``) below.  Tracing is on only while a test's setup, call and teardown run,
  so collection and reporting are not the test's.
* **A few stdlib functions** whose arguments name the state (``Logger.isEnabledFor`` ->
  ``<logging>:name`` and its ancestors, ``os.path.exists(p)`` -> ``<file>:p``,
  ``importlib.import_module(n)`` -> ``<sys.modules>:n``): wrapped for the recording run.
* **Process-wide reads** that no code object shows: ``os.environ`` keys (the class of the
  ``os.environ`` object is swapped for a subclass that notes the keys looked up, so its
  identity stays the same), and an audit hook for files, directories, the cwd and imports
  (installed once, a no-op outside a recorded test).

Approximations: a code object that *could* touch a site counts as reading it (branches not
taken count too); with probes, a generator resumed in a later test than the one that
started it is seen only for fixture teardowns; library code is not traced, so state read
only inside a third-party library is seen only through the sources above; C extensions'
reads are invisible;
``sys.modules`` reads are narrowed to the module names among the code's string constants
when there are any; a method name such as ``resolve`` or ``getcwd`` counts as a cwd read.
Over-approximation costs confirmation runs, never a wrong verdict.
"""

from __future__ import annotations

import builtins
import dis
import functools
import gc
import importlib
import logging
import os
import sys
import threading
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from typing import Any, Final, NamedTuple, Protocol

_ISOLATOR_DIR: Final = os.path.join(os.path.dirname(os.path.abspath(__file__)), "")
_LIB_MARKERS: Final = (
    os.sep + "site-packages" + os.sep,
    os.sep + "dist-packages" + os.sep,
    os.sep + ".tox" + os.sep,
    os.sep + ".venv" + os.sep,
)
# Protect the tracer from code under test that monkeypatches os (as coverage.py does).
_getcwd = os.getcwd
_abspath = os.path.abspath
_join = os.path.join
_fspath = os.fspath
_isfile = os.path.isfile  # (not the recording run's wrappers, which note file reads)
_isdir = os.path.isdir

_MODNAME_CHARS: Final = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_."
)
_CWD_NAMES: Final = frozenset(
    {"getcwd", "getcwdb", "chdir", "cwd", "abspath", "realpath", "relpath", "absolute", "resolve"}
)
_DECIMAL_MODULES: Final = frozenset({"decimal", "_decimal", "_pydecimal"})
_WARNINGS_MODULES: Final = frozenset({"warnings", "_warnings"})
# Library modules whose attributes are not "monkeypatchable library functions" worth a
# site: process-wide ones get their own site kinds, typing helpers are never patched.
_NO_ATTR_MODULES: Final = frozenset(
    {
        "sys",
        "os",
        "builtins",
        "typing",
        "random",
        "decimal",
        "warnings",
        "logging",
        "pytest",
        "_pytest",
        "collections",
        "abc",
        "types",
        "functools",
        "itertools",
        "dataclasses",
        "enum",
        "re",
        "math",
        "operator",
        "__future__",
        "isolator",
    }
)


class CodeInfo(NamedTuple):
    """What one executed code object means for the test that ran it."""

    reads: frozenset[str]
    touched: frozenset[str]  # sites it may write (gross, for cleaner candidates)
    where: tuple[tuple[str, str], ...] = ()  # (touched site, "file:line")
    # (touched site, global name) located lazily: disassembling every code is too slow
    lazy: tuple[tuple[str, str], ...] = ()
    code: types.CodeType | None = None
    rel: str = ""


class StaticAccess(Protocol):
    """The part of ``isolator.analysis.ModuleState`` the tracer uses."""

    filename: str

    def access_for(self, firstlineno: int, qualname: str | None = None) -> Any: ...


def _is_modname(s: str) -> bool:
    if not s or s[0].isdigit() or s[0] == "." or s[-1] == ".":
        return False
    return set(s) <= _MODNAME_CHARS


def logger_sites(name: str) -> frozenset[str]:
    """``<logging>:`` sites whose state decides what a logger named ``name`` does."""
    out = {"<logging>:root", "<logging>:<disable>"}
    if name and name != "root":
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            out.add("<logging>:" + ".".join(parts[:i]))
    return frozenset(out)


def file_site(path: object) -> tuple[str, bool] | None:
    """(``<file>:/abs/path``, relative?) for a path argument, or None for fds and oddities."""
    if isinstance(path, int) or path is None:
        return None
    try:
        p = _fspath(path)  # type: ignore[call-overload]
    except TypeError:
        return None
    if isinstance(p, bytes):
        p = os.fsdecode(p)
    if not isinstance(p, str) or not p:
        return None
    relative = not os.path.isabs(p)
    try:
        return "<file>:" + _abspath(p), relative
    except (OSError, ValueError):  # cwd deleted under us
        return None


class Recorder:
    """Per-test accumulators shared by the backend, the hooks and the audit hook.

    ``infos``: the distinct CodeInfo of code objects that ran; ``reads``/``touched``: sites
    noted directly (environment keys, files, loggers).
    """

    __slots__ = ("active", "infos", "reads", "touched", "locate", "executed")

    def __init__(self) -> None:
        self.active = False
        self.infos: set[CodeInfo] = set()
        self.reads: set[str] = set()
        self.touched: dict[str, str] = {}  # site -> "file:line" of the project code
        self.locate: Callable[[], str] = lambda: ""
        self.executed: list[types.CodeType] = []  # module bodies run (``exec`` event)

    def wrote(self, site: str) -> None:
        if site not in self.touched:
            self.touched[site] = self.locate()

    def clear(self) -> None:
        # In place: the backends hold the bound ``infos.add`` for speed.
        self.infos.clear()
        self.reads.clear()
        self.touched.clear()
        self.executed.clear()


# --------------------------------------------------------------------- classifying code


class _QualnameIndex:
    """``(co_firstlineno, co_name) -> co_qualname`` for one file (Python 3.10 has no
    ``co_qualname``); built by compiling the source, which gives the same code layout."""

    def __init__(self) -> None:
        self.by_file: dict[str, dict[tuple[int, str], str]] = {}

    def qualname(self, code: types.CodeType) -> str:
        index = self.by_file.get(code.co_filename)
        if index is None:
            index = self.by_file[code.co_filename] = self._build(code.co_filename)
        return index.get((code.co_firstlineno, code.co_name), code.co_name)

    @staticmethod
    def _build(filename: str) -> dict[tuple[int, str], str]:
        out: dict[tuple[int, str], str] = {}
        try:
            with open(filename, "rb") as f:
                top = compile(f.read(), filename, "exec", dont_inherit=True)
        except (OSError, SyntaxError, ValueError):
            return out
        todo: list[tuple[types.CodeType, str, bool]] = [(top, "", False)]
        while todo:
            code, prefix, in_function = todo.pop()
            for const in code.co_consts:
                if not isinstance(const, types.CodeType):
                    continue
                qual = prefix + const.co_name
                out.setdefault((const.co_firstlineno, const.co_name), qual)
                # CO_NEWLOCALS (0x2) marks functions; class bodies lack it.
                is_function = bool(const.co_flags & 0x2)
                child_prefix = qual + (".<locals>." if is_function else ".")
                todo.append((const, child_prefix, is_function))
        return out


def is_project_path(filename: str, rootdir: str) -> bool:
    """Under the rootdir (given with a trailing separator), not a virtualenv, not isolator."""
    return (
        filename.startswith(rootdir)
        and not filename.startswith(_ISOLATOR_DIR)
        and not any(m in filename for m in _LIB_MARKERS)
    )


class CodeClassifier:
    """Maps executed code objects to ``CodeInfo`` (cached per code object)."""

    def __init__(
        self,
        rootdir: str,
        static: Mapping[str, StaticAccess] | None = None,
    ) -> None:
        self.rootdir = _join(_abspath(rootdir), "")
        self.static: dict[str, StaticAccess] = dict(static or {})
        self._project_files: dict[str, bool] = {}
        self._qualnames = _QualnameIndex()
        self._lib_module_cache: dict[types.ModuleType, bool] = {}
        self._canon: dict[int, str] = {}
        self._globals: dict[str, dict[str, Any]] = {}
        self._globals_len = -1
        self._canon_len = -1
        # "pkg.sub" -> what _submodule_dirs found for it (see _submodule_reads).
        self._submodules: dict[str, list[str] | None] = {}
        self.empty = CodeInfo(frozenset(), frozenset())

    def set_static(self, static: Mapping[str, StaticAccess]) -> None:
        self.static = dict(static)

    def is_project_file(self, filename: str) -> bool:
        known = self._project_files.get(filename)
        if known is None:
            known = self._project_files[filename] = is_project_path(filename, self.rootdir)
        return known

    def is_project_module(self, mod: types.ModuleType) -> bool:
        # Keyed by the module itself: id() raises an audit event on every call.
        known = self._lib_module_cache.get(mod)
        if known is None:
            f = getattr(mod, "__file__", None)
            known = isinstance(f, str) and self.is_project_file(_abspath(f))
            self._lib_module_cache[mod] = known
        return known

    def classify_code(self, code: types.CodeType) -> CodeInfo | None:
        """``classify`` with the globals of the module the code comes from."""
        if not self.is_project_file(code.co_filename):
            return None
        return self.classify(code, self.globals_for(code.co_filename))

    def globals_for(self, filename: str) -> dict[str, Any]:
        g = self._globals.get(filename)
        if g is None and len(sys.modules) != self._globals_len:
            self._globals_len = len(sys.modules)
            for mod in list(sys.modules.values()):
                f = getattr(mod, "__file__", None)
                if isinstance(f, str) and isinstance(mod, types.ModuleType):
                    self._globals.setdefault(_abspath(f), mod.__dict__)
            g = self._globals.get(filename)
        return g if g is not None else {}

    def classify(self, code: types.CodeType, f_globals: dict[str, Any]) -> CodeInfo | None:
        """The sites a project code object may read/write, or None for other code."""
        if not self.is_project_file(code.co_filename):
            return None
        reads: set[str] = set()
        touched: dict[str, str] = {}
        rel = self.relpath(code.co_filename)
        access = self._static_access(code)
        where = _Touched(touched, code, rel)
        if access is not None:
            reads.update(access.reads)
            for site, line in access.writes.items():
                touched[site] = f"{rel}:{line}"
        else:
            self._by_name(code, f_globals, reads, where)
        self._dynamic(code, f_globals, reads, where)
        if not reads and not touched:
            return self.empty
        return CodeInfo(
            frozenset(reads),
            frozenset(touched) | frozenset(where.lazy),
            tuple(touched.items()),
            tuple(where.lazy.items()),
            code,
            rel,
        )

    def relpath(self, filename: str) -> str:
        if filename.startswith(self.rootdir):
            return filename[len(self.rootdir) :]
        return filename

    def caller_location(self) -> str:
        """``file:line`` of the innermost project frame on the stack, or ""."""
        f: types.FrameType | None = sys._getframe(1)
        while f is not None:
            if self.is_project_file(f.f_code.co_filename):
                return f"{self.relpath(f.f_code.co_filename)}:{f.f_lineno}"
            f = f.f_back
        return ""

    def _static_access(self, code: types.CodeType) -> Any:
        state = self.static.get(code.co_filename)
        if state is None:
            return None
        qual = getattr(code, "co_qualname", None) or self._qualnames.qualname(code)
        try:
            return state.access_for(code.co_firstlineno, qual)
        except Exception:  # a static pass bug must not break the user's run
            return None

    def _by_name(
        self, code: types.CodeType, g: dict[str, Any], reads: set[str], touched: _Touched
    ) -> None:
        """Without a static access set: the project globals the code's names refer to, at
        the granularity of a name (coarse, and counted as possible writes too)."""
        modname = g.get("__name__")
        if not isinstance(modname, str):
            return
        names = code.co_names
        for name in names:
            obj = g.get(name, _MISSING)
            if obj is _MISSING:
                continue
            if isinstance(obj, types.ModuleType):
                if not self.is_project_module(obj):
                    continue
                d = obj.__dict__
                for attr in names:
                    if attr == name or attr.startswith("__") or attr not in d:
                        continue
                    val = d[attr]
                    if isinstance(val, types.ModuleType):
                        continue
                    if isinstance(val, logging.Logger):
                        _logger_use(val, names, attr, reads, touched)
                    for site in (f"{obj.__name__}:{attr}", self._canonical(val)):
                        if site:
                            reads.add(site)
                            touched.add(site, attr)
                continue
            for site in (f"{modname}:{name}", self._canonical(obj)):
                if site:
                    reads.add(site)
                    touched.add(site, name)

    def _defining_module(self, obj: object) -> str:
        mod = getattr(obj, "__module__", None)
        return mod if isinstance(mod, str) else ""

    def _canonical(self, obj: object) -> str:
        """The site of an object where it is defined (``from m import X`` copies), or ""."""
        if isinstance(obj, _IMMUTABLE):
            return ""
        key = id(obj)
        found = self._canon.get(key)
        if found is None and self._canon_len < 0:
            # Built once, after collection imported the project; modules imported later
            # name their own objects through their globals.
            self._rebuild_canon()
            found = self._canon.get(key)
        if found:
            return found
        mod = getattr(obj, "__module__", None)
        qual = getattr(obj, "__qualname__", None)
        if isinstance(obj, (type, types.FunctionType)) and isinstance(mod, str) and qual:
            m = sys.modules.get(mod)
            if m is not None and self.is_project_module(m) and "<locals>" not in qual:
                return f"{mod}:{qual}"
        return ""

    def _project_modules(self) -> Iterator[types.ModuleType]:
        for m in list(sys.modules.values()):
            if isinstance(m, types.ModuleType) and self.is_project_module(m):
                yield m

    def _rebuild_canon(self) -> None:
        """id -> site of every object bound in a project module, named after the module
        that defines it (as the resetter names it), not one that imports it."""
        best: dict[int, tuple[int, str, str]] = {}
        for m in self._project_modules():
            name = m.__name__
            f = getattr(m, "__file__", None)
            st = self.static.get(_abspath(f)) if isinstance(f, str) else None
            imported = {n for n, _ in getattr(st, "exports", ())}
            tests = _is_test_module(name)
            for k, v in list(m.__dict__.items()):
                if k.startswith("__") or k in imported:
                    continue
                if isinstance(v, (_IMMUTABLE, types.ModuleType)):
                    continue
                owner = getattr(v, "__module__", None)
                if isinstance(v, (type, types.FunctionType)):
                    home = sys.modules.get(owner) if isinstance(owner, str) else None
                    if home is None or not self.is_project_module(home):
                        continue  # a library's class or function: not project state
                else:
                    owner = type(v).__module__
                rank = 0 if owner == name else (2 if tests else 1)
                key = (rank, name, f"{name}:{k}")
                old = best.get(id(v))
                if old is None or key < old:
                    best[id(v)] = key
        self._canon = {i: site for i, (_r, _n, site) in best.items()}
        self._canon_len = len(sys.modules)

    def _submodule_reads(
        self, package: str, paths: Any, names: frozenset[str], reads: set[str]
    ) -> None:
        """The package's submodules that the code's attribute names reach, bound or not
        (``pkg.sub.mod.X`` after ``import pkg``): the code reads them through the package,
        so it depends on whichever earlier test imported them.  Found among the files in
        the package's directories (once per name)."""
        try:
            todo = [(package, [p for p in paths if isinstance(p, str)], 0)]
        except TypeError:
            return  # a __path__ that is no iterable
        while todo:
            name, dirs, depth = todo.pop()
            for attr in names:
                full = f"{name}.{attr}"
                if full in self._submodules:
                    found = self._submodules[full]
                else:
                    found = self._submodules[full] = _submodule_dirs(dirs, attr)
                if found is None:
                    continue
                reads.add("<sys.modules>:" + full)
                if found and depth < _SUBMODULE_DEPTH:
                    todo.append((full, found, depth + 1))

    def _dynamic(
        self, code: types.CodeType, g: dict[str, Any], reads: set[str], touched: _Touched
    ) -> None:
        """Process-wide state named by the code's global names (see the module docstring)."""
        names = code.co_names
        if not names:
            return
        nameset = frozenset(names)
        cwd = nameset & _CWD_NAMES
        if cwd:
            # ``p.resolve()``, ``os.getcwd()``, ``Path.cwd()``: the receiver is often a
            # local, so the method name alone counts.
            reads.add("<cwd>")
            if "chdir" in cwd:
                touched.add("<cwd>", "chdir")
        for name in names:
            obj = g.get(name, _MISSING)
            if obj is _MISSING:
                obj = getattr(builtins, name, _MISSING)
                if name != "__import__" or obj is _MISSING:
                    continue
            self._name_sites(name, obj, nameset, code, reads, touched)
        raw = code.co_code
        if _IMPORT_NAME in raw[::2]:  # opcodes are the even bytes
            ext = 0
            for i in range(0, len(raw), 2):
                op = raw[i]
                arg = raw[i + 1] | ext
                ext = arg << 8 if op == _EXTENDED_ARG else 0
                if op == _IMPORT_NAME[0]:
                    _add_module_chain(names[arg], reads)

    def _name_sites(
        self,
        name: str,
        obj: Any,
        names: frozenset[str],
        code: types.CodeType,
        reads: set[str],
        touched: _Touched,
    ) -> None:
        def both(site: str) -> None:
            reads.add(site)
            touched.add(site, name)

        if isinstance(obj, types.ModuleType):
            mod = obj.__name__
            if mod == "random":
                both("<random>")
            elif mod in _DECIMAL_MODULES:
                both("<decimal>")
            elif mod in _WARNINGS_MODULES:
                both("<warnings>")
            elif mod == "pytest":
                if names & {"warns", "deprecated_call"}:
                    reads.add("<warnings>")
            elif mod == "sys":
                if "modules" in names:
                    mods = [c for c in code.co_consts if isinstance(c, str) and _is_modname(c)]
                    if mods:
                        for m in mods:
                            both("<sys.modules>:" + m)
                    else:
                        both("<sys.modules>")
                if "path" in names:
                    both("<sys.path>")
            elif mod in ("os", "posix", "nt", "os.path", "posixpath", "ntpath", "pathlib"):
                hit = names & _CWD_NAMES
                if hit:
                    reads.add("<cwd>")
                    if "chdir" in hit:
                        touched.add("<cwd>", "chdir")
            elif self.is_project_module(obj):
                d = obj.__dict__
                for attr in names:
                    val = d.get(attr)
                    if isinstance(val, logging.Logger):
                        _logger_use(val, names, attr, reads, touched)
                    elif val is not None and _holds_state(val):
                        reads.add(self._canonical(val) or f"{obj.__name__}:{attr}")
                paths = d.get("__path__")
                if paths is not None:
                    self._submodule_reads(mod, paths, names, reads)
            elif mod.partition(".")[0] not in _NO_ATTR_MODULES:
                d = obj.__dict__
                for attr in names:
                    if attr != name and attr in d and not attr.startswith("__"):
                        both(f"{mod}:{attr}")
            return
        if isinstance(obj, logging.Logger):
            _logger_use(obj, names, name, reads, touched)
            return
        if _holds_state(obj) and self.is_project_file(_code_file(obj)):
            # Calling a memoized function or a closure reads its cache or its cells,
            # whatever the static pass names them: credit the caller with the function.
            reads.add(self._canonical(obj) or f"{self._defining_module(obj)}:{name}")
            return
        owner = getattr(obj, "__self__", None)
        if owner is not None and type(owner).__module__ == "random" and isinstance(owner, _Random):
            both("<random>")
            return
        objmod = getattr(obj, "__module__", None)
        if objmod in _DECIMAL_MODULES:
            both("<decimal>")
        elif objmod in _WARNINGS_MODULES:
            both("<warnings>")
        elif objmod in ("posix", "nt") and name in _CWD_NAMES:
            reads.add("<cwd>")
        elif obj is _Path or (isinstance(obj, type) and issubclass(obj, _PurePath)):
            if names & _CWD_NAMES:
                reads.add("<cwd>")
        elif name == "__import__":
            reads.add("<sys.modules>")


_MISSING: Final = object()
_IMMUTABLE: Final = (int, float, complex, str, bytes, bool, type(None), tuple, frozenset, range)
_IMPORT_NAME: Final = bytes([dis.opmap["IMPORT_NAME"]])
_EXTENDED_ARG: Final = dis.opmap["EXTENDED_ARG"]

import pathlib as _pathlib  # noqa: E402  (after the constants that shadow nothing)
import random as _random_mod  # noqa: E402

_Path: Final = _pathlib.Path
_PurePath: Final = _pathlib.PurePath
_Random: Final = _random_mod.Random


def _holds_state(obj: object) -> bool:
    """A function whose calls read state kept on it: a memo cache, closure cells, or
    mutable defaults."""
    if callable(getattr(obj, "cache_info", None)):
        return True
    if isinstance(obj, types.FunctionType):
        if obj.__closure__:
            return True
        defaults = (obj.__defaults__ or ()) + tuple((obj.__kwdefaults__ or {}).values())
        return any(not isinstance(d, _IMMUTABLE) for d in defaults)
    return False


def _code_file(obj: object) -> str:
    fn = getattr(obj, "__wrapped__", obj)
    code = getattr(fn, "__code__", None)
    return code.co_filename if isinstance(code, types.CodeType) else ""


def _is_test_module(name: str) -> bool:
    last = name.rpartition(".")[2]
    return last == "conftest" or last.startswith("test_") or last.endswith("_test")


class _Touched:
    """Sites a code object may write, located at the first line using the name involved."""

    def __init__(self, out: dict[str, str], code: types.CodeType, rel: str) -> None:
        self.out = out
        self.code = code
        self.rel = rel
        self.lazy: dict[str, str] = {}

    def add(self, site: str, name: str) -> None:
        if site not in self.out and site not in self.lazy:
            self.lazy[site] = name


_NAME_LINES: dict[types.CodeType, dict[str, int]] = {}


def name_line(code: types.CodeType, name: str) -> int:
    """The first line of ``code`` that uses ``name`` (cached per code object)."""
    lines = _NAME_LINES.get(code)
    if lines is None:
        lines = _NAME_LINES[code] = {}
        for line, ins in _instruction_lines(code):
            if isinstance(ins.argval, str) and ins.argval not in lines:
                lines[ins.argval] = line
    return lines.get(name, code.co_firstlineno)


def _instruction_lines(code: types.CodeType) -> Iterator[tuple[int, dis.Instruction]]:
    """(line, instruction) pairs on Python 3.10 to 3.13."""
    line = code.co_firstlineno
    for ins in dis.get_instructions(code):
        if sys.version_info >= (3, 11):
            pos = ins.positions
            if pos is not None and pos.lineno is not None:
                line = pos.lineno
        elif isinstance(ins.starts_line, int):
            line = ins.starts_line
        yield line, ins


_LOGGER_WRITES: Final = frozenset(
    {"setLevel", "addHandler", "removeHandler", "addFilter", "removeFilter", "handlers",
     "level", "disabled", "propagate", "filters"}
)  # fmt: skip


def _logger_use(
    lg: logging.Logger, names: Iterable[str], name: str, reads: set[str], touched: _Touched
) -> None:
    """A logger object named by the code: its level and handlers (and its ancestors')."""
    reads.update(logger_sites(lg.name))
    if _LOGGER_WRITES.intersection(names):
        touched.add("<logging>:" + lg.name, name)


def _add_module_chain(name: str, reads: set[str]) -> None:
    reads.add("<sys.modules>:" + name)


_SUBMODULE_DEPTH: Final = 8


def _submodule_dirs(dirs: list[str], attr: str) -> list[str] | None:
    """Whether ``attr`` names a submodule in the package directories ``dirs``: None if
    not, [] for a module file, the subpackage's directories for a package."""
    if not attr.isidentifier():
        return None
    sub: list[str] = []
    plain = False
    for d in dirs:
        where = _join(d, attr)
        if _isfile(where + ".py"):
            plain = True
        elif _isdir(where) and not attr.startswith("__"):
            sub.append(where)  # a package, or a namespace package's portion
    if sub:
        return sub
    return [] if plain else None


# ------------------------------------------------------------------------ stdlib hooks


_LOGGER_SITES: dict[str, frozenset[str]] = {}


def _logger_read(self: logging.Logger) -> None:
    rec = _CURRENT
    if rec is not None and rec.active:
        name = self.name
        sites = _LOGGER_SITES.get(name)
        if sites is None:
            sites = _LOGGER_SITES[name] = logger_sites(name)
        rec.reads.update(sites)


def _logger_write(self: logging.Logger) -> None:
    rec = _CURRENT
    if rec is not None and rec.active:
        rec.wrote("<logging>:" + self.name)


def _path_read(path: object) -> None:
    rec = _CURRENT
    if rec is not None and rec.active:
        found = file_site(path)
        if found is not None:
            rec.reads.add(found[0])
            if found[1]:
                rec.reads.add("<cwd>")


def _module_read(name: object) -> None:
    rec = _CURRENT
    if rec is not None and rec.active and isinstance(name, str) and not name.startswith("."):
        rec.reads.add("<sys.modules>:" + name)
        rec.reads.add("<sys.path>")


def _wrap(orig: Callable[..., Any], note: Callable[[Any], None]) -> Callable[..., Any]:
    """``orig`` that first notes its first argument (the logger, the path, the name)."""

    @functools.wraps(orig)
    def wrapper(first: Any, *args: Any, **kwargs: Any) -> Any:
        note(first)
        return orig(first, *args, **kwargs)

    wrapper.__isolator_wrapped__ = orig  # type: ignore[attr-defined]
    return wrapper


class StdlibHooks:
    """Wrappers around the few stdlib functions whose arguments name the state read.

    ``Logger.isEnabledFor(self)`` -> ``<logging>:name`` and its ancestors;
    ``os.path.exists(p)`` and friends, ``Path.stat`` -> ``<file>:p``;
    ``importlib.import_module(n)`` -> ``<sys.modules>:n``.  Installed for the recording
    run only and removed at its end; a wrapper outside a test costs one extra call.
    """

    def __init__(self) -> None:
        self.patched: list[tuple[Any, str, Any, Any]] = []  # (owner, name, original, wrapper)

    def install(self) -> None:
        targets: list[tuple[Any, str, Callable[[Any], None]]] = []
        for meth in ("isEnabledFor", "getEffectiveLevel", "callHandlers"):
            targets.append((logging.Logger, meth, _logger_read))
        for meth in ("setLevel", "addHandler", "removeHandler", "addFilter", "removeFilter"):
            targets.append((logging.Logger, meth, _logger_write))
        for fn in ("exists", "isfile", "isdir", "lexists", "getsize", "getmtime", "islink"):
            targets.append((os.path, fn, _path_read))
        targets.append((_pathlib.Path, "stat", _path_read))
        targets.append((importlib, "import_module", _module_read))
        for owner, name, note in targets:
            orig = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name)
            if orig is None or getattr(orig, "__isolator_wrapped__", None) is not None:
                continue
            wrapper = _wrap(orig, note)
            setattr(owner, name, wrapper)
            self.patched.append((owner, name, orig, wrapper))

    def uninstall(self) -> None:
        for owner, name, orig, wrapper in reversed(self.patched):
            current = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name)
            if current is wrapper:
                setattr(owner, name, orig)
        self.patched.clear()


# --------------------------------------------------------------------------- backends


class Backend(Protocol):
    """Tells what the code that ran between ``start()`` and ``stop()`` means: ``infos()``
    returns the ``CodeInfo`` of the code seen since its last call (or since
    ``new_test()``), classified by the ``classify`` it is given.

    ``sees_all_code``: False for a backend that only sees the functions it prepared, so
    that module bodies run during a test (imports) must be credited from the ``exec``
    audit event instead.
    """

    name: str
    sees_all_code: bool

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def new_test(self) -> None: ...

    def infos(self, classify: Callable[[types.CodeType], CodeInfo | None]) -> list[CodeInfo]: ...

    def close(self) -> None: ...


def _classified(
    codes: Iterable[types.CodeType], classify: Callable[[types.CodeType], CodeInfo | None]
) -> list[CodeInfo]:
    out = []
    for code in codes:
        info = classify(code)
        if info is not None:
            out.append(info)
    return out


class _Hits(set):  # type: ignore[type-arg]
    """The probes' set of probe numbers.  It sits in code constants, and code objects
    hash their constants: an identity hash keeps ``hash(func.__code__)`` working."""

    __slots__ = ()
    __hash__ = object.__hash__  # type: ignore[assignment]


_OP: Final = dis.opmap
# Python 3.11+: the probe goes after RESUME, and jumps are relative (3.10 has neither).
PROBES_SUPPORTED: Final = "RESUME" in _OP
_COMPREHENSIONS: Final = frozenset({"<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>"})
_CO_NEWLOCALS: Final = 0x2


def _instr(op: str, arg: int) -> bytes:
    """One instruction, with the EXTENDED_ARG prefixes a large argument needs."""
    out = bytearray()
    shift = 24
    while shift:
        part = (arg >> shift) & 0xFF
        if part or out:
            out += bytes([_OP["EXTENDED_ARG"], part])
        shift -= 8
    out += bytes([_OP[op], arg & 0xFF])
    return bytes(out)


def _read_varint(table: bytes, i: int) -> tuple[int, int]:
    """Exception table varint (6-bit chunks, most significant first, 0x40 = more)."""
    b = table[i]
    val = b & 63
    i += 1
    while b & 64:
        b = table[i]
        i += 1
        val = (val << 6) | (b & 63)
    return val, i


def _write_varint(val: int, out: bytearray, start: bool) -> None:
    chunks = [val & 63]
    val >>= 6
    while val:
        chunks.append(val & 63)
        val >>= 6
    chunks.reverse()
    for j, c in enumerate(chunks):
        if j < len(chunks) - 1:
            c |= 64
        if j == 0 and start:
            c |= 128
        out.append(c)


def _shift_exception_table(table: bytes, at: int, n: int) -> bytes:
    """Exception table entries (start, length, target, depth/lasti in code units) with
    ``n`` units inserted at unit ``at``."""
    out = bytearray()
    i = 0
    while i < len(table):
        start, i = _read_varint(table, i)
        length, i = _read_varint(table, i)
        target, i = _read_varint(table, i)
        depth, i = _read_varint(table, i)
        if start >= at:
            start += n
        elif start + length > at:
            length += n
        if target >= at:
            target += n
        _write_varint(start, out, True)
        _write_varint(length, out, False)
        _write_varint(target, out, False)
        _write_varint(depth, out, False)
    return bytes(out)


def _linetable_entry_end(table: bytes, i: int) -> int:
    """Where the location table entry at ``i`` ends (PEP 657 format, 3.11-3.13)."""
    kind = (table[i] >> 3) & 15
    i += 1
    if kind == 15:  # no location
        return i
    if kind == 13:  # line delta only
        varints = 1
    elif kind == 14:  # long form
        varints = 4
    elif kind >= 10:  # one line, two column bytes
        return i + 2
    else:  # short form, one column byte
        return i + 1
    for _ in range(varints):
        while table[i] & 64:
            i += 1
        i += 1
    return i


def _no_location(n: int) -> bytes:
    out = bytearray()
    while n > 0:
        m = min(n, 8)
        out.append(0x80 | (15 << 3) | (m - 1))
        n -= m
    return bytes(out)


def _insert_linetable(table: bytes, at: int, n: int) -> bytes:
    """The location table with ``n`` units without a location inserted at unit ``at``.
    An entry spanning ``at`` is split; its second half repeats the location with a
    zero line delta (a no-location entry does not move the current line)."""
    out = bytearray()
    i = unit = 0
    done = False
    while i < len(table):
        if unit == at:
            out += _no_location(n)
            done = True
        if done:
            out += table[i:]
            break
        j = _linetable_entry_end(table, i)
        head = table[i]
        kind = (head >> 3) & 15
        length = (head & 7) + 1
        if unit < at < unit + length:
            first = at - unit
            out.append(0x80 | (kind << 3) | (first - 1))
            out += table[i + 1 : j]
            out += _no_location(n)
            done = True
            rest = 0x80 | (length - first - 1)
            if kind in (13, 14):  # line delta (a signed varint) first: make it 0
                k = i + 1
                while table[k] & 64:
                    k += 1
                out.append(rest | (kind << 3))
                out.append(0)
                out += table[k + 1 : j]
            elif 10 <= kind <= 12:
                out.append(rest | (10 << 3))
                out += table[i + 1 : j]
            else:
                out.append(rest | (kind << 3))
                out += table[i + 1 : j]
        else:
            out += table[i:j]
        unit += length
        i = j
    if not done:
        out += _no_location(n)
    return bytes(out)


def _resume_end(code: bytes) -> int:
    """Code unit after the first RESUME (the prelude before it has no inline caches)."""
    resume = _OP["RESUME"]
    for unit in range(min(len(code) // 2, 32)):
        if code[2 * unit] == resume:
            return unit + 1
    return -1


class ProbeBackend:
    """Probes put into the bytecode of the project's functions (Python >= 3.11).

    Every function and lambda of a project file gets, right after its ``RESUME``, four
    instructions that add its probe number to a set (``LOAD_CONST hits; LOAD_CONST k;
    SET_ADD; POP_TOP``: no call, no line, no location); the live functions get the
    probed code (``func.__code__``), and the code nested in it is probed too, so closures
    made later carry probes.  Nothing outside the project pays anything: a profile or
    trace function on 3.11 takes every instruction of every frame off the interpreter's
    specialised path (about one plain run's time again on parso), and ``sys.monitoring``
    re-arms every code object between tests.  Inserting after ``RESUME`` moves no jump
    (3.11+ jumps are relative and none targets the prelude); the exception and location
    tables are shifted to match.

    ``units[k]``: the code object of probe ``k`` as the project compiled it, followed by
    the code that runs only inside it (comprehensions, class bodies); ``hits``: probes
    fired since the last ``start()``/``infos()``.  Modules imported later are probed at
    the next ``new_test()``; the test that imported them is credited with all of their
    code (``sees_all_code`` is False: module bodies come from the ``exec`` audit event).
    """

    name = "probes"
    sees_all_code = False

    def __init__(self, is_project_file: Callable[[str], bool]) -> None:
        if not PROBES_SUPPORTED:
            raise RuntimeError("bytecode probes need Python 3.11 or later")
        self.is_project_file = is_project_file
        self.hits = _Hits()
        self.units: list[tuple[types.CodeType, ...]] = []
        self.stats = {"functions": 0, "codes": 0, "failed": 0}
        self._pending: set[int] = set()
        self._infos: dict[int, list[CodeInfo]] = {}
        # (file, original) -> probed; code objects compare by value, not by file
        self._probed: dict[tuple[str, types.CodeType], types.CodeType] = {}
        self._is_probe: set[tuple[str, types.CodeType]] = set()
        self._swapped: list[tuple[types.FunctionType, types.CodeType, types.CodeType]] = []
        self._nmodules = -1
        self._modules: dict[str, object] = {}  # sys.modules as of the last check
        self._on = False

    def instrument(self) -> None:
        """Probe the project functions that exist now (after imports since the last call)."""
        if len(sys.modules) == self._nmodules or not self._new_project_module():
            return
        is_project = self.is_project_file
        probed = self._probed
        for obj in gc.get_objects():
            if type(obj) is not types.FunctionType:
                continue
            code = obj.__code__
            key = (code.co_filename, code)
            if not is_project(code.co_filename) or key in self._is_probe:
                continue
            new = probed.get(key)
            if new is None:
                new = self._probe(code)
            if new is code:
                continue
            try:
                obj.__code__ = new
            except ValueError:
                self.stats["failed"] += 1
                continue
            self._swapped.append((obj, code, new))
            self.stats["functions"] += 1

    def _new_project_module(self) -> bool:
        """Has a project module been imported (or imported again) since the last call?
        Tests import library modules all the time; only project ones need a heap scan."""
        self._nmodules = len(sys.modules)
        seen = self._modules
        found = False
        for name, mod in list(sys.modules.items()):
            if seen.get(name) is mod:
                continue
            seen[name] = mod
            f = getattr(mod, "__file__", None)
            if isinstance(f, str) and f.endswith(".py") and self.is_project_file(_abspath(f)):
                found = True
        return found

    def _probe(self, code: types.CodeType) -> types.CodeType:
        """``code`` with probes in it and in its nested code (cached; ``code`` itself when
        it cannot be probed)."""
        new, _inner = self._probe_tree(code)
        return new

    def _probe_tree(self, code: types.CodeType) -> tuple[types.CodeType, list[types.CodeType]]:
        """(probed code, the code that runs only as part of it if it is no probe itself)."""
        ident = (code.co_filename, code)
        known = self._probed.get(ident)
        if known is not None:
            return known, []
        consts: list[object] = []
        inner: list[types.CodeType] = []
        changed = False
        for c in code.co_consts:
            if isinstance(c, types.CodeType):
                new, nested = self._probe_tree(c)
                inner.extend(nested)
                changed = changed or new is not c
                c = new
            consts.append(c)
        is_function = bool(code.co_flags & _CO_NEWLOCALS) and code.co_name not in _COMPREHENSIONS
        out = code.replace(co_consts=tuple(consts)) if changed else code
        if is_function:
            key = len(self.units)
            try:
                out = self._insert(out, key)
            except Exception:  # an unexpected layout: leave this code unprobed
                self.stats["failed"] += 1
            else:
                self.units.append((code, *inner))
                self.stats["codes"] += 1
                self._probed[ident] = out
                self._is_probe.add((code.co_filename, out))
                return out, []
        self._probed[ident] = out
        self._is_probe.add((code.co_filename, out))
        return out, [code, *inner]

    def _insert(self, code: types.CodeType, key: int) -> types.CodeType:
        raw = code.co_code
        at = _resume_end(raw)
        if at < 0:
            raise ValueError("no RESUME")
        n_consts = len(code.co_consts)
        prefix = (
            _instr("LOAD_CONST", n_consts)
            + _instr("LOAD_CONST", n_consts + 1)
            + _instr("SET_ADD", 1)
            + _instr("POP_TOP", 0)
        )
        n = len(prefix) // 2
        # co_exceptiontable is 3.11+ (typing targets 3.10)
        table: bytes = getattr(code, "co_exceptiontable")  # noqa: B009
        tables: dict[str, Any] = {"co_exceptiontable": _shift_exception_table(table, at, n)}
        return code.replace(
            co_code=raw[: 2 * at] + prefix + raw[2 * at :],
            co_consts=(*code.co_consts, self.hits, key),
            co_stacksize=max(code.co_stacksize, 2),
            co_linetable=_insert_linetable(code.co_linetable, at, n),
            **tables,
        )

    def start(self) -> None:
        # What ran between the phases (pytest's reporting, conftest hooks) is not the test's.
        self.hits.clear()
        self._on = True

    def stop(self) -> None:
        if self._on:
            self._pending.update(self.hits)
            self.hits.clear()
            self._on = False

    def new_test(self) -> None:
        self.instrument()
        self.hits.clear()
        self._pending.clear()

    def infos(self, classify: Callable[[types.CodeType], CodeInfo | None]) -> list[CodeInfo]:
        pending = self._pending
        if self._on:
            pending.update(self.hits)
            self.hits.clear()
        out: list[CodeInfo] = []
        cache = self._infos
        for k in pending:
            got = cache.get(k)
            if got is None:
                got = cache[k] = [
                    i for i in _classified(self.units[k], classify) if i.reads or i.touched
                ]
            out.extend(got)
        pending.clear()
        return out

    def close(self) -> None:
        self.stop()
        for fn, old, new in reversed(self._swapped):
            if fn.__code__ is new:
                fn.__code__ = old
        self._swapped.clear()


class ProfilerBackend:
    """The C profiler behind ``cProfile`` (``_lsprof``), Python < 3.12.

    Its per-call cost is C code; a Python ``sys.settrace`` function costs a Python call
    per function call (about a third of a plain run on call-heavy suites).  The code
    objects that ran are the entries of ``getstats()``.
    """

    name = "lsprof"
    sees_all_code = True

    def __init__(self) -> None:
        import _lsprof

        from isolator._process import own_hook

        self._prof: Any = _lsprof.Profiler()
        self._on = False
        own_hook(self._prof)

    def start(self) -> None:
        # Leave a user's profiler alone; reads then come from the other sources.
        if sys.getprofile() is None:
            self._prof.enable(subcalls=False, builtins=False)
            self._on = True

    def stop(self) -> None:
        if self._on:
            self._prof.disable()
            self._on = False

    def new_test(self) -> None:
        self._prof.clear()

    def infos(self, classify: Callable[[types.CodeType], CodeInfo | None]) -> list[CodeInfo]:
        return _classified(self.codes(), classify)

    def codes(self) -> Iterable[types.CodeType]:
        on = self._on
        if on:
            self._prof.disable()
        entries = self._prof.getstats()
        self._prof.clear()
        if on:
            self._prof.enable(subcalls=False, builtins=False)
        return [e.code for e in entries if type(e.code) is types.CodeType]

    def close(self) -> None:
        self.stop()


class SettraceBackend:
    """Call-only ``sys.settrace`` function (no line events), when ``_lsprof`` cannot run."""

    name = "settrace"
    sees_all_code = True

    def __init__(self) -> None:
        seen: set[types.CodeType] = set()
        add = seen.add

        def tracer(frame: types.FrameType, event: str, arg: object) -> None:
            add(frame.f_code)
            return None

        from isolator._process import own_hook

        self._seen = seen
        self._tracer = tracer
        self._on = False
        own_hook(tracer)

    def start(self) -> None:
        if sys.gettrace() is None:
            sys.settrace(self._tracer)
            threading.settrace(self._tracer)
            self._on = True

    def stop(self) -> None:
        if self._on:
            sys.settrace(None)
            threading.settrace(None)
            self._on = False

    def new_test(self) -> None:
        self._seen.clear()

    def infos(self, classify: Callable[[types.CodeType], CodeInfo | None]) -> list[CodeInfo]:
        return _classified(self.codes(), classify)

    def codes(self) -> Iterable[types.CodeType]:
        out = list(self._seen)
        self._seen.clear()
        return out

    def close(self) -> None:
        self.stop()


class MonitoringBackend:
    """``sys.monitoring`` PY_START events (Python >= 3.12) under our own tool id.

    Each code object reports once per test: the callback returns DISABLE, and
    ``restart_events()`` re-arms them when the next test begins.
    """

    name = "sys.monitoring"
    sees_all_code = True

    def __init__(self) -> None:
        mon: Any = sys.__dict__["monitoring"]
        self._mon = mon
        self.tool = -1
        for tool in (4, 3, 5):
            if mon.get_tool(tool) is None:
                self.tool = tool
                break
        if self.tool < 0:
            raise RuntimeError("no free sys.monitoring tool id")
        mon.use_tool_id(self.tool, "isolator-deps")
        seen: set[types.CodeType] = set()
        add = seen.add
        disable = mon.DISABLE

        def on_start(code: types.CodeType, offset: int) -> Any:
            add(code)
            return disable

        mon.register_callback(self.tool, mon.events.PY_START, on_start)
        self._event = mon.events.PY_START
        self._seen = seen
        self._on = False

    def start(self) -> None:
        if not self._on:
            self._mon.set_events(self.tool, self._event)
            self._on = True

    def stop(self) -> None:
        if self._on:
            self._mon.set_events(self.tool, 0)
            self._on = False

    def new_test(self) -> None:
        self._seen.clear()
        self._mon.restart_events()

    def infos(self, classify: Callable[[types.CodeType], CodeInfo | None]) -> list[CodeInfo]:
        return _classified(self.codes(), classify)

    def codes(self) -> Iterable[types.CodeType]:
        out = list(self._seen)
        self._seen.clear()
        return out

    def close(self) -> None:
        self.stop()
        self._mon.register_callback(self.tool, self._event, None)
        self._mon.free_tool_id(self.tool)


def make_backend(
    prefer: str = "auto", is_project_file: Callable[[str], bool] | None = None
) -> Backend:
    """The one place a backend is chosen.

    ``auto``: probes in the project's functions (needs ``is_project_file``); ``profile``:
    ``sys.monitoring`` on >= 3.12, the C profiler below; ``settrace``: a Python trace
    function.
    """
    if prefer == "settrace":
        return SettraceBackend()
    if prefer == "auto" and is_project_file is not None and PROBES_SUPPORTED:
        return ProbeBackend(is_project_file)
    if sys.version_info >= (3, 12):
        try:
            return MonitoringBackend()
        except (RuntimeError, ValueError):
            pass
    try:
        return ProfilerBackend()
    except ImportError:
        return SettraceBackend()


# ---------------------------------------------------------------- environment and audit


class _TrackedEnviron(os._Environ):  # type: ignore[type-arg]
    """``os.environ`` with key lookups noted while a test is being recorded."""

    __slots__ = ()

    def __getitem__(self, key: Any) -> Any:
        rec = _CURRENT
        if rec is not None and rec.active and key not in _RUNNER_KEYS and not _from_tooling():
            rec.reads.add("<env>:" + _env_name(key))
        return super().__getitem__(key)

    def __iter__(self) -> Any:
        rec = _CURRENT
        if rec is not None and rec.active and not _from_tooling():
            rec.reads.add("<env>")
        return super().__iter__()

    def __setitem__(self, key: Any, value: Any) -> None:
        rec = _CURRENT
        if rec is not None and rec.active and key not in _RUNNER_KEYS and not _from_tooling():
            rec.wrote("<env>:" + _env_name(key))
        super().__setitem__(key, value)

    def __delitem__(self, key: Any) -> None:
        rec = _CURRENT
        if rec is not None and rec.active and key not in _RUNNER_KEYS and not _from_tooling():
            rec.wrote("<env>:" + _env_name(key))
        super().__delitem__(key)


# pytest sets this one in every phase of every test.
_RUNNER_KEYS: Final = frozenset({"PYTEST_CURRENT_TEST", b"PYTEST_CURRENT_TEST"})


def _env_name(key: Any) -> str:
    return os.fsdecode(key) if isinstance(key, bytes) else str(key)


# Where os.environ's own methods and the Mapping mixins live (frozen modules included).
_SKIP_FILES: Final = frozenset(
    {
        os._Environ.__getitem__.__code__.co_filename,
        os.getenv.__code__.co_filename,
        Mapping.get.__code__.co_filename,
        MutableMapping.pop.__code__.co_filename,
    }
)


def _package_dir(name: str) -> str:
    mod = sys.modules.get(name)
    f = getattr(mod, "__file__", None)
    return _join(os.path.dirname(_abspath(f)), "") if isinstance(f, str) else _ISOLATOR_DIR


# Environment accesses made by the test runner itself (pytest sets PYTEST_CURRENT_TEST in
# every phase, monkeypatch reads before it writes and undoes at teardown) are not the test's.
_TOOLING_DIRS: Final = (_ISOLATOR_DIR, _package_dir("_pytest"), _package_dir("pluggy"))


def _from_tooling() -> bool:
    """True if isolator, pytest or pluggy is the one touching the environment."""
    f: types.FrameType | None = sys._getframe(2)
    while f is not None and f.f_code.co_filename in _SKIP_FILES:
        f = f.f_back
    return f is not None and f.f_code.co_filename.startswith(_TOOLING_DIRS)


_WRITE_FLAGS: Final = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_CURRENT: Recorder | None = None
_AUDIT_INSTALLED = False
_READ_PATH_EVENTS: Final = {"os.listdir": 0, "os.scandir": 0, "glob.glob": 0}
_WRITE_PATH_EVENTS: Final = {
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.mkdir": (0,),
    "os.truncate": (0,),
    "os.rename": (0, 1),
    "os.link": (1,),
    "os.symlink": (1,),
    "shutil.rmtree": (0,),
    "shutil.move": (0, 1),
    "shutil.copyfile": (1,),
    "os.chmod": (0,),
    "os.utime": (0,),
}


def _audit(event: str, args: tuple[Any, ...]) -> None:
    # Installed once and never removable: the first test is a cheap no-op.
    rec = _CURRENT
    if rec is None or not rec.active:
        return
    if event == "open":
        path, mode = args[0], args[1]
        found = file_site(path)
        if found is None:
            return
        site, relative = found
        if relative:
            rec.reads.add("<cwd>")
        if mode is None or isinstance(mode, int):
            flags = args[2] if len(args) > 2 else 0
            writing = isinstance(flags, int) and bool(flags & _WRITE_FLAGS)
            reading = not (isinstance(flags, int) and flags & os.O_WRONLY)
        else:
            writing = any(c in mode for c in "wax+")
            reading = "r" in mode or "+" in mode or "a" in mode
        if reading:
            rec.reads.add(site)
        if writing:
            rec.wrote(site)
        return
    if event == "exec":
        # Module bodies (imports) and exec()'d code: seen here by backends that only
        # see the functions they probed.
        if args and type(args[0]) is types.CodeType:
            rec.executed.append(args[0])
        return
    if event == "import":
        name = args[0]
        if isinstance(name, str):
            rec.reads.add("<sys.modules>:" + name)
            rec.reads.add("<sys.path>")
        return
    if event == "os.chdir":
        rec.wrote("<cwd>")
        if args and file_site(args[0]) is not None and not os.path.isabs(_fspath(args[0])):
            rec.reads.add("<cwd>")
        return
    idx = _READ_PATH_EVENTS.get(event)
    if idx is not None:
        arg = args[idx] if len(args) > idx else None
        if arg is None or arg == "." or arg == b".":
            rec.reads.add("<cwd>")
            return
        found = file_site(arg)
        if found is not None:
            rec.reads.add(found[0])
            if found[1]:
                rec.reads.add("<cwd>")
        return
    where = _WRITE_PATH_EVENTS.get(event)
    if where is not None:
        for i in where:
            if len(args) > i:
                found = file_site(args[i])
                if found is not None:
                    rec.wrote(found[0])
                    if found[1]:
                        rec.reads.add("<cwd>")


# --------------------------------------------------------------------------- the facade


class TestReads(NamedTuple):
    """What one test read, and what it may have written (gross) with the project line
    that did it (``"file:line"``, relative to the rootdir, or "")."""

    reads: frozenset[str]
    touched: dict[str, str]
    lazy: dict[str, tuple[types.CodeType, str, str]] = {}  # site -> (code, relpath, name)

    def locate(self, site: str, overlap: Callable[[str, str], bool]) -> str:
        """Where a net write to ``site`` most likely happened."""
        where = self.touched.get(site)
        if where:
            return where
        for other, loc in self.touched.items():
            if loc and overlap(other, site):
                return loc
        for other, (code, rel, name) in self.lazy.items():
            if other == site or overlap(other, site):
                return f"{rel}:{name_line(code, name)}"
        return ""


class ReadTracer:
    """Records, test by test, the sites read by executed project code and the process.

    Use: ``install()`` once; per test ``begin_test()``, ``resume()``/``pause()`` around each
    phase, ``end_test()``; ``close()`` at the end.
    """

    def __init__(
        self,
        rootdir: str,
        static: Mapping[str, StaticAccess] | None = None,
        prefer: str = "auto",
    ) -> None:
        self.rec = Recorder()
        self.classifier = CodeClassifier(rootdir, static)
        self.rec.locate = self.classifier.caller_location
        self.backend: Backend = make_backend(prefer, self.classifier.is_project_file)
        self.hooks = StdlibHooks()
        # keyed with the file: code objects compare by value, and two files can hold
        # the same code (generated modules, copies)
        self.known: dict[tuple[str, types.CodeType], CodeInfo | None] = {}
        self._envs: list[Any] = []
        self._installed = False

    def install(self) -> None:
        global _CURRENT, _AUDIT_INSTALLED
        if self._installed:
            return
        self._installed = True
        _CURRENT = self.rec
        if not _AUDIT_INSTALLED:
            sys.addaudithook(_audit)
            _AUDIT_INSTALLED = True
        for env in (os.environ, getattr(os, "environb", None)):
            if env is not None and type(env) is os._Environ:
                env.__class__ = _TrackedEnviron
                self._envs.append(env)
        self.hooks.install()
        instrument = getattr(self.backend, "instrument", None)
        if instrument is not None:
            instrument()

    def begin_test(self) -> None:
        self.rec.clear()
        self.backend.new_test()

    def resume(self) -> None:
        self.rec.active = True
        self.backend.start()

    def pause(self) -> None:
        self.backend.stop()
        self.rec.active = False

    def _classify(self, code: types.CodeType) -> CodeInfo | None:
        key = (code.co_filename, code)
        info = self.known.get(key, _MISSING)
        if info is _MISSING:
            info = self.known[key] = self.classifier.classify_code(code)
        return info  # type: ignore[return-value]

    def _collect(self) -> None:
        """Classify the code that ran since the last collection (cached)."""
        infos = self.rec.infos
        infos.update(self.backend.infos(self._classify))
        executed = self.rec.executed
        if executed:
            if not self.backend.sees_all_code:
                # A module imported during the test: its functions are not probed yet,
                # so all of its code counts as run.
                is_project = self.classifier.is_project_file
                for top in executed:
                    if is_project(top.co_filename):
                        infos.update(_classified(_code_tree(top), self._classify))
            executed.clear()

    def credit(self, code: types.CodeType) -> None:
        """Count ``code`` (and the code nested in it) as run by the current test: for a
        generator the probes saw start in an earlier test (a higher-scoped yield
        fixture's teardown)."""
        if self.rec.active:
            self.rec.infos.update(_classified(_code_tree(code), self._classify))

    def end_test(self) -> TestReads:
        self.pause()
        self._collect()
        reads: set[str] = set(self.rec.reads)
        lazy: dict[str, tuple[types.CodeType, str, str]] = {}
        for info in self.rec.infos:
            reads.update(info.reads)
            if info.code is not None:
                for site, name in info.lazy:
                    lazy.setdefault(site, (info.code, info.rel, name))
        return TestReads(frozenset(reads), self.touched_now(), lazy)

    def touched_now(self) -> dict[str, str]:
        """Sites the current test may have written so far (see ``end_test``)."""
        self._collect()
        touched: dict[str, str] = dict(self.rec.touched)
        for info in self.rec.infos:
            for site, loc in info.where:
                if not touched.get(site):
                    touched[site] = loc
            for site, _name in info.lazy:
                touched.setdefault(site, "")
        return touched

    def close(self) -> None:
        global _CURRENT
        self.pause()
        self.backend.close()
        self.hooks.uninstall()
        for env in self._envs:
            if type(env) is _TrackedEnviron:
                env.__class__ = os._Environ  # type: ignore[assignment]
        self._envs.clear()
        if _CURRENT is self.rec:
            _CURRENT = None
        self._installed = False


class SubclassReads:
    """A base class's attribute reads as a subclass sees them.

    The static pass names ``cls.attr`` and ``self.attr`` in a method of ``Base`` after
    ``Base`` (``m:Base.attr``).  Run by a test of ``Sub(Base)``, that lookup reads
    ``Sub.__dict__`` first, and then every class between them: where a write through
    ``cls`` (``cls.attr = v`` in a classmethod called on ``Sub``) lands, and where the
    core records it (``m:Sub.attr``).  Without the subclass's names a test reading
    ``attr`` in a helper of its base class is never linked to the earlier test that
    set it on its own class.
    """

    def __init__(self) -> None:
        self._split: dict[str, tuple[type, str] | None] = {}  # site -> (class, ".rest")
        self._names: dict[type, str | None] = {}

    def sites(self, reads: Iterable[str], cls: type | None) -> set[str]:
        """The sites of ``reads`` that name an attribute of a proper base of ``cls``,
        under ``cls`` and each class of its MRO before that base."""
        out: set[str] = set()
        if not isinstance(cls, type):
            return out
        mro = cls.__mro__
        split, names = self._split, self._names
        for site in reads:
            if site not in split:
                split[site] = _class_attr(site)
            found = split[site]
            if found is None:
                continue
            base, rest = found
            if base is cls or base not in mro:
                continue
            for sub in mro[: mro.index(base)]:
                if sub not in names:
                    names[sub] = _class_site(sub)
                name = names[sub]
                if name is not None:
                    out.add(f"{name}{rest}")
        return out


def _class_attr(site: str) -> tuple[type, str] | None:
    """(class, ".attr...") for a project site naming an attribute of a class (the
    deepest class along its dotted path), else None."""
    if site.startswith("<"):
        return None
    mod, _, path = site.partition(":")
    obj: Any = sys.modules.get(mod)
    if obj is None or not path:
        return None
    head = path
    for i, ch in enumerate(path):
        if ch == "[":
            head = path[:i]
            break
    found: tuple[type, str] | None = None
    at = 0
    for part in head.split("."):
        try:
            obj = vars(obj).get(part, _MISSING)
        except TypeError:
            break
        if obj is _MISSING:
            break
        at += len(part) + (1 if at else 0)
        if isinstance(obj, type) and at < len(path):
            found = (obj, path[at:])
    if found is None or not found[1].startswith("."):
        return None
    return found


def _class_site(cls: type) -> str | None:
    """``module:Qual.Name`` of a class reachable under that name (as the core names its
    attributes), else None (a class made in a function)."""
    mod = getattr(cls, "__module__", None)
    qual = getattr(cls, "__qualname__", None)
    if not isinstance(mod, str) or not isinstance(qual, str) or "<" in qual:
        return None
    obj: Any = sys.modules.get(mod)
    for part in qual.split("."):
        try:
            obj = vars(obj).get(part)
        except TypeError:
            return None
    return f"{mod}:{qual}" if obj is cls else None


def _code_tree(top: types.CodeType) -> Iterator[types.CodeType]:
    """``top`` and every code object nested in it."""
    todo = [top]
    while todo:
        code = todo.pop()
        yield code
        todo.extend(c for c in code.co_consts if isinstance(c, types.CodeType))


def static_by_filename(states: Mapping[str, Any] | Iterable[Any]) -> dict[str, StaticAccess]:
    """Index the static pass's ``{modname: ModuleState}`` by absolute file name."""
    values: Iterable[Any] = states.values() if isinstance(states, Mapping) else states
    out: dict[str, StaticAccess] = {}
    for st in values:
        fn: object = getattr(st, "filename", None)
        if isinstance(fn, str) and fn:
            out[_abspath(fn)] = st
    return out
