"""Read tracing: which tracked state sites each test reads (and may write).

Three sources, merged per test by :class:`ReadTracer`:

* **Executed project code** (files under the rootdir, not site-packages, not isolator):
  each code object that runs maps to the static read set of the static pass
  (``ModuleState.access_for``) plus the process-wide state its names refer to (the
  ``random``/``decimal``/``warnings`` modules, ``sys.modules``, the cwd, library module
  attributes such as ``json:dumps``).  A *backend* reports the code objects that start:
  ``sys.monitoring`` PY_START events on Python >= 3.12 (disabled per code after its first
  hit, re-armed between tests), a call-only ``sys.settrace`` function below.  Tracing is on
  only while a test's setup, call and teardown run, so pytest's own reporting and
  collection run at full speed.
* **A few stdlib functions** whose arguments name the state (``Logger.isEnabledFor`` ->
  ``<logging>:name`` and its ancestors, ``os.path.exists(p)`` -> ``<file>:p``,
  ``importlib.import_module(n)`` -> ``<sys.modules>:n``): the backend calls a hook with
  their frame.
* **Process-wide reads** that no code object shows: ``os.environ`` keys (the class of the
  ``os.environ`` object is swapped for a subclass that notes the keys looked up, so its
  identity stays the same), and an audit hook for files, directories, the cwd and imports.

Approximations (documented in the README): a code object that *could* touch a site counts
as reading it (branches not taken still count); library code is not traced, so state read
only inside a third-party library is seen only through the hooks above; C extensions'
reads are invisible; ``sys.modules`` reads are narrowed to the module names among the
code's string constants when there are any.
"""

from __future__ import annotations

import builtins
import dis
import importlib
import logging
import os
import sys
import threading
import types
from collections.abc import Callable, Iterable, Mapping
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
    {"sys", "os", "builtins", "typing", "random", "decimal", "warnings", "logging", "pytest",
     "_pytest", "collections", "abc", "types", "functools", "itertools", "dataclasses",
     "enum", "re", "math", "operator", "__future__", "isolator"}
)

TraceHook = Callable[[types.FrameType], None]


class CodeInfo(NamedTuple):
    """What one executed code object means for the test that ran it."""

    reads: frozenset[str]
    touched: frozenset[str]  # sites it may write (gross, for cleaner candidates)


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

    __slots__ = ("active", "infos", "reads", "touched")

    def __init__(self) -> None:
        self.active = False
        self.infos: set[CodeInfo] = set()
        self.reads: set[str] = set()
        self.touched: set[str] = set()

    def clear(self) -> None:
        # In place: the backends hold the bound ``infos.add`` for speed.
        self.infos.clear()
        self.reads.clear()
        self.touched.clear()


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
        self._lib_module_cache: dict[int, bool] = {}
        self.empty = CodeInfo(frozenset(), frozenset())

    def set_static(self, static: Mapping[str, StaticAccess]) -> None:
        self.static = dict(static)

    def is_project_file(self, filename: str) -> bool:
        known = self._project_files.get(filename)
        if known is None:
            known = (
                filename.startswith(self.rootdir)
                and not filename.startswith(_ISOLATOR_DIR)
                and not any(m in filename for m in _LIB_MARKERS)
            )
            self._project_files[filename] = known
        return known

    def is_project_module(self, mod: types.ModuleType) -> bool:
        key = id(mod)
        known = self._lib_module_cache.get(key)
        if known is None:
            f = getattr(mod, "__file__", None)
            known = isinstance(f, str) and self.is_project_file(_abspath(f))
            self._lib_module_cache[key] = known
        return known

    def classify(self, code: types.CodeType, f_globals: dict[str, Any]) -> CodeInfo | None:
        """The sites a project code object may read/write, or None for other code."""
        if not self.is_project_file(code.co_filename):
            return None
        reads: set[str] = set()
        touched: set[str] = set()
        access = self._static_access(code)
        if access is not None:
            reads.update(access.reads)
            touched.update(access.writes)
        self._dynamic(code, f_globals, reads, touched)
        if not reads and not touched:
            return self.empty
        return CodeInfo(frozenset(reads), frozenset(touched))

    def _static_access(self, code: types.CodeType) -> Any:
        state = self.static.get(code.co_filename)
        if state is None:
            return None
        qual = getattr(code, "co_qualname", None) or self._qualnames.qualname(code)
        try:
            return state.access_for(code.co_firstlineno, qual)
        except Exception:  # a static pass bug must not break the user's run
            return None

    def _dynamic(
        self, code: types.CodeType, g: dict[str, Any], reads: set[str], touched: set[str]
    ) -> None:
        """Process-wide state named by the code's global names (see the module docstring)."""
        names = code.co_names
        if not names:
            return
        nameset = frozenset(names)
        for name in names:
            obj = g.get(name, _MISSING)
            if obj is _MISSING:
                obj = getattr(builtins, name, _MISSING)
                if name != "__import__" or obj is _MISSING:
                    continue
            self._name_sites(name, obj, nameset, code, reads, touched)
        if _IMPORT_NAME in code.co_code:  # a cheap filter before disassembling
            for ins in dis.get_instructions(code):
                if ins.opname == "IMPORT_NAME" and isinstance(ins.argval, str):
                    _add_module_chain(ins.argval, reads)

    def _name_sites(
        self,
        name: str,
        obj: Any,
        names: frozenset[str],
        code: types.CodeType,
        reads: set[str],
        touched: set[str],
    ) -> None:
        if isinstance(obj, types.ModuleType):
            mod = obj.__name__
            if mod == "random":
                _both("<random>", reads, touched)
            elif mod in _DECIMAL_MODULES:
                _both("<decimal>", reads, touched)
            elif mod in _WARNINGS_MODULES:
                _both("<warnings>", reads, touched)
            elif mod == "pytest":
                if names & {"warns", "deprecated_call"}:
                    reads.add("<warnings>")
            elif mod == "sys":
                if "modules" in names:
                    mods = [c for c in code.co_consts if isinstance(c, str) and _is_modname(c)]
                    if mods:
                        for m in mods:
                            _both("<sys.modules>:" + m, reads, touched)
                    else:
                        _both("<sys.modules>", reads, touched)
                if "path" in names:
                    _both("<sys.path>", reads, touched)
            elif mod in ("os", "posix", "nt", "os.path", "posixpath", "ntpath", "pathlib"):
                hit = names & _CWD_NAMES
                if hit:
                    reads.add("<cwd>")
                    if "chdir" in hit:
                        touched.add("<cwd>")
            elif not self.is_project_module(obj) and mod.partition(".")[0] not in _NO_ATTR_MODULES:
                d = obj.__dict__
                for attr in names:
                    if attr != name and attr in d and not attr.startswith("__"):
                        _both(f"{mod}:{attr}", reads, touched)
            return
        owner = getattr(obj, "__self__", None)
        if owner is not None and type(owner).__module__ == "random" and isinstance(owner, _Random):
            _both("<random>", reads, touched)
            return
        modname = getattr(obj, "__module__", None)
        if modname in _DECIMAL_MODULES:
            _both("<decimal>", reads, touched)
        elif modname in _WARNINGS_MODULES:
            _both("<warnings>", reads, touched)
        elif modname in ("posix", "nt") and name in _CWD_NAMES:
            reads.add("<cwd>")
        elif obj is _Path or (isinstance(obj, type) and issubclass(obj, _PurePath)):
            if names & _CWD_NAMES:
                reads.add("<cwd>")
        elif name == "__import__":
            reads.add("<sys.modules>")


_MISSING: Final = object()
_IMPORT_NAME: Final = bytes([dis.opmap["IMPORT_NAME"]])

import pathlib as _pathlib  # noqa: E402  (after the constants that shadow nothing)
import random as _random_mod  # noqa: E402

_Path: Final = _pathlib.Path
_PurePath: Final = _pathlib.PurePath
_Random: Final = _random_mod.Random


def _both(site: str, reads: set[str], touched: set[str]) -> None:
    reads.add(site)
    touched.add(site)


def _add_module_chain(name: str, reads: set[str]) -> None:
    reads.add("<sys.modules>:" + name)


# ------------------------------------------------------------------------ stdlib hooks


def _first_arg(frame: types.FrameType) -> object:
    code = frame.f_code
    if not code.co_argcount:
        return None
    return frame.f_locals.get(code.co_varnames[0])


def build_hooks(rec: Recorder) -> dict[types.CodeType, TraceHook]:
    """Code objects of stdlib functions whose arguments name what is read."""
    hooks: dict[types.CodeType, TraceHook] = {}
    reads = rec  # the hooks below add to rec.reads / rec.touched, looked up per call

    def logger_read(frame: types.FrameType) -> None:
        lg = frame.f_locals.get("self")
        name = getattr(lg, "name", None)
        if isinstance(name, str):
            reads.reads.update(logger_sites(name))

    def logger_write(frame: types.FrameType) -> None:
        lg = frame.f_locals.get("self")
        name = getattr(lg, "name", None)
        if isinstance(name, str):
            reads.touched.add("<logging>:" + name)

    def path_read(frame: types.FrameType) -> None:
        found = file_site(_first_arg(frame))
        if found is not None:
            reads.reads.add(found[0])
            if found[1]:
                reads.reads.add("<cwd>")

    def cwd_if_relative(frame: types.FrameType) -> None:
        arg = _first_arg(frame)
        try:
            p = _fspath(arg)  # type: ignore[call-overload]
        except TypeError:
            return
        if isinstance(p, (str, bytes)) and not os.path.isabs(p):
            reads.reads.add("<cwd>")

    def cwd_read(frame: types.FrameType) -> None:
        reads.reads.add("<cwd>")

    def import_module(frame: types.FrameType) -> None:
        name = frame.f_locals.get("name")
        if isinstance(name, str) and not name.startswith("."):
            reads.reads.add("<sys.modules>:" + name)
            reads.reads.add("<sys.path>")

    def add(fn: object, hook: TraceHook) -> None:
        code = getattr(fn, "__code__", None)
        if isinstance(code, types.CodeType):
            hooks[code] = hook

    for meth in ("isEnabledFor", "getEffectiveLevel", "callHandlers"):
        add(getattr(logging.Logger, meth, None), logger_read)
    for meth in ("setLevel", "addHandler", "removeHandler", "addFilter", "removeFilter"):
        add(getattr(logging.Logger, meth, None), logger_write)
    for fn in (os.path.exists, os.path.isfile, os.path.isdir, os.path.lexists,
               os.path.getsize, os.path.getmtime, os.path.islink):
        add(fn, path_read)
    add(_pathlib.Path.stat, path_read)
    add(getattr(_pathlib.Path, "exists", None), path_read)
    for fn in (os.path.abspath, os.path.realpath, os.path.relpath):
        add(fn, cwd_if_relative)
    add(getattr(_pathlib.Path.cwd, "__func__", None), cwd_read)
    add(getattr(_pathlib.Path, "absolute", None), cwd_read)
    add(getattr(_pathlib.Path, "resolve", None), cwd_read)
    add(importlib.import_module, import_module)
    return hooks


# --------------------------------------------------------------------------- backends


class Backend(Protocol):
    """Reports code objects that start running while started."""

    name: str

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def new_test(self) -> None: ...

    def close(self) -> None: ...


Classify = Callable[[types.CodeType, dict[str, Any]], "CodeInfo | None"]


class SettraceBackend:
    """Call-only ``sys.settrace`` function: no line events, returns None for every frame."""

    name = "settrace"

    def __init__(self, rec: Recorder, classify: Classify, hooks: dict[types.CodeType, TraceHook]):
        known: dict[types.CodeType, Any] = dict(hooks)
        known_get = known.get
        infos_add = rec.infos.add
        missing = _MISSING

        def tracer(frame: types.FrameType, event: str, arg: object) -> None:
            code = frame.f_code
            got = known_get(code, missing)
            if got is None:
                return None
            if got is missing:
                got = known[code] = classify(code, frame.f_globals)
                if got is None:
                    return None
            if got.__class__ is CodeInfo:
                infos_add(got)
            else:
                got(frame)
            return None

        self._tracer = tracer
        self._prev: Any = None

    def start(self) -> None:
        prev = sys.gettrace()
        if prev is not None and prev is not self._tracer:
            # Someone else (a debugger, coverage) traces: leave them alone rather than
            # silently switching off their tool; reads then come from the other sources.
            self._prev = prev
            return
        self._prev = None
        sys.settrace(self._tracer)
        threading.settrace(self._tracer)

    def stop(self) -> None:
        if self._prev is None and sys.gettrace() is self._tracer:
            sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]

    def new_test(self) -> None:
        pass

    def close(self) -> None:
        self.stop()


class MonitoringBackend:
    """``sys.monitoring`` PY_START events (Python >= 3.12) under our own tool id.

    Each code object reports once per test: the callback returns DISABLE, and
    ``restart_events()`` re-arms them when the next test begins.  The hooked stdlib
    functions keep reporting (their arguments differ call by call).
    """

    name = "sys.monitoring"

    def __init__(self, rec: Recorder, classify: Classify, hooks: dict[types.CodeType, TraceHook]):
        mon: Any = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        self._mon = mon
        self.tool = -1
        for tool in (4, 3, 2, 5):
            if mon.get_tool(tool) is None:
                self.tool = tool
                break
        if self.tool < 0:
            raise RuntimeError("no free sys.monitoring tool id")
        mon.use_tool_id(self.tool, "isolator-deps")
        known: dict[types.CodeType, Any] = dict(hooks)
        known_get = known.get
        infos_add = rec.infos.add
        missing = _MISSING
        disable = mon.DISABLE
        getframe = sys._getframe

        def on_start(code: types.CodeType, offset: int) -> Any:
            got = known_get(code, missing)
            if got is None:
                return disable
            if got is missing:
                got = known[code] = classify(code, getframe(1).f_globals)
                if got is None:
                    return disable
            if got.__class__ is CodeInfo:
                infos_add(got)
                return disable
            got(getframe(1))
            return None

        mon.register_callback(self.tool, mon.events.PY_START, on_start)
        self._event = mon.events.PY_START
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
        self._mon.restart_events()

    def close(self) -> None:
        self.stop()
        self._mon.register_callback(self.tool, self._event, None)
        self._mon.free_tool_id(self.tool)


def make_backend(
    rec: Recorder,
    classify: Classify,
    hooks: dict[types.CodeType, TraceHook],
    prefer: str = "auto",
) -> Backend:
    """The one place a backend is chosen: sys.monitoring on >= 3.12, settrace below."""
    if prefer != "settrace" and sys.version_info >= (3, 12):
        try:
            return MonitoringBackend(rec, classify, hooks)
        except (RuntimeError, ValueError):
            pass
    return SettraceBackend(rec, classify, hooks)


# ---------------------------------------------------------------- environment and audit


class _TrackedEnviron(os._Environ):  # type: ignore[type-arg]
    """``os.environ`` with key lookups noted while a test is being recorded."""

    __slots__ = ()

    def __getitem__(self, key: Any) -> Any:
        rec = _CURRENT
        if rec is not None and rec.active and not _from_isolator():
            rec.reads.add("<env>:" + _env_name(key))
        return super().__getitem__(key)

    def __iter__(self) -> Any:
        rec = _CURRENT
        if rec is not None and rec.active and not _from_isolator():
            rec.reads.add("<env>")
        return super().__iter__()

    def __setitem__(self, key: Any, value: Any) -> None:
        rec = _CURRENT
        if rec is not None and rec.active:
            rec.touched.add("<env>:" + _env_name(key))
        super().__setitem__(key, value)

    def __delitem__(self, key: Any) -> None:
        rec = _CURRENT
        if rec is not None and rec.active:
            rec.touched.add("<env>:" + _env_name(key))
        super().__delitem__(key)


def _env_name(key: Any) -> str:
    return os.fsdecode(key) if isinstance(key, bytes) else str(key)


_SKIP_FILES: Final = (os.__file__, getattr(sys.modules.get("_collections_abc"), "__file__", ""))


def _from_isolator() -> bool:
    """True if isolator's own code (the resetter's snapshots) is the one reading."""
    f: types.FrameType | None = sys._getframe(2)
    while f is not None and f.f_code.co_filename in _SKIP_FILES:
        f = f.f_back
    return f is not None and f.f_code.co_filename.startswith(_ISOLATOR_DIR)


_WRITE_FLAGS: Final = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_CURRENT: Recorder | None = None
_AUDIT_INSTALLED = False
_READ_PATH_EVENTS: Final = {"os.listdir": 0, "os.scandir": 0, "glob.glob": 0}
_WRITE_PATH_EVENTS: Final = {
    "os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,), "os.truncate": (0,),
    "os.rename": (0, 1), "os.link": (1,), "os.symlink": (1,), "shutil.rmtree": (0,),
    "shutil.move": (0, 1), "shutil.copyfile": (1,), "os.chmod": (0,), "os.utime": (0,),
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
            rec.touched.add(site)
        return
    if event == "import":
        name = args[0]
        if isinstance(name, str):
            rec.reads.add("<sys.modules>:" + name)
            rec.reads.add("<sys.path>")
        return
    if event == "os.chdir":
        rec.touched.add("<cwd>")
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
                    rec.touched.add(found[0])
                    if found[1]:
                        rec.reads.add("<cwd>")


# --------------------------------------------------------------------------- the facade


class TestReads(NamedTuple):
    """What one test read, and what it may have written (gross), as site sets."""

    reads: frozenset[str]
    touched: frozenset[str]


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
        self.hooks = build_hooks(self.rec)
        self.backend: Backend = make_backend(
            self.rec, self.classifier.classify, self.hooks, prefer
        )
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

    def begin_test(self) -> None:
        self.rec.clear()
        self.backend.new_test()

    def resume(self) -> None:
        self.rec.active = True
        self.backend.start()

    def pause(self) -> None:
        self.backend.stop()
        self.rec.active = False

    def end_test(self) -> TestReads:
        self.pause()
        reads: set[str] = set(self.rec.reads)
        touched: set[str] = set(self.rec.touched)
        for info in self.rec.infos:
            reads.update(info.reads)
            touched.update(info.touched)
        return TestReads(frozenset(reads), frozenset(touched))

    def close(self) -> None:
        global _CURRENT
        self.pause()
        self.backend.close()
        for env in self._envs:
            if type(env) is _TrackedEnviron:
                env.__class__ = os._Environ  # type: ignore[assignment]
        self._envs.clear()
        if _CURRENT is self.rec:
            _CURRENT = None
        self._installed = False


def static_by_filename(states: Mapping[str, Any] | Iterable[Any]) -> dict[str, StaticAccess]:
    """Index the static pass's ``{modname: ModuleState}`` by absolute file name."""
    values = states.values() if isinstance(states, Mapping) else states
    out: dict[str, StaticAccess] = {}
    for st in values:
        fn: object = getattr(st, "filename", None)
        if isinstance(fn, str) and fn:
            out[_abspath(fn)] = st
    return out
