"""The resetter: the baseline, what a test dirtied, and putting it back.

One :class:`Resetter` lives for the session.  Its *baseline* is module state right after
collection plus what higher-scoped fixtures set up; those fixtures push a *frame* when
their setup changes state, and pop it at their teardown, so that legitimate shared state
lives exactly as long as the fixture that made it::

    frames: [Frame(fixture key, table, probe snapshots, sys.modules snapshot, undo entries,
                   file entries), ...]
"""

from __future__ import annotations

import _thread
import ast
import enum
import fnmatch
import functools
import gc
import itertools
import operator
import os
import re
import sys
import threading
import time
import types
import warnings
import weakref
from collections import Counter
from collections.abc import Callable
from typing import Any, Final

from isolator import _aliases, _modules, _process
from isolator._classes import CACHE_NAMES
from isolator._files import FileGuard, remove_empty_dir
from isolator._process import (
    LEFT_AS_IS,
    UNRESTORABLE,
    Probe,
    default_probes,
    fast_check,
    limits_settled,
    live_children,
)
from isolator._reach import Reach, Scope, imports_of
from isolator._same import same_value
from isolator._sites import sites_overlap
from isolator._state import (
    _EMPTY,
    _MAPPING_KINDS,
    _MAX_WATCHES_PER_MODULE,
    _SKIP_NAMES,
    ALL_KINDS,
    CLASS,
    DEQUE,
    DICT,
    LIST,
    LIVES,
    MODULE,
    SET,
    SLOTS,
    TAGS,
    SeenBeside,
    StateTable,
    _cell_get,
    _diff_keys,
    _differs,
    as_read,
    cache_dict,
    key_repr,
    leave_entered_context,
    moved_entries,
    nested_code,
)
from isolator._tasks import TaskWatch

_ISOLATOR_DIR = os.path.dirname(os.path.abspath(__file__))
# Our own reference, for what runs inside a test's own calls (an import): a test may
# replace os.path.abspath (a checker of blocking calls that raises while a loop runs).
_abspath: Final = os.path.abspath


def _monotonic(clock: Callable[[], float] = time.monotonic) -> float:
    """The original ``time.monotonic``: a test may leave time frozen.  Held as a default,
    not as a module global: freezegun's ``start()`` rebinds every module global that is
    the real clock, ours too, and a freeze left on would stop this one for good."""
    return clock()


# Fixture values never walked for state: immutable atoms and the runner's own objects.
_UNWATCHED_VALUES: Final = frozenset({str, bytes, int, float, bool, complex, tuple, frozenset})
# A dict entry recomputed different this many times is not taken for a memo entry.
_MEMO_MISSES = 3
_REBUILT_KEYS = 10_000  # dict entries counted as added again by tests (see Resetter.rebuilt)
_PLAIN_KEYS: Final = (str, int, bytes)
_DEFINED: Final = (type, types.FunctionType)
_MEMO_CANDIDATES = 32  # values a dict holds for comparing before an entry of it is learned
# Watches the values of learned memo entries may add over a run: a tag read or a
# comparison after every test each (see Resetter._affordable).
_KEPT_WATCHES = 50_000
# Names that code with effects beside a memo entry uses: warnings, logging, output,
# registrations (see Resetter._effects).
_EFFECT_NAMES: Final = frozenset(
    {
        "warn", "warn_explicit", "showwarning", "print", "log", "debug", "info", "warning",
        "error", "exception", "critical", "addHandler", "register", "write", "writelines",
    }
)  # fmt: skip
# Values that say only "done" or count (a "seen" registry, a call counter): not the
# result of a computation worth keeping, and keeping one changes what later tests see.
_FLAG_TYPES: Final = (bool, int, type(None))
# Names of the process's changing state: a function using one is no pure memo function.
_IMPURE_NAMES: Final = frozenset(
    {
        "environ", "getenv", "getcwd", "cwd", "open", "read_text", "read_bytes", "exists",
        "is_file", "is_dir", "listdir", "scandir", "iterdir", "glob", "stat", "walk",
        "time", "time_ns", "monotonic", "perf_counter", "now", "utcnow", "today",
        "random", "randint", "choice", "shuffle", "uuid1", "uuid4", "urandom", "argv",
        "stdin", "input", "getpid", "getlocale", "setlocale", "modules", "path",
        "global_settings", "settings", "config", "get_config",
    }
)  # fmt: skip
_PURE_DEPTH: Final = 3
# typing's memoized functions that make aliases of user generic classes (``Box[int]``,
# ``Pair[T, int][str]``): 3.10-3.11, then 3.12+.
_ALIAS_CACHES: Final = frozenset(
    {"Generic.__class_getitem__", "_generic_class_getitem", "_GenericAlias.__getitem__"}
)
# Names of the environment's variables (see Resetter._reads_env).
_ENV_NAMES: Final = frozenset({"environ", "getenv", "environb", "getenvb"})


def _always() -> bool:
    return True


def _compiled_from(old: object, new: object) -> bool:
    """Whether ``new`` is a regular expression compiled from ``old``, its source."""
    return (
        isinstance(new, re.Pattern)
        and type(old) in (str, bytes)
        and type(new.pattern) is type(old)
        and new.pattern == old
    )


_LIB_MARKERS = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)


class Outcome:
    """What one check found: the net writes, what was put back and what could not be."""

    __slots__ = ("writes", "reset", "unrestorable", "child_files", "garbage")

    def __init__(self) -> None:
        self.writes: list[str] = []
        self.reset: list[str] = []
        self.unrestorable: list[tuple[str, str]] = []
        # Files a child process of the test created, changed or deleted: (path, which).
        # Not put back (no original was kept) and not forked for (a fork would not see
        # them either): reported.
        self.child_files: list[tuple[str, str]] = []
        # The ResourceWarnings of what the test left open in its garbage, collected right
        # after it (see free_dropped): reported, as no later test gets them.
        self.garbage: list[str] = []


class ChainMarks:
    """What differed from the baseline before a higher-scoped fixture's set-up in a test
    that got an earlier test's state (see Resetter.chain_marks): per (table, watch), a
    mapping's changed keys and their values then, or a copy of the object; per (table,
    cell), its value then; per module name changed in sys.modules, its entry then."""

    __slots__ = ("watches", "cells", "modules")

    def __init__(
        self,
        watches: dict[tuple[str, int], Any],
        cells: dict[tuple[str, int], object],
        modules: dict[str, object],
    ):
        self.watches = watches
        self.cells = cells
        self.modules = modules


_MISSING: Final = object()


def _cell_value(t: StateTable, j: int) -> object:
    return _cell_get(t.cells[j][1])


class Frame:
    """What one higher-scoped fixture changed in the baseline, as per-watch deltas, so that
    its teardown reverts exactly that and nothing a later (longer-lived) fixture set up.

    ``tables``: (table, watch index, kind, {key: (old, new)} or old snapshot); ``extras``:
    (table, what, index, old); ``probes``: (probe index, {site: (old, new)} or old
    snapshot).  Watches are named by table and index, never by site: the elements of a
    list share their container's site name, so a name does not pick one watch out.
    """

    __slots__ = (
        "key", "tables", "extras", "probes", "modules", "undo", "files", "threads",
        "children", "fd",
    )  # fmt: skip

    def __init__(
        self,
        key: int,
        modules: dict[str, tuple[object, object]],
        undo: list[tuple[Any, str, object]],
        files: list[tuple[str, str, str]],
    ) -> None:
        self.key = key
        self.tables: list[tuple[StateTable, int, int, Any]] = []
        self.extras: list[tuple[StateTable, str, int, Any]] = []
        self.probes: list[tuple[int, Any]] = []
        self.modules = modules  # sys.modules names the fixture set: name -> (old, new)
        self.undo = undo
        self.files = files
        # Threads and child processes the fixture started (a server): baseline while it lives.
        self.threads: set[threading.Thread] = set()
        self.children: dict[int, str] = {}
        # The lowest free descriptor when the test that set the fixture up began: what its
        # teardown's reset drops (a policy with its loop) was opened at or above it.
        self.fd = -1


def _owner(t: StateTable, site: str) -> str:
    """The site of the object that holds ``site``'s container (``m:a.b`` for ``m:a.b._map``
    or ``m:a.b['k']``): the longest prefix of ``site`` that the table watches, cut at an
    attribute dot or a key bracket (keys may hold either); else the module, ``m:``."""
    sites = t.site_set()
    module_end = site.find(":") + 1
    for pos in range(len(site) - 1, module_end, -1):
        if site[pos] in ".[" and site[:pos] in sites:
            return site[:pos]
    return site[:module_end]


_LEFT: Final = "left as the test left it, beside state that cannot be copied"


_STABLE_ATOMS: Final = (str, bytes, int, float, bool, type(None))


_OWN_DIRS: Final = (_ISOLATOR_DIR, os.path.join(_ISOLATOR_DIR, "analysis"))


def _py_files(directory: str) -> list[str]:
    try:
        return [f for f in os.listdir(directory) if f.endswith(".py")]
    except OSError:
        return []


@functools.lru_cache(maxsize=1024)
def _names_used(code: types.CodeType) -> frozenset[str]:
    """The global and attribute names a code object and the code nested in it use."""
    return frozenset(itertools.chain.from_iterable(c.co_names for c in nested_code(code)))


def _through_modules(site: str) -> str:
    """A site named through a module's attribute that is a submodule, named from that
    submodule (``pkg:mod.NAME[...]`` -> ``pkg.mod:NAME[...]``: how a test module that did
    ``from pkg import mod`` writes ``mod.NAME``)."""
    owner, _, path = site.partition(":")
    while True:
        m = _LEADING_NAME.match(path)
        if m is None or not m[2].startswith((".", "[")):
            return f"{owner}:{path}"
        sub = f"{owner}.{m[1]}"
        if not isinstance(sys.modules.get(sub), types.ModuleType):
            return f"{owner}:{path}"
        owner, path = sub, m[2].removeprefix(".")


_LEADING_NAME: Final = re.compile(r"([A-Za-z_]\w*)(.*)", re.S)


def _last_name(site: str) -> str:
    """The last name on a site's path (``_cache`` of ``pkg.mod:Reg._cache['k']``): code
    that uses the site names it in its source."""
    names = re.findall(r"[A-Za-z_]\w*", re.sub(r"\[[^\]]*\]", "", site.partition(":")[2]))
    return names[-1] if names else ""


def _call_name(site: str, key: object) -> str:
    """How the summary names a functools cache entry: the call it memoizes."""
    return f"{site}({key_repr(key)})"


def _stable_repr(key: object, depth: int = 0) -> str | None:
    """A name of ``key`` that names the same key in another process, else None: its
    ``repr`` for atoms, enum members such as ``re.DOTALL`` and tuples of them (no
    addresses); for tuples and frozensets holding tuples or frozensets of them, the same
    made of its items' names, a frozenset's in sorted order (not its hash order, which
    differs between processes: html5lib's pattern memo is keyed by sets of characters)."""
    if _stable_atom(key) or (type(key) is tuple and all(map(_stable_atom, key))):
        return repr(key)
    kind = type(key)
    if (kind is not tuple and kind is not frozenset) or depth >= _STABLE_DEPTH:
        return None
    names = [_stable_repr(item, depth + 1) for item in key]  # type: ignore[attr-defined]
    if None in names:
        return None
    if kind is frozenset:
        return f"frozenset({{{', '.join(sorted(names))}}})" if names else "frozenset()"  # type: ignore[arg-type]
    return f"({names[0]},)" if len(names) == 1 else f"({', '.join(names)})"  # type: ignore[arg-type]


# How deep tuples and frozensets nest in a key that gets a name (_stable_repr).
_STABLE_DEPTH: Final = 4


def _stable_atom(x: object) -> bool:
    if type(x) in _STABLE_ATOMS:
        return True
    # (mako's pattern cache is keyed by a pattern and its re flags; urllib.parse's by
    # the types of its arguments.)
    if type(x) is type:
        return x.__module__ == "builtins"
    return isinstance(x, enum.Enum) and "0x" not in repr(x)


def _multiprocessing_helpers(unloaded: dict[str, types.ModuleType]) -> set[int]:
    """multiprocessing's resource tracker and fork server: started on first use and kept
    by design for the life of the process that started them (a fresh process for each
    test would have its own), so not a process a test left running.  Their modules may
    be unloaded since (``unloaded``: name -> the module as the test left it)."""
    pids: set[int] = set()
    mods = sys.modules
    for modname, holder, attr in (
        ("multiprocessing.resource_tracker", "_resource_tracker", "_pid"),
        ("multiprocessing.forkserver", "_forkserver", "_forkserver_pid"),
    ):
        mod = mods.get(modname) or unloaded.get(modname)
        pid = getattr(getattr(mod, holder, None), attr, None) if mod is not None else None
        if type(pid) is int:
            pids.add(pid)
    return pids


class _StateRef:
    """The process-wide state at one moment, as probe snapshots (equal only to itself)."""

    __slots__ = ("snaps",)

    def __init__(self, snaps: list[Any]):
        self.snaps = snaps


def settle_gc() -> None:
    """Move the baseline's new objects straight into the oldest GC generation.

    The snapshots are thousands of new long-lived objects. Promoted by ordinary young
    collections, they would count towards the next full collection and bring on one that
    plain pytest never runs (a full collection of a big heap costs 20 ms or more). Freezing
    and at once unfreezing moves every young object into the oldest generation without a
    collection and without that count; nothing is hidden from ``gc.get_objects()``
    afterwards. When something else already froze objects, unfreezing would undo that
    freeze, so the objects are left where they are. (CPython 3.12.1 reports a non-zero
    freeze count with nothing frozen; there the objects are left where they are too.)
    """
    if gc.get_freeze_count():
        return
    gc.freeze()
    gc.unfreeze()


def lowest_free_fd() -> int:
    """The descriptor the next open would get (the lowest free one: POSIX hands those out
    in order); -1 where it cannot be told.  Two system calls, under a microsecond: read
    before and after each test, where listing the open descriptors costs about 8 us."""
    try:
        fd = os.dup(2)
    except OSError:
        return -1
    os.close(fd)
    return fd


def free_dropped(fd: int, full: bool = True) -> tuple[list[str], bool]:
    """Free the garbage that holds descriptors opened during the test (the lowest free one
    is above ``fd``, as before the test), without letting the ResourceWarning each gives
    when freed open reach a later test.

    An event loop a put-back global held (a policy made during the test) is garbage in a
    cycle once the reset drops it; so is a socket a failed test's traceback held.
    Collected during a later test, its warnings land there (an error under
    ``filterwarnings = error``), where a fresh process keeps them until it exits.  A young
    collection first: a full one (if ``full``) of a big heap costs 20 ms or more, paid
    only when the young one left the descriptors open.

    Returns the messages of the ResourceWarnings (other warnings are issued again as
    they came) and whether a full collection ran and freed none of the descriptors.
    """
    fruitless = [False]

    def collect() -> None:
        gc.collect(1)
        if full:
            low = lowest_free_fd()
            if low > fd:
                gc.collect()
                fruitless[0] = lowest_free_fd() == low

    return quietly(collect), fruitless[0]


def _unraisable_into(messages: list[str]) -> Callable[[Any], None]:
    """A ``sys.unraisablehook`` that adds a line for each exception to ``messages``."""

    def unraisable(u: Any) -> None:
        what = getattr(u.exc_type, "__name__", "exception")
        where = f" in {u.object!r}" if u.object is not None else ""
        messages.append(f"{what} raised{where} while freed: {u.exc_value}")

    return unraisable


def quietly(free: Callable[[], None]) -> list[str]:
    """Run ``free`` (which frees objects), keeping the ResourceWarnings of what it frees
    from the warning filters: their messages are returned.  Other warnings are issued
    again as they came.  So are the exceptions its finalizers raise (``__del__``, a
    coroutine closed mid-``await``): through ``sys.unraisablehook`` they reached pytest,
    which reports them in the next test's phase (an error under ``filterwarnings =
    error``), where the test alone in a fresh process never sees them."""
    messages: list[str] = []
    hook = sys.unraisablehook
    sys.unraisablehook = _unraisable_into(messages)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            free()
    finally:
        sys.unraisablehook = hook
    for w in caught:
        if issubclass(w.category, ResourceWarning):
            messages.append(str(w.message))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
    return messages


_LAST_EXCEPTION: Final = ("last_exc", "last_type", "last_value", "last_traceback")
_SYS_DICT: Final = sys.__dict__


def _forget_last_exception() -> None:
    """Drop a failed test's exception from sys, and collect the young garbage it was the
    last to hold (its frames and traceback, made as the test failed, are in cycles): the
    descriptor probe misses a socket those frames hold when the test also closed an
    older descriptor, whose number the socket took."""
    for name in _LAST_EXCEPTION:
        _SYS_DICT.pop(name, None)
    gc.collect(1)


def _join_all(threads: list[threading.Thread], timeout: float) -> None:
    """Wait up to ``timeout`` in all for the threads to end (not ``timeout`` each: a test
    that leaves ten pool workers idle would cost half a second a test)."""
    deadline = _monotonic() + timeout
    for th in threads:
        left = deadline - _monotonic()
        if left <= 0:
            break
        th.join(left)


def _refused(exc: BaseException) -> str:
    return f"putting it back raised {type(exc).__name__}: {exc}"


def _root(site: str) -> str:
    """The module global a site hangs from: ``m:name`` of ``m:name.attr[key]``."""
    mod, _, rest = site.partition(":")
    for i, c in enumerate(rest):
        if c in ".[":
            return f"{mod}:{rest[:i]}"
    return site


def _revert(snap: dict[Any, Any], delta: dict[Any, tuple[object, object]]) -> None:
    """Take a fixture's ``{key: (old, new)}`` out of a snapshot: each key still bound to
    what the fixture set goes back to what it was (a later fixture's value is left)."""
    for k, (old, new) in delta.items():
        if snap.get(k, _EMPTY) is not new:
            continue
        if old is _EMPTY:
            snap.pop(k, None)
        else:
            snap[k] = old


def _effect_calls(tree: ast.Module) -> dict[tuple[int, str], bool]:
    """(first line, name) of each function of a module -> whether its body calls one of
    ``_EFFECT_NAMES`` (``print(...)``, ``logger.info(...)``, ``warnings.warn(...)``), or
    hands one on as a value; an attribute only read (``self.info["name"]``) is none."""
    out: dict[tuple[int, str], bool] = {}
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        first = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
        called = False
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and node.id in _EFFECT_NAMES:
                called = True  # print, a logging function imported by name, warn
            elif isinstance(node, ast.Call):
                f = node.func
                called = isinstance(f, ast.Attribute) and f.attr in _EFFECT_NAMES
            if called:
                break
        key = (first, fn.name)
        out[key] = out.get(key, False) or called
    return out


def _learn_class_caches(t: StateTable, i: int, keys: list[Any] | None) -> list[Any] | None:
    """Names among ``keys`` that library code adds to a class on first use, from the class
    alone (copyreg's ``__slotnames__``, set by the first copy or pickle of an instance),
    join the baseline snapshot of class watch ``i``: putting them back would only make
    every later test compute them again, the same.  Returns the other keys."""
    if not keys or CACHE_NAMES.isdisjoint(keys):
        return keys
    live, snap = t.lives[i], t.snaps[i]
    left = []
    for k in keys:
        if k in CACHE_NAMES and k not in snap and k in live:
            snap[k] = live[k]
        else:
            left.append(k)
    return left


def _dirty_sibling(
    t: StateTable,
    i: int,
    idx: list[int],
    extras: tuple[list[int], ...],
    names: dict[int, list[str]],
    related: Callable[[str, list[str]], bool],
) -> bool:
    """Whether the test also changed another part of the object that holds watch ``i``
    (an LRU cache's queue beside its dict, a hit counter beside a memo): entries added to
    the dict are kept only when nothing beside them changed, since the rest is reset.
    ``names``: the sites of the names that changed in the module namespaces of ``idx``
    put back already (bookkeeping names left out); the others are compared now.  When the
    holder is a module, only what ``related`` says the memo's own writers also write
    counts: two globals of a module are as independent as two modules' unless one
    function keeps both."""
    owner = _owner(t, t.sites[i])
    sites: list[str] = []
    for j in idx:
        if j != i:
            if t.kinds[j] != MODULE and t.kinds[j] != CLASS:
                sites.append(t.sites[j])
                continue
            got = names.get(j)  # put back already: the names it had changed
            sites += t.changed_sites(j) if got is None else got
    caches, cells, defaults, opaque = extras
    sites += [t.caches[j][0] for j in caches] + [t.cells[j][0] for j in cells]
    sites += [t.defaults[j][0] for j in defaults] + [t.opaque[j].site for j in opaque]
    if owner.endswith(":"):
        beside = [s for s in sites if s.startswith(owner)]
        return bool(beside) and related(t.sites[i], beside)
    beside = [s for s in sites if s == owner or s.startswith((owner + ".", owner + "["))]
    if beside and _is_class_site(t, owner):
        # A class holding several memo caches (dateparser's Dictionary): as for a module,
        # only what the memo's own writers also write counts.
        return related(t.sites[i], beside)
    return bool(beside)


def _is_class_site(t: StateTable, site: str) -> bool:
    for j, s in enumerate(t.sites):
        if s == site:
            return t.kinds[j] == CLASS
    return False


class Resetter:
    """Baseline keeper for one session (see the module docstring)."""

    def __init__(
        self,
        rootdir: str,
        backup_dir: str,
        exempt_dirs: list[str],
        track: tuple[str, ...] = (),
        exclude: tuple[str, ...] = (),
        learn_memo: bool = True,
        keep: tuple[str, ...] = (),
    ):
        self.rootdir = os.path.join(os.path.abspath(rootdir), "")
        self.track = track
        self.exclude = exclude
        self._track_names = frozenset(track)
        self._track_prefixes = tuple(t + "." for t in track)
        self._exclude_names = frozenset(exclude)
        self._exclude_prefixes = tuple(t + "." for t in exclude)
        self.probes: list[Probe] = default_probes()
        self._warnings_index = [p.name for p in self.probes].index("<warnings>")
        self._interp_index = [p.name for p in self.probes].index("<interpreter>")
        self._probes_clean = fast_check(self.probes)
        self.files = FileGuard(backup_dir, exempt_dirs)  # its audit hook: from start() on
        if os.path.dirname(self.rootdir.rstrip(os.sep)) != self.rootdir.rstrip(os.sep):
            self.files.scan_roots = (self.rootdir.rstrip(os.sep),)  # (never the whole disk)
        self.tables: dict[str, StateTable] = {}
        self.reach = Reach(self.tables)
        self.probe_snaps: list[Any] = []
        self._import_ref: _StateRef | None = None  # see _process_state
        self.modules: _modules.ModulesProbe  # the sys.modules baseline, made by start()
        self.started = False
        self.project: set[str] = set()
        self.test_code: set[str] = set()  # set by start()
        self.test_modules: set[str] = set()  # (test_code without the conftests)
        # Bounded memo caches emptied with entries from the baseline (site, how many).
        self.emptied: list[tuple[str, int]] = []
        # Modules brought back as an earlier test's import left them, where executing
        # them again failed -> why (see UnloadedFinder.bring_back_earlier).
        self.came_back: dict[str, str] = {}
        # Library packages whose own code the tests left bound in other modules (a patcher
        # such as freezegun): package -> the sites put back (see _note_patchers).
        self.patchers: dict[str, list[str]] = {}
        # Memo sites not learned because code reads them itself (see _observed), once an
        # entry was recomputed the same, in the order found: the summary names them, with
        # what `keep` would do.
        self.observed_memos: dict[str, None] = {}
        # Memo caches not learned because their functions read the process's changing
        # state (files, the environment, clocks) or show something (warn, log, print).
        self.impure_memos: dict[str, None] = {}
        self._observed_pending: dict[str, None] = {}  # not learned, not yet recomputed
        # Dict memos that only test modules read themselves: site -> those modules.  Their
        # entries are learned, and hidden from the tests of those modules (begin_test).
        self._read_by_tests: dict[str, set[str]] = {}
        # Learned entries of those dicts: site -> (the dict, its learned keys).
        self._learned: dict[str, tuple[Any, set[Any]]] = {}
        # Names of the project modules whose first import took a snapshot of their state
        # (see _module_snapshot): the only ones _project_snapshots looks at.
        self._snapshotted: set[str] = set()
        # The tables' distinct sets of watched objects, for the tables they were read from.
        self._seen_sets: tuple[object, list[set[int]]] = (None, [])
        # For _watched_ids: the ids, and how many of each table's watches they hold.
        self._live_ids: set[int] = set()
        self._live_counts: dict[StateTable, int] = {}
        self.swapped: list[types.ModuleType] = []
        self.frames: list[Frame] = []
        self.threads: set[threading.Thread] = set()
        self.children: dict[int, str] = {}  # running child processes (pid -> command)
        self.thread_count = 0  # _thread._count() when self.threads was taken
        self.tasks: TaskWatch | None = None  # asyncio tasks pending at the baseline
        self.fd = -1  # the lowest free descriptor at the start of the test (free_dropped)
        # The lowest of those of the fixtures torn down since the last check (-1: none).
        self.popped_fd = -1
        self.fruitless = 0  # full collections in a row that freed no descriptor
        # What finalizers raise during the reset (see check_and_reset), through this hook.
        self._caught: list[str] = []
        self._own_hook = _unraisable_into(self._caught)
        # sys.last_value at the baseline (None: unset), kept there (see check_and_reset).
        self.last_value: object = sys.__dict__.get("last_value", None)
        # Threads tests left running (reported): see threads_left_running.
        self.leaked: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
        # Threads the test being checked left running (ids): see check_and_reset.
        self._held: set[int] = set()
        self._last_scope: tuple[object, str, Scope | None] = (None, "", None)
        # Higher-scoped fixtures' values that hold state: fixture key -> table key.
        self._value_tables: dict[int, str] = {}
        self._reset_counts: Counter[str] = Counter()
        # The sites reset since the counts were last brought up to date: counted in
        # batches (Counter.update costs microseconds of Python on every call).
        self._resets: list[str] = []
        self.opaque_reported: set[str] = set()
        self.learn_memo = learn_memo
        self.chained = False  # the previous test kept its state for the next one
        # The running test got the previous one's state (until its check): a fixture set
        # up now takes only its own changes into the baseline (see chain_marks).
        self.holding = False
        self._collected = False  # library module writes collected since the last check
        self.keep = keep
        # (site, key) -> (last value, times recomputed the same in a row, times different)
        self.memo: dict[tuple[str, object], tuple[object, int, int]] = {}
        # Per site: values held in ``memo`` from a first computation (at most
        # _MEMO_CANDIDATES until one entry of the site is learned: ``_memo_sites``).
        self._candidates: Counter[str] = Counter()
        self._memo_sites: set[str] = set()
        # Memo entries verified in an earlier run of the same code (see code_stamp): site
        # -> reprs of keys whose entries were recomputed the same there; kept at first
        # sight here.  ``memo_verified``: the same, found in this run (to be saved).
        self.memo_prior: dict[str, set[str]] = {}
        self.memo_verified: dict[str, set[str]] = {}
        self.memo_prior_kept = 0
        self.memo_kept: list[str] = []
        # Memo entries kept during a table's reset, whose values are watched at its end.
        # (A cache's: its site in place of the watch.)
        self._kept_values: list[tuple[StateTable, int | str, list[tuple[Any, Any]]]] = []
        # The watches learned entries may still add over the run (see _affordable), and
        # the entries found too large for it, no longer compared.
        self._kept_budget = _KEPT_WATCHES
        self._unaffordable: set[tuple[str, Any]] = set()
        self.memo_unaffordable: list[str] = []
        # Dict entries tests added and had put back, not learned: (site, key) -> how many
        # tests added them.  One that most tests add anew (a big structure built on first
        # use, beside other state) is what makes a suite slow isolated: the summary names it.
        self.rebuilt: Counter[tuple[str, Any]] = Counter()
        self._module_names_seen: set[str] = set()
        # The module of the test being checked (set by the plugin), and what the static
        # pass says about memo candidates: (site, test module's file or name, a writer
        # needed) -> may learn.  A verdict depends only on the project's files, so those
        # of an earlier run of the same code (see code_stamp) hold (``memo_verdicts_new``:
        # this run's, to be saved).
        self.test_module: types.ModuleType | None = None
        self.memo_verdicts: dict[tuple[str, str, bool], bool] = {}
        self.memo_verdicts_new: dict[tuple[str, str, bool], bool] = {}
        self._static: dict[str, Any] = {}
        # site -> what each function that writes it writes (_kept_together; None: its
        # module cannot be analysed).  Like the verdicts, a function of the project's
        # files: those of an earlier run of the same code are used (``writers_new``:
        # this run's, to be saved), and a run that needs no new ones reads no file.
        self.writers: dict[str, list[list[str]] | None] = {}
        self.writers_new: dict[str, list[list[str]] | None] = {}
        self._sources: dict[str, bytes] = {}
        self._project_texts: list[tuple[str, types.ModuleType, bytes]] | None = None
        self._stats_sources: list[tuple[str, types.ModuleType, bytes]] | None = None
        self._names_by_code: dict[str, dict[tuple[int, str], frozenset[str]] | None] = {}
        # file -> (first line, name) of each function -> whether it calls an effect's name
        # (``log.info(...)``, not ``self.info["name"]``); see _effect_calls.
        self._effect_calls: dict[str, dict[tuple[int, str], bool]] = {}
        self._file_cache: Any = None  # isolator.analysis._tree.FileCache, made on first use
        self.store_root = rootdir  # where .isolator/ is
        # A module file -> whether it is project code (by where it is: the rootdir, not a
        # site-packages directory, not isolator); asked for every module more than once.
        self._where_project: dict[str, bool] = {}

    # ------------------------------------------------------------- classification

    def is_project(self, mod: object) -> bool:
        name = getattr(mod, "__name__", "")
        if not isinstance(name, str):
            return False
        # (Asked of every module at the baseline: prefix tuples, matched in C.)
        if self._track_names and (
            name in self._track_names or name.startswith(self._track_prefixes)
        ):
            return True
        if self._exclude_names and (
            name in self._exclude_names or name.startswith(self._exclude_prefixes)
        ):
            return False
        f = getattr(mod, "__file__", None)
        if not isinstance(f, str):
            return False
        known = self._where_project.get(f)
        if known is None:
            a = _abspath(f)
            known = (
                a.startswith(self.rootdir)
                and not any(m in a for m in _LIB_MARKERS)
                and not a.startswith(_ISOLATOR_DIR)
            )
            if a == f:
                self._where_project[f] = known  # a relative name depends on the cwd
        return known

    # ------------------------------------------------------------- baseline

    def start(self, extra_modules: list[types.ModuleType] = ()) -> None:  # type: ignore[assignment]
        """Take the session baseline (after collection)."""
        for mod in list(sys.modules.values()) + list(extra_modules):
            if isinstance(mod, types.ModuleType) and self.is_project(mod):
                self.project.add(mod.__name__)
        self._module_names_seen = set(sys.modules)
        self._extra = list(extra_modules)
        # The test modules (those the collected tests are in) and conftests: their state
        # is the tests' data, never a memo to learn.
        self.test_modules = {getattr(m, "__name__", "") for m in extra_modules}
        self.test_code = self.test_modules | {
            n for n in self.project if n == "conftest" or n.endswith(".conftest")
        }
        self._set_tables(self._build_tables())
        self.modules = _modules.ModulesProbe(self.is_project)
        if _modules.FINDER not in sys.meta_path:
            sys.meta_path.insert(0, _modules.FINDER)
        _modules.FINDER.probe = self._import_probe
        _modules.FINDER.snapshot = self._module_snapshot
        _modules.FINDER.lazy = self._lazy_global
        _modules.FINDER.probe_same = self._import_probe_same
        files = self.files
        _modules.FINDER.writes = functools.partial(getattr, files, "writes")  # (no Python frame)
        files.bases_written = _modules.note_bases
        # Attributes bound on typing's aliases during a test go to the undo log (before
        # the library classes are watched: the wrapper is not a test's write).
        _aliases.install(_modules.LOG, _modules.NOTSET)
        self.swapped = _modules.watch_library_modules(self.is_project)
        self.modules.swapped = self.swapped
        self.threads = set(threading.enumerate())
        self.thread_count = _thread._count()
        self.tasks = TaskWatch()
        self.children = live_children() or {}
        # typing's memo caches of generic aliases (see _check_typing_caches).
        typing_mod = sys.modules.get("typing")
        self._typing_caches = [
            f.__self__
            for f in getattr(typing_mod, "_cleanups", ())
            if hasattr(getattr(f, "__self__", None), "cache_info")
            and getattr(getattr(f.__self__, "__wrapped__", None), "__qualname__", "")
            in _ALIAS_CACHES
        ]
        self._typing_sizes = self._typing_cache_sizes()
        # class -> its number of subclasses after its bases were last put back
        self._subclass_counts: weakref.WeakKeyDictionary[type, int] = weakref.WeakKeyDictionary()
        self.started = False
        # Only now: every audited event of the process calls the hook, and the walk above
        # raises thousands (each id() call does), none of them a test's.
        self.files.install()

    def _first_test(self) -> None:
        # Process-wide resources are compared at the same point of pytest's protocol as
        # they are checked (capture and log handlers differ between loop start and here).
        # Without setting off a garbage collection plain pytest would not run (see
        # settle_gc): the snapshots are many new objects.
        collecting = gc.isenabled()
        interp = self.probes[self._interp_index].take()  # with the collector's own state
        gc.disable()
        try:
            self.probe_snaps = [p.take() for p in self.probes]
            self.probe_snaps[self._interp_index] = interp
            _modules.absorb_writes()  # library modules too: pytest's set-up is not a test's
            settle_gc()
        finally:
            if collecting:
                gc.enable()
        self.started = True

    def _build_tables(self) -> dict[str, StateTable]:
        seen: set[int] = set()
        owners: dict[int, str] = {}
        prefixes = tuple(self.project)
        mods = sys.modules
        tables: dict[str, StateTable] = {}
        todo = [mods[n] for n in sorted(self.project) if n in mods]
        todo += [m for m in self._extra if mods.get(m.__name__) is not m]
        for mod in todo:
            t = StateTable(seen, owners)
            t.add_module(mod, prefixes, self._imported_names(mod))
            key = mod.__name__ if mod.__name__ not in tables else f"{mod.__name__}@{id(mod)}"
            tables[key] = t
        return tables

    def _import_probe(self) -> tuple[object, bytes, list[int]]:
        """What a module's import could change outside the module and a reset would undo:
        the process-wide state (see :meth:`_process_state`), every tracked dict's version
        tag and the length of every other tracked container (compared before and after
        the import)."""
        scope = self.reach.all()
        return self._process_state(), scope.tags(), scope.lengths()

    def _process_state(self) -> object:
        """A value that two calls return equal only when the process probes found the same
        state at both: a reference snapshot of the state, kept while the state stays as
        it was (one C-level comparison per call; where the probes are not the default
        ones, their findings).  Imports within a test mostly find the state of the
        previous import (a test's call differs from the baseline in its log and output
        capture); a new reference takes only the probes that differ from the baseline."""
        fast = self._probes_clean
        if fast is None:
            return self.probe_diffs()
        ref = self._import_ref
        if ref is not None and fast(ref.snaps):
            return ref
        diffs = self.probe_diffs()
        snaps = [
            p.take() if d else snap for p, snap, d in zip(self.probes, self.probe_snaps, diffs)
        ]
        ref = self._import_ref = _StateRef(snaps)
        return ref

    def _import_probe_same(self, before: Any, after: Any) -> bool:
        """Whether what an import changed, between two :meth:`_import_probe` findings,
        is only submodule bindings in project packages' namespaces (a module a package
        imports is bound on that package: no state of its own).  Namespaces are read
        against their baseline, so one the test had already written counts as changed."""
        if before[0] != after[0] or before[2] != after[2] or len(before[1]) != len(after[1]):
            return False
        scope = self.reach.all()
        watches = [(t, i) for t in scope.tagged for i in t.vidx or ()]
        if len(watches) * 8 != len(after[1]):
            return False
        for j in moved_entries(after[1], before[1]):
            t, i = watches[j]
            if t.kinds[i] != MODULE:
                return False
            live, snap = t.lives[i], t.snaps[i]
            if snap.keys() - live.keys():
                return False
            for name in _diff_keys(live, snap):
                if not isinstance(live.get(name), types.ModuleType):
                    return False
        return True

    def _lazy_global(self, mod: types.ModuleType, name: str) -> bool:
        """Whether a module global a module's import bound from None is a value loaded
        on first use: the static pass sees a function of its module read it before it
        binds it, and none that only sets it (see :meth:`_may_learn`)."""
        if isinstance(mod, type) or not self.learn_memo:
            return False
        try:
            return self._may_learn(f"{mod.__name__}:{name}", need_writer=True)
        except Exception:
            return False

    def _module_snapshot(self, mod: types.ModuleType) -> Callable[[], object] | None:
        """For a project module a test imported: its tracked state right after its import,
        and what puts that back (when the module is reinstated for a later test)."""
        if not self.is_project(mod):
            return None
        # Objects of the baseline belong to their own tables (which share a few sets).
        tables = self.tables
        if self._seen_sets[0] is not tables:
            sets = list({id(t._seen): t._seen for t in tables.values()}.values())
            self._seen_sets = (tables, sets)
        t = StateTable(SeenBeside(self._seen_sets[1]))
        try:
            t.add_module(mod, (*self.project, mod.__name__), self._imported_names(mod))
        except Exception:
            return None
        self._snapshotted.add(mod.__name__)
        return t.restore_changed

    def _imported_names(self, mod: types.ModuleType) -> frozenset[str]:
        """Globals of ``mod`` that are the very objects of another tracked module's globals,
        bound by ``from that import NAME``."""
        out = set()
        d = mod.__dict__
        for entry in imports_of(mod.__name__, getattr(mod, "__file__", None), mod.__package__):
            owner, _, name = entry.rpartition(".")
            if not owner or owner == mod.__name__ or owner not in self.project:
                continue
            src = sys.modules.get(owner)
            if src is not None and name in d and src.__dict__.get(name, _EMPTY) is d[name]:
                out.add(name)
        return frozenset(out)

    def _dirty_tables(self) -> dict[str, tuple[list[int], tuple[list[int], ...]]]:
        """Tables whose state differs from the baseline: key -> (watches, extras)."""
        out: dict[str, tuple[list[int], tuple[list[int], ...]]] = {}
        # The scope's C-level pass names the tables that may differ; only those are walked.
        defaults = self.files.defaults_written
        maybe = set(self.reach.all().dirty_tables(defaults, self.files.class_written))
        if not maybe:
            return out
        for key, t in self.tables.items():
            if t not in maybe:
                continue
            idx, _ = t.dirty_watches()
            extras = t.dirty_extras(defaults)
            if idx or any(extras):
                out[key] = (idx, extras)
        return out

    def _rebuild_dirty_tables(
        self, dirty: dict[str, Any], keep_out: dict[str, dict[int, set[Any]]] | None = None
    ) -> dict[str, StateTable]:
        """The tables with what a fixture changed taken into their baseline, and tables for
        project modules imported since."""
        prefixes = tuple(self.project)
        tables = dict(self.tables)
        for key, (idx, extras) in dirty.items():
            tables[key].absorb(idx, extras, prefixes, (keep_out or {}).get(key))
        for name in self.project:
            if name not in tables and name in sys.modules:
                nt = StateTable()
                nt.add_module(sys.modules[name], prefixes, self._imported_names(sys.modules[name]))
                tables[name] = nt
        return tables

    def _set_tables(self, tables: dict[str, StateTable]) -> None:
        self.tables = tables
        self.reach = Reach(tables, self.reach)

    def scope_for(self, modname: str | None, also: list[str]) -> Scope | None:
        """The tables a test in ``modname`` could have touched, or None for all."""
        if modname is None:
            return None
        last = self._last_scope
        if last[0] is self.reach and last[1] == modname:
            return last[2]
        if self._value_tables:
            also = [*also, *self._value_tables.values()]  # every test may use them
        scope = self.reach.tables_for(modname, also)
        self._last_scope = (self.reach, modname, scope)
        return scope

    def begin_test(self) -> None:
        if not self.started:
            self._first_test()
        self.fd = lowest_free_fd()
        # pytest runs every test inside warnings.catch_warnings() with its own filters and
        # restores them afterwards; compare against what the test started with -- unless the
        # previous test kept its state for this one (a chain), whose start is the reference.
        if not self.chained:
            self.probe_snaps[self._warnings_index] = self.probes[self._warnings_index].take()
        self.holding = self.chained
        self.chained = False
        if self._learned:
            self._hide_learned()
        _modules.LOG.active = True
        self.files.active = True

    def _hide_learned(self) -> None:
        """Before a test of a module that reads a memo itself, take the entries learned
        into it out (the test sees the memo as a fresh process shows it); the check after
        the test puts them back with the rest of the baseline."""
        name = getattr(self.test_module, "__name__", None)
        for site, (live, keys) in self._learned.items():
            if name in self._read_by_tests.get(site, ()):
                for k in keys:
                    dict.pop(live, k, None)  # (dict's own: a subclass's is the project's code)

    def end_test(self) -> None:
        # The test's library module writes (a chained test is not reset before the next).
        _modules.collect_writes()
        self._collected = True
        _modules.LOG.active = False
        self.files.active = False

    def restore_files(self) -> None:
        """The end of a forked child: its files put back, and those it holds open too
        (the child ends without running the code that would close them)."""
        self.end_test()
        self.files.restore()
        self.files.finish()

    def stop(self) -> None:
        self.end_test()
        self.files.finish()
        # Every backup was put back or let go by now: no empty directory is left behind
        # for each run (one with backups of its own stays, for the next run to recover).
        remove_empty_dir(self.files.backup_dir)
        if _modules.FINDER in sys.meta_path:
            sys.meta_path.remove(_modules.FINDER)
        self.came_back.update(_modules.FINDER.came_back)
        _modules.FINDER.clear()
        _modules.unwatch(self.swapped)
        self.swapped = []
        _aliases.uninstall()
        leave_entered_context()

    # ------------------------------------------------------------- check & reset

    def check_and_reset(self, force: bool = False, scope: Scope | None = None) -> Outcome:
        """Find what differs from the baseline and put it back (everything if ``force``).

        ``scope`` limits the module state checked to the tables the test could reach.
        """
        out = Outcome()
        files = self.files
        self.holding = False
        # Files first: restoring them must not depend on the cwd the test left.
        if files.order:
            out.writes += files.dirty_sites()
            out.reset += files.restore()
        if files.unrestorable:
            out.unrestorable += [(f"<file>:{p}", why) for p, why in files.unrestorable]
            files.unrestorable.clear()
        fast = self._probes_clean
        if force or fast is None or not fast(self.probe_snaps):
            snaps = self.probe_snaps
            for k, (probe, snap) in enumerate(zip(self.probes, snaps)):
                sites = probe.diff(snap)
                if sites:
                    out.writes += sites
                    try:
                        probe.put(snap, sites)
                    except Exception as exc:
                        UNRESTORABLE.extend((site, _refused(exc)) for site in sites)
                    if UNRESTORABLE:
                        # Reported once: what was left becomes what later tests get.
                        out.unrestorable += UNRESTORABLE
                        left = {site for site, _ in UNRESTORABLE}
                        sites = [site for site in sites if site not in left]
                        UNRESTORABLE.clear()
                        snaps[k] = probe.take()
                    out.reset += sites
                elif force:
                    probe.put(snap, [])
        limits_settled()  # (as in the baseline now, or reported and taken as it)
        # What finalizers raise while the rest puts state back and collects what it
        # dropped (an object only a put-back global held, a coroutine closed mid-await)
        # would reach pytest through sys.unraisablehook and fail the next test's set-up
        # under filterwarnings = error; alone, no test sees it.  (Put on after the
        # probes: a hook the test set is back by now, and is what comes back after.)
        # (One hook for the run, not a new closure after every test.)
        caught, own = self._caught, self._own_hook
        hook = sys.unraisablehook
        sys.unraisablehook = own
        try:
            return self._reset_state(out, force, scope, files)
        finally:
            if sys.unraisablehook is own:
                sys.unraisablehook = hook
            if caught:
                out.garbage += caught
                caught.clear()

    def _reset_state(self, out: Outcome, force: bool, scope: Scope | None, files: Any) -> Outcome:
        """The part of :meth:`check_and_reset` after the process-wide probes."""
        added, replaced, deleted = self.modules.full_diff() if force else self.modules.diff()
        kept: list[str] = []
        if added or replaced or deleted:
            leaving = self._project_snapshots(added) if self.learn_memo or self.keep else []
            reset, kept = self.modules.restore(added, replaced, deleted)
            out.writes += reset
            out.reset += reset
            for name, mod, t in leaving:
                if _modules.FINDER.cache.get(name) is mod:
                    self._learn_in_unloaded(t, out)
        if not self._collected:
            _modules.collect_writes()  # not right after a test (between plan sequences)
        self._collected = False
        log = _modules.LOG
        if LEFT_AS_IS:
            log.leave(LEFT_AS_IS)
            LEFT_AS_IS.clear()
        if log.entries:
            sites = log.dirty_sites()
            out.writes += sites
            rebased = [
                m for m, name, _ in log.entries if name == "__bases__" and isinstance(m, type)
            ]
            if rebased and self._subclasses_grew(rebased):
                # Putting bases back computes the MRO of every subclass again, those of
                # modules unloaded since too, until the collector frees them (the classes
                # of tkinter.tix, executed again by each test that imports it): without a
                # collection, each test would pay for all earlier ones.
                gc.collect()
            self._note_patchers(log.entries)
            refused = log.undo(set(kept))
            for cls in rebased:
                self._subclass_counts[cls] = len(type.__subclasses__(cls))
            if refused:
                # Reported once: what was left joins the baseline of later tests.
                out.unrestorable += refused
                left = {site for site, _ in refused}
                sites = [site for site in sites if site not in left]
            out.reset += sites
        if kept:
            self._absorb_submodules(kept)
        if out.reset and any(s == "<env>:TZ" or s.startswith("time:") for s in out.reset):
            # The C library's idea of the time zone follows TZ only through tzset(), which
            # also rebinds time.timezone/altzone/daylight/tzname (just put back).
            _tzset = getattr(time, "tzset", None)
            if _tzset is not None:
                _tzset()
                _modules.absorb_writes()  # its rebinding is not the next test's write
        # Threads the test left running: a global bound to one (a monitor started lazily)
        # is left as the test left it, so that the code that stops it still finds it.
        threads_moved = _thread._count() != self.thread_count
        leaked = self._leaked_threads() if threads_moved else []
        if leaked:
            self._held = {id(th) for th in leaked}
        if force:
            for t in self.tables.values():
                self._reset_table(t, out, force)
        else:
            # Functions' defaults, and the classes of watched instances, are read only
            # after a test that rebound some: the audit event of the rebinding tells.
            defaults = files.defaults_written
            if scope is None:
                scope = self.reach.all()
            dirty = scope.dirty_tables(defaults, files.class_written)
            hits = scope.hits
            for t in dirty:
                self._reset_table(t, out, force, defaults, hits[t] if hits else ALL_KINDS)
        files.defaults_written = files.class_written = False
        if files.code_written or force:
            files.code_written = False
            self._reset_codes(out)
        if files.pending:
            # Files the test left open: those its objects closed as their state was put
            # back (a file held by a global) go now, not after the next test.
            files.settle()
        if _SYS_DICT.get("last_value", None) is not self.last_value:
            # pytest keeps a failed test's exception in sys.last_value (for post-mortem
            # debugging) until the next failure: its traceback's frames hold what the
            # test left open (a socket), freed, with a ResourceWarning, in a later test.
            # No test alone in a fresh process has an earlier test's exception there.
            out.garbage = quietly(_forget_last_exception)
            self.last_value = _SYS_DICT.get("last_value", None)
        fd = self.fd
        if self.popped_fd >= 0:
            # A higher-scoped fixture's teardown: its baseline went, and what the reset
            # drops now may have been opened by an earlier test (the session's loop).
            fd = self.popped_fd if fd < 0 else min(fd, self.popped_fd)
            self.popped_fd = -1
        if fd >= 0 and lowest_free_fd() > fd:
            if out.reset:
                free_dropped(fd)  # (what the reset dropped would have lived on: no report)
            else:
                # The test's own garbage (a socket its failure's traceback held): a
                # later test must not get its warnings.  Descriptors it keeps open for
                # good (a pool of a library's) are not garbage: after three full
                # collections in a row that freed nothing, one in 32 such tests.
                n = self.fruitless
                full = n < 3 or n % 32 == 0
                garbage, fruitless = free_dropped(fd, full)
                out.garbage += garbage
                self.fruitless = n + 1 if fruitless or not full else 0
        if threads_moved:
            self._check_threads(out, leaked)
        if self.tasks is not None:
            out.unrestorable += self.tasks.left()
        if self._typing_caches:
            self._check_typing_caches(out)
        else:
            _aliases.STATE.settle()
        if files.spawned:
            files.spawned = False
            self._check_children(out)
        if files.spawned_at is not None:
            out.child_files = files.child_writes()
            if out.child_files:
                out.writes += [f"<file>:{p}" for p, _ in out.child_files]
        if out.reset:
            resets = self._resets
            resets += out.reset
            if len(resets) > 4096:
                self._reset_counts.update(resets)  # counted in C
                resets.clear()
        return out

    def _subclasses_grew(self, classes: list[type]) -> bool:
        """Whether a class whose bases a test assigned has more subclasses than after its
        last reset (another copy of a module executed again: a collection frees the old)."""
        counts = self._subclass_counts
        return any(len(type.__subclasses__(cls)) > counts.get(cls, 1 << 30) for cls in classes)

    def _typing_cache_sizes(self) -> list[int]:
        return [f.cache_info().currsize for f in self._typing_caches]

    def _check_typing_caches(self, out: Outcome) -> None:
        """typing memoizes generic aliases (``Box[int]``), and libraries store attributes
        on them (attrs' ``__attrs_attrs__``): an alias a test made would come back to a
        later test as that library left it, where a fresh process makes a new one.  After
        a test that added aliases the caches are emptied, as CPython's own test runner
        does between tests; the aliases are made again when next asked for.  They are
        emptied too after a test that bound an attribute on an alias it made (see
        ``_aliases``): a full cache, whose size no longer grows, would hand that alias
        on.  What a test binds on an alias made before it goes to the undo log instead."""
        annotated = _aliases.STATE.settle()
        sizes = self._typing_cache_sizes()
        if annotated or any(map(operator.gt, sizes, self._typing_sizes)):
            for f in self._typing_caches:
                f.cache_clear()
            out.writes.append("<typing caches>")
            out.reset.append("<typing caches>")
            sizes = self._typing_cache_sizes()
        self._typing_sizes = sizes

    def _reset_codes(self, out: Outcome) -> None:
        """Put back the code of project functions that had theirs replaced (read only
        after an audit event of such a write)."""
        for t in self.tables.values():
            for i in t.dirty_codes():
                where, fn, code = t.codes[i]
                site = f"{where}.__code__"
                out.writes.append(site)
                try:
                    fn.__code__ = code
                except Exception as exc:
                    out.unrestorable.append((site, _refused(exc)))
                    t.codes[i] = (where, fn, fn.__code__)
                else:
                    out.reset.append(site)

    def _note_patchers(self, entries: list[tuple[Any, str, object]]) -> None:
        """Note the library packages whose functions or classes a test left bound in other
        modules' attributes (``time.gmtime = freezegun.api.fake_gmtime``), where that
        package stays loaded: putting the attributes back leaves the package's own state
        (its stack of active patches) as the test left it, unless the package is tracked.
        The summary names them; a package the test imported was unloaded with its state."""
        mods = sys.modules
        stdlib = getattr(sys, "stdlib_module_names", ())
        for owner, name, old in entries:
            new = _modules.bound(owner, name)
            if new is old or new is _modules.NOTSET:
                continue
            if isinstance(new, (type, types.FunctionType)):
                src = getattr(new, "__module__", None)
            else:
                src = getattr(type(new), "__module__", None)
            if not isinstance(src, str):
                continue
            top = src.partition(".")[0]
            where = owner.__module__ if isinstance(owner, type) else getattr(owner, "__name__", "")
            if (
                top in stdlib
                or top in _process.OWN_STATE_PROBED
                or top == "builtins"
                or src.startswith(_modules.RUNNER_PREFIXES)
                or str(where).partition(".")[0] == top
            ):
                continue
            mod = mods.get(src)
            if not isinstance(mod, types.ModuleType) or self.is_project(mod):
                continue
            sites = self.patchers.setdefault(top, [])
            site = _modules.site_of(owner, name)
            if site not in sites and len(sites) < 8:
                sites.append(site)

    def _project_snapshots(
        self, names: list[str]
    ) -> list[tuple[str, types.ModuleType, StateTable]]:
        """The project modules among ``names`` (imported by the test) that come back from
        a snapshot of their state when imported again, with that snapshot's table (only a
        project module's first import has one: see :meth:`_module_snapshot`)."""
        out: list[tuple[str, types.ModuleType, StateTable]] = []
        snapshotted = self._snapshotted
        if snapshotted.isdisjoint(names):
            return out  # (library modules: most tests that import anything import only those)
        mods, fresh = sys.modules, _modules.FINDER.fresh
        for n in names:
            if n not in snapshotted:
                continue
            m = mods.get(n)
            if not isinstance(m, types.ModuleType):
                continue
            f = fresh.get(m)
            restore = f[3] if f is not None else None
            t = getattr(restore, "__self__", None)
            if isinstance(t, StateTable):
                out.append((n, m, t))
        return out

    def _learn_in_unloaded(self, t: StateTable, out: Outcome) -> None:
        """Memo entries a test added in a project module it imported, unloaded now: a
        later test that imports it again gets it back as its first import left it, and
        would compute the entries again.  Those recomputed the same are learned into that
        snapshot as into the baseline (html5lib's tree builders, made on first use in a
        module imported on first use); the rest is put back now.  What this finds is no
        write of the test's: the module is gone for the tests after it."""
        scratch = Outcome()
        try:
            self._reset_table(t, scratch, False)
        except Exception:  # noqa: S110  (then it comes back as its snapshot says, unlearned)
            return
        out.unrestorable += scratch.unrestorable

    @property
    def reset_counts(self) -> Counter[str]:
        """How often each site was reset so far."""
        if self._resets:
            self._reset_counts.update(self._resets)
            self._resets.clear()
        return self._reset_counts

    def _reset_table(
        self,
        t: StateTable,
        out: Outcome,
        force: bool,
        check_defaults: bool = True,
        kinds: int = ALL_KINDS,
    ) -> None:
        """Put back what differs in ``t`` (of the ``kinds`` of watches that may have
        changed; a scope's check tells)."""
        pending: list[int] = []
        if force:
            idx = t.dirty_indexes()
        elif kinds & (TAGS | LIVES | SLOTS):
            idx, pending = t.dirty_watches(kinds)
        else:
            idx = []
        caches, cells, defaults, opaque = t.dirty_extras(check_defaults, kinds)
        if not (idx or caches or cells or defaults or opaque):
            return
        # A global holding state that cannot be copied (a consumed generator, a held lock)
        # is left whole as the test left it: restoring the rest of it around that state
        # would make a mix no process ever had.  What is left joins the baseline and is
        # reported; the test runs in a forked child from the next run on.
        if opaque:
            # Counters are made anew in their baseline state, where they were.
            rebuilt = [i for i in opaque if t.opaque[i].rebuild is not None and t.rebuild_opaque(i)]
            if rebuilt:
                for i in rebuilt:
                    out.writes.append(t.opaque[i].site)
                    out.reset.append(t.opaque[i].site)
                opaque = [i for i in opaque if i not in rebuilt]
        frozen = {_root(t.opaque[i].site) for i in opaque} if opaque and not force else set()
        left: tuple[list[int], list[int], list[int], list[int]] = ([], [], [], [])
        broken: set[int] = set()  # watches whose restore raised (reported already)
        memo_ok = self.learn_memo or self.keep
        held = self._held
        # The sites of the names that changed in module namespaces put back so far, for
        # the memo check's siblings (the warnings registry is no sibling of a memo).
        names: dict[int, list[str]] = {}
        extras = (caches, cells, defaults, opaque)

        def alone(i: int) -> bool:
            # Whether nothing beside watch i changed; asked only before an entry is kept
            # (the static pass reads files).
            return not _dirty_sibling(t, i, idx, extras, names, self._kept_together)

        for i in idx:
            if frozen and _root(t.sites[i]) in frozen:
                left[0].append(i)
                continue
            keys = None
            if t.kinds[i] == CLASS:
                found = t.diff_keys(i)
                keys = _learn_class_caches(t, i, found)
                if found and not keys:
                    continue  # only copyreg's cache was added: it joined the baseline
            if memo_ok and t.kinds[i] == SET:
                if self._keep_set_members(t, i, functools.partial(alone, i)):
                    continue  # every member it gained was learned: nothing to put back
            if memo_ok and (t.kinds[i] == DICT or t.kinds[i] == MODULE or t.kinds[i] == CLASS):
                if keys is None:
                    keys = t.diff_keys(i)  # one comparison for the memo check and the reset
                if keys:  # (none: the test only reordered the dict)
                    keys = self._keep_memo(t, i, keys, functools.partial(alone, i))
                    if not keys:
                        continue  # every key it changed was a learned entry
            if frozen and t.kinds[i] in _MAPPING_KINDS:
                # A name holding an object whose state cannot be copied back (a file the
                # test closed, then bound the name to a new one) stays as the test left
                # it; the rest of the watch is put back, then the whole joins the baseline.
                found = keys if keys is not None else t.diff_keys(i)
                stay = [
                    k for k in found or () if any(_root(s) in frozen for s in t.key_sites(i, [k]))
                ]
                if stay:
                    left[0].append(i)
                    keys = [k for k in found or () if k not in stay]
                    if not keys:
                        continue
            if held and t.kinds[i] in _MAPPING_KINDS:
                # Names bound to a thread the test left running stay (and are reported);
                # the rest of the watch is put back, then the whole joins the baseline.
                found = keys if keys is not None else t.diff_keys(i)
                live = as_read(t.lives[i])
                stay = [k for k in found or () if id(live.get(k)) in held]
                if stay:
                    left[0].append(i)
                    keys = [k for k in found or () if k not in stay]
                    if not keys:
                        continue
            try:
                sites = t.reset(i, keys)
            except Exception as exc:
                # The object refuses its old state (its own code raised): it stays as the
                # test left it, joins the baseline, and is reported.
                out.writes.append(t.sites[i])
                out.unrestorable.append((t.sites[i], _refused(exc)))
                left[0].append(i)
                broken.add(i)
                continue
            if t.kinds[i] == MODULE or t.kinds[i] == CLASS:
                names[i] = sites
            out.writes += sites
            out.reset += sites
        for i in caches:
            site = t.caches[i][0]
            if memo_ok and self._keep_cache(t, i):
                continue  # every entry it gained was learned: nothing to put back
            out.writes.append(site)
            if frozen and _root(site) in frozen:
                left[1].append(i)
                continue
            had = t.caches[i][2]
            try:
                t.restore_cache(i)
            except Exception as exc:
                out.unrestorable.append((site, _refused(exc)))
                continue
            out.reset.append(site)
            if had and i not in t.cache_base:
                fn = t.caches[i][1]
                # A bounded cache's entries cannot be put back.  Those of a function of
                # unchanging inputs (the memo learning's verdict) are computed again the
                # same: emptied, it differs only by what no code here looks at, its
                # statistics.  Others are reported in the summary, and the test is not
                # forked from then on: the next test to fill the cache would empty it.
                if not (
                    self.learn_memo
                    and self._pure_cached(site, fn)
                    and not self._observed(site, True)
                ):
                    self.emptied.append((site, had))
                # Empty is its baseline from now on (the tests after this one did not
                # empty it).
                t.caches[i] = (site, fn, 0)
                t.cache_changed(i)
        for i in cells:
            site = t.cells[i][0]
            out.writes.append(site)
            if frozen and _root(site) in frozen:
                left[2].append(i)
                continue
            try:
                t.restore_cell(i)
            except Exception as exc:
                # An object whose old class does not fit it any more: it stays as the test
                # left it, joins the baseline, and is reported.
                out.unrestorable.append((site, _refused(exc)))
                left[2].append(i)
                continue
            out.reset.append(site)
        for i in defaults:
            site = t.defaults[i][0]
            out.writes.append(site)
            if frozen and _root(site) in frozen:
                left[3].append(i)
                continue
            t.restore_defaults(i)
            out.reset.append(site)
        for i in opaque:
            u = t.opaque[i]
            out.writes.append(u.site)
            out.unrestorable.append(
                (u.site, f"{u.kind} object changed; its state cannot be copied")
            )
            # Report each change once: the new state becomes what later tests are compared to.
            try:
                t.opaque_fps[i] = u.fingerprint(u.obj)
            except Exception:
                pass
        if force:
            out.unrestorable += [(site, _refused(exc)) for site, exc in t.restore_all()]
        elif any(left):
            for i in left[0]:
                if i in broken:
                    continue
                sites = t.changed_sites(i)
                out.writes += sites
                out.unrestorable += [(s, _LEFT) for s in sites]
            out.unrestorable += [(t.caches[i][0], _LEFT) for i in left[1]]
            out.unrestorable += [(t.cells[i][0], _LEFT) for i in left[2]]
            out.unrestorable += [(t.defaults[i][0], _LEFT) for i in left[3]]
            t.absorb(left[0], (left[1], left[2], left[3], []), tuple(self.project))
        elif pending:
            t.verified(pending)
        if self._kept_values:
            prefixes = tuple(self.project)
            for kt, at, pairs in self._kept_values:
                kt.watch_kept(at, pairs, prefixes)
            self._kept_values.clear()

    def _keep_memo(
        self, t: StateTable, i: int, keys: list[Any], alone: Callable[[], bool] = lambda: True
    ) -> list[Any]:
        """Keep entries a test *added* to a dict once a later test recomputed them equal.

        Memo caches (parsers, grammars, compiled patterns) are refilled by every test after
        a reset, which costs what a fresh process costs.  An entry whose value came back the
        same after a reset (:func:`isolator._same.same_value`: an isomorphic object graph,
        up to what memory layout decides) is taken as a deterministic memo entry and joins
        the baseline; a key recomputed different ``_MEMO_MISSES`` times is no longer
        compared.  ``keys``: the watch's :meth:`StateTable.diff_keys`.  Returns the keys
        left to reset: the entries kept join the baseline one by one (a test that loads
        a new locale beside one loaded before keeps the one it recomputed).
        """
        try:
            return self._keep_added(t, i, keys, alone)
        except Exception:
            # A key whose hash or equality changed since it was stored (mpmath's numbers
            # hash by the working precision), or raises: not a memo we can reason about.
            return keys

    def _keep_added(
        self, t: StateTable, i: int, keys: list[Any], alone: Callable[[], bool]
    ) -> list[Any]:
        if t.modname.startswith("<"):
            return keys  # a fixture's value: what tests and fixtures put there is theirs
        real, snap = t.lives[i], t.snaps[i]
        live = as_read(real)  # (entries read from a plain copy: the same objects)
        # A module's globals: a name bound from None by a function that looks at it first
        # is a lazily loaded value (``global _DATA; if _DATA is None: _DATA = load()``),
        # the module-level form of a memo entry.
        # A class: attributes its own code adds on first use (pygments' lexers compile
        # their token tables into class attributes when first instantiated).
        module = t.kinds[i] == MODULE
        klass = t.kinds[i] == CLASS
        added: list[tuple[Any, Any]] = []
        for k in keys:
            if k == "__warningregistry__":
                continue  # what a warning adds to a module: put back, no verdict on the rest
            if module and (
                type(k) is not str
                or k in _SKIP_NAMES
                or snap.get(k, None) is not None
                or isinstance(live.get(k), types.ModuleType)  # a submodule: sys.modules' to say
            ):
                return keys
            if klass and (type(k) is not str or k in _SKIP_NAMES or k.startswith("__")):
                return keys
            if k in snap and not module:
                if klass and snap[k] is None and k in live:
                    # Bound from None by the class's own code on first use (dateparser's
                    # DateDataParser.locale_loader): a lazy load, as for module globals.
                    added.append((k, live[k]))
                    continue
                if klass or k not in live:
                    return keys  # removed (an evicting cache), or a class attribute rebound
                if _compiled_from(snap[k], live[k]):
                    # A pattern compiled in place of its source on first use (docutils'
                    # state machines compile their classes' pattern tables so): the
                    # in-place form of a memo entry.
                    added.append((k, live[k]))
                    continue
                # A rebound entry is put back, and does not stop the entries added beside it
                # from being learned (freezegun's module cache is keyed by __name__, which
                # io and _io share: their entries flip on every use).
                continue
            if type(live.get(k)) in _FLAG_TYPES:
                continue  # a flag or a count: a registry, not a memo (put back)
            added.append((k, live[k]))
        if not added:
            return keys
        site = t.sites[i]
        keep: list[tuple[Any, Any]] = []
        declared = bool(self.keep) and any(fnmatch.fnmatchcase(site, p) for p in self.keep)
        owner = site.partition(":")[0]

        sibling_free: list[bool] = []

        def entry_name(k: Any) -> str:
            if module:
                return f"{owner}:{k}"
            return f"{site}.{k}" if klass else f"{site}[{key_repr(k)}]"

        def nothing_beside() -> bool:
            # Whether the test changed nothing else of what holds the dict (once).
            if not sibling_free:
                sibling_free.append(alone())
            return sibling_free[0]

        def allowed(k: Any) -> bool:
            # Asked only of an entry about to be kept: the static pass reads files.  A test
            # module's data is the tests' (a helper filling in a default), no memo.
            if t.modname in self.test_code or not nothing_beside():
                return False
            if module:
                # A name bound from None needs a writer seen reading it first (a lazy
                # load); a new name, as a new dict key, only no writer seen against it (a
                # module's __getattr__ binding what it loads on first use).  Code that
                # reads the name itself would see None where the load is learned; a name
                # that is not there yet makes the load when read.
                name = f"{owner}:{k}"
                if k in snap:
                    return self._may_learn(name, need_writer=True) and not self._seen_by_code(name)
                return self._may_learn(name)
            if klass:
                if k in snap:
                    name = f"{site}.{k}"
                    return self._may_learn(name, need_writer=True) and not self._seen_by_code(name)
                return self._may_learn(site)
            return self._may_learn(site) and not self._seen_by_code(site, hide_ok=True)

        # A dict's entries share one verdict (it names the site, not the key): asked once
        # for all of them (pytz's datetime memos gain thousands of entries in one test).
        dict_verdict: list[bool] = []

        def dict_allowed() -> bool:
            if not dict_verdict:
                dict_verdict.append(allowed(None))
            return dict_verdict[0]

        # What the baseline walk would name the entries' depth (see StateTable._entry_site).
        depth = 0 if module else t.depths[i] + 1
        prefixes: tuple[str, ...] | None = None  # (made for the first entry recomputed the same)
        for k, v in added:
            if declared:
                if nothing_beside():
                    keep.append((k, v))
                continue
            if not self.learn_memo:
                break
            if (site, k) in self._unaffordable:
                continue
            if not self._recomputed_same(
                site, k, v, functools.partial(allowed, k) if module or klass else dict_allowed
            ):
                continue
            if prefixes is None:
                prefixes = tuple(self.project)
            if self._affordable(t, site, k, v, depth, functools.partial(entry_name, k), prefixes):
                keep.append((k, v))
        if len(keep) < len(added) and not module and not klass:
            self._count_rebuilt(site, added, keep)
        if keep:
            # What a kept entry holds is watched from now on (after the other watches of
            # this check: new ones go at the end of the table).
            self._kept_values.append((t, i, keep))
        if not module and not klass and site in self._read_by_tests:
            self._learned.setdefault(site, (real, set()))[1].update(k for k, _ in keep)
        for k, v in keep:
            snap[k] = v
            self.memo_kept.append(entry_name(k))
        if len(keep) == len(keys):
            return []
        kept = {id(k) for k, _ in keep}
        return [k for k in keys if id(k) not in kept]

    def _count_rebuilt(
        self, site: str, added: list[tuple[Any, Any]], keep: list[tuple[Any, Any]]
    ) -> None:
        """Count the entries of ``added`` not in ``keep`` (see ``rebuilt``): plain keys
        only (no object of the test's held), and new keys only while fewer than
        _REBUILT_KEYS are counted (a memo of thousands of arguments is no one structure)."""
        rebuilt = self.rebuilt
        kept = {id(k) for k, _ in keep}
        room = len(rebuilt) < _REBUILT_KEYS
        for k, v in added:
            if (
                type(k) in _PLAIN_KEYS
                and id(k) not in kept
                and not isinstance(v, _DEFINED)  # (a registry of what tests define)
                and (room or (site, k) in rebuilt)
            ):
                rebuilt[(site, k)] += 1

    def _recomputed_same(self, site: str, k: Any, v: Any, allowed: Callable[[], bool]) -> bool:
        """The evidence for one entry a test added to memo ``site``: whether it was
        recomputed the same after a reset (in this run, or verified in an earlier run of
        the same code) and ``allowed`` (asked only then: it may read files).  Notes this
        computation of it otherwise; a key recomputed different ``_MEMO_MISSES`` times is
        no longer compared."""
        key = (site, k)
        seen = self.memo.get(key)
        if seen is None:
            name = _stable_repr(k)
            if name is not None and name in self.memo_prior.get(site, ()) and allowed():
                self.memo_prior_kept += 1  # recomputed the same in an earlier run
                self.memo_verified.setdefault(site, set()).add(name)
                self._memo_sites.add(site)
                return True
            if site in self.observed_memos:
                return False
            held = self._candidates[site]
            if held >= _MEMO_CANDIDATES and site not in self._memo_sites:
                # A dict whose entries are not learned (Babel's locale data: a thousand
                # locales of a few megabytes, each computed by one test) holds at most
                # this many values for comparing until one of its entries is.
                return False
            self._candidates[site] = held + 1
            self.memo[key] = (v, 0, 0)
            return False
        if seen[2] >= _MEMO_MISSES:
            return False  # recomputed different too often: not a memo entry
        if site in self.observed_memos:
            # Code reads this memo itself (named in the summary already): none of its
            # entries is learned, so no value of it is held for comparing (Babel's
            # locale data, a few megabytes a locale).
            del self.memo[key]
            return False
        home: str | None = site.partition(":")[0]
        if home in self.test_code:
            home = None  # (a test's own definitions are no memo's)
        if allowed() and same_value(seen[0], v, home=home):  # (the cheaper question first)
            self.memo[key] = (v, seen[1] + 1, seen[2])
            self._memo_sites.add(site)
            name = _stable_repr(k)
            if name is not None:
                self.memo_verified.setdefault(site, set()).add(name)
            return True
        if site in self._observed_pending and same_value(seen[0], v, home=home):
            # A memo code reads itself, recomputed the same: worth naming in the summary
            # (a registry of what tests define is not).
            self.observed_memos[site] = None
            del self._observed_pending[site]
            del self.memo[key]
            return False
        misses = seen[2] + 1
        # (No longer compared after _MEMO_MISSES: the value is not held either.)
        self.memo[key] = (v if misses < _MEMO_MISSES else None, 0, misses)
        return False

    def _affordable(
        self,
        t: StateTable,
        site: str,
        k: Any,
        v: Any,
        depth: int,
        name: Callable[[], str],
        prefixes: tuple[str, ...] | None = None,
    ) -> bool:
        """Whether watching memo entry ``k``'s value ``v`` (recomputed the same: about to
        be learned) fits what learning may add to every later check: at most one walk's
        worth of watches (a larger value would be watched in part only), and within what
        is left of _KEPT_WATCHES for the run.  A learned entry is watched from then on:
        with Babel's locale cache learned (thousands of nested dicts a locale), every
        test's check cost more than the reloading it saved.  An entry refused is no
        longer compared (its held value is let go), and is named in the summary."""
        limit = min(self._kept_budget, _MAX_WATCHES_PER_MODULE)
        try:
            cost = t.walk_cost(
                v, depth, tuple(self.project) if prefixes is None else prefixes, limit
            )
        except Exception:
            cost = limit + 1  # (its own code raised: not walked either)
        if cost <= limit:
            self._kept_budget -= cost
            return True
        self._unaffordable.add((site, k))
        self.memo[(site, k)] = (None, 0, _MEMO_MISSES)
        if len(self.memo_unaffordable) < 100:
            self.memo_unaffordable.append(name()[:200])
        return False

    def _keep_cache(self, t: StateTable, i: int) -> bool:
        """Keep the entries a test added to an unbounded ``functools.cache`` once a later
        test recomputed them equal, as :meth:`_keep_memo` keeps a dict's: only plain keys
        (strings, numbers, tuples of them: not objects whose state may differ), and only
        for a function that computes from nothing a test can change
        (:meth:`_pure_cached`).  True when every entry it gained was kept."""
        site, fn, _ = t.caches[i]
        if t.modname.startswith("<"):
            return False
        declared = bool(self.keep) and any(fnmatch.fnmatchcase(site, p) for p in self.keep)
        if not declared:
            # (Asked first: the verdicts are kept, the entries are many.)
            if not self.learn_memo:
                return False
            if not self._pure_cached(site, fn):
                self.impure_memos[site] = None  # (the summary names the costly ones)
                return False
            if self._observed(site, True):
                return False
        entries = cache_dict(fn)
        if entries is None:
            return False
        base = t.cache_base.get(i, {})
        try:
            if any(k not in entries for k in base):
                return False  # emptied by the test: the learned entries go back
            added = [(k, entries[k]) for k in entries if k not in base]
        except Exception:
            return False
        if not added or not all(_stable_repr(k) is not None for k, _ in added):
            return False
        keep = [
            (k, v)
            for k, v in added
            if declared
            or (
                (site, k) not in self._unaffordable
                and self._recomputed_same(site, k, v, _always)  # (purity asked above)
                and self._affordable(t, site, k, v, 1, functools.partial(_call_name, site, k))
            )
        ]
        if not keep:
            return False
        t.cache_base[i] = base
        base.update(keep)
        t.cache_pure.add(i)
        self._kept_values.append((t, site, keep))
        self.memo_kept += [_call_name(site, k) for k, _ in keep]
        if len(keep) == len(added):
            t.caches[i] = (site, fn, len(base))
            t.cache_changed(i)  # (its sizer and baseline count)
            return True
        return False

    def _pure_cached(self, site: str, fn: Any) -> bool:
        """Whether the function behind memo cache ``fn`` computes only from its arguments
        and from state no code seen writes (see :meth:`_pure_function`), once per site."""
        key = (site, "<pure>", False)
        verdict = self.memo_verdicts.get(key)
        if verdict is None:
            inner = getattr(fn, "__wrapped__", None)
            verdict = isinstance(inner, types.FunctionType) and self._pure_function(inner, 0, site)
            self.memo_verdicts[key] = verdict
        return verdict

    def _pure_function(self, fn: types.FunctionType, depth: int, own: str = "") -> bool:
        """Whether a project function reads only module state that no code the static
        pass sees writes (its own module's, the state's module's, the running test
        module's), writes none, shows nothing (warns, logs, prints), uses no name of the
        process's changing state (the environment, files, clocks, randomness), and calls
        only project functions and classes of which the same holds (a few levels deep);
        a library's functions are taken as computing from their arguments.  ``own``: the
        site of the function's own cache, which a recursive call reads and fills."""
        if depth > _PURE_DEPTH:
            return False
        mod = sys.modules.get(getattr(fn, "__module__", None) or "")
        state = self._static_state(mod)
        if state is None:
            return False
        names = _names_used(fn.__code__)
        # (By the names its code uses, which the function has at hand: the static pass's
        # finer look at calls would compile the module's source.)
        if not (_IMPURE_NAMES.isdisjoint(names) and _EFFECT_NAMES.isdisjoint(names)):
            return False
        accesses = [a for a in state.code if a.qualname == fn.__qualname__]
        if not accesses or not all(self._pure_access(a, mod, own) for a in accesses):
            return False
        spaces = [fn.__globals__]
        spaces += [
            m.__dict__
            for m in (fn.__globals__.get(n) for n in names)
            if isinstance(m, types.ModuleType) and self.is_project(m)
        ]
        for n in names:
            for space in spaces:
                obj = space.get(n)
                kind = type(obj)
                if obj is None or obj is fn or issubclass(kind, types.ModuleType):
                    continue
                if kind is types.FunctionType:
                    home = sys.modules.get(obj.__module__ or "")
                    if home is not None and self.is_project(home):
                        if not self._pure_function(obj, depth + 1):
                            return False
                elif issubclass(kind, type):
                    home = sys.modules.get(obj.__module__)
                    if home is not None and self.is_project(home):
                        if not self._pure_class(obj, home):
                            return False
                elif getattr(obj, "__wrapped__", None) is fn:
                    continue  # its own cache: a recursive memo function (fib)
                elif callable(obj):
                    home = sys.modules.get(getattr(obj, "__module__", None) or "")
                    if home is None or self.is_project(home):
                        return False  # a project callable object: what it reads is unseen
        return True

    def _pure_class(self, cls: type, home: types.ModuleType) -> bool:
        """A project class a pure function makes or calls: every method its own source
        defines is pure as :meth:`_pure_access` sees it."""
        state = self._static_state(home)
        if state is None:
            return False
        names: set[str] = set()
        for value in vars(cls).values():
            code = getattr(getattr(value, "__func__", value), "__code__", None)
            if isinstance(code, types.CodeType):
                names |= _names_used(code)
        if not (_IMPURE_NAMES.isdisjoint(names) and _EFFECT_NAMES.isdisjoint(names)):
            return False
        prefix = cls.__qualname__ + "."
        return all(self._pure_access(a, home) for a in state.code if a.qualname.startswith(prefix))

    def _pure_access(self, access: Any, home: object, own: str = "") -> bool:
        """One code object of module ``home`` writes no module state (but ``own``) and
        reads only state that no code seen writes."""
        if any(w != own for w in access.writes):
            return False
        return not any(r != own and self._written(r, home) for r in access.reads)

    def _written(self, site: str, home: object) -> bool:
        """Whether code other than a module's or a class's own initialisation writes
        ``site``, in its module, in ``home`` or in the running test's module (a write
        that only empties it included: the cache would keep what was computed before)."""
        site = _through_modules(site)
        owner = sys.modules.get(site.partition(":")[0])
        for mod in {id(m): m for m in (owner, home, self.test_module) if m is not None}.values():
            state = self._static_state(mod)
            if state is None:
                if mod is owner:
                    return True
                continue
            bodies = set(state.classes)
            for code in state.code:
                if code.qualname == "<module>" or code.qualname in bodies:
                    continue
                if any(sites_overlap(_through_modules(w), site) for w in code.writes):
                    return True
        return False

    def _keep_set_members(self, t: StateTable, i: int, alone: Callable[[], bool]) -> bool:
        """Keep members a test *added* to a set once a later test added them again after a
        reset: the set of a "done already" memo (``if h not in done: validate(); done.add(h)``),
        whose members stand for work that gives the same result each time (learned within a
        run: such members are often hashes, which differ between processes).  Only members
        that are plain values (strings, numbers, tuples of them: a registry of classes or
        functions is not a memo), only when the test removed none (an evicting structure),
        and only as :meth:`_may_learn` allows (a writer that adds without looking first is
        a registry; one that warns, logs or prints is a "once" registry).  True when every
        member it gained was kept (nothing left to put back)."""
        if t.modname.startswith("<"):
            return False  # a fixture's value: what tests put there is theirs
        live, snap = t.lives[i], t.snaps[i]
        try:
            # (set's own operations: a subclass's are the project's code.)
            if not set.issubset(snap, live):
                return False  # members removed
            added = list(set.difference(live, snap))
        except Exception:
            return False
        if not added or not all(map(_stable_repr, added)):
            return False
        site = t.sites[i]
        declared = bool(self.keep) and any(fnmatch.fnmatchcase(site, p) for p in self.keep)
        if not declared and not self.learn_memo:
            return False
        verdict: list[bool] = []

        def allowed() -> bool:
            if not verdict:
                verdict.append(
                    alone()
                    and (
                        declared
                        or (
                            t.modname not in self.test_code
                            and self._may_learn(site)
                            and not self._observed(site)
                        )
                    )
                )
            return verdict[0]

        keep: list[Any] = []
        for m in added:
            if declared:
                if allowed():
                    keep.append(m)
                continue
            key = (site, m)  # (not saved for the next run: see above)
            seen = self.memo.get(key)
            if seen is None:
                self.memo[key] = (m, 0, 0)
            elif allowed():
                self.memo[key] = (m, seen[1] + 1, seen[2])
                keep.append(m)
        for m in keep:
            snap.add(m)
            self.memo_kept.append(f"{site}{{{key_repr(m)}}}")
        return len(keep) == len(added)

    def _may_learn(self, site: str, need_writer: bool = False) -> bool:
        """Whether entries added to the dict at ``site`` may be memo entries, as far as
        the static pass sees its writers in the running test's module and in the dict's
        own module: not when a test function writes it (a test setting a flag twice is
        not a cache), nor when a function writes it without reading it (a setter; a memo
        function looks the key up first).  Writers it cannot see leave the learning as
        it was, unless ``need_writer``: then one that reads first must be seen."""
        mod = self.test_module
        where = getattr(mod, "__file__", None) or getattr(mod, "__name__", None) or ""
        key = (site, where, need_writer)
        verdict = self.memo_verdicts.get(key)
        if verdict is None:
            verdict = self._judge_memo(site, mod, need_writer)
            self.memo_verdicts[key] = self.memo_verdicts_new[key] = verdict
        return verdict

    def _judge_memo(self, site: str, test_module: object, need_writer: bool) -> bool:
        owner = sys.modules.get(site.partition(":")[0])
        # Code that writes into the site names it (or the static pass could not tell
        # either), so a test module that never mentions it is not read.
        root = _last_name(site)
        seen_writer = False
        for mod, in_test in ((test_module, True), (owner, False)):
            if in_test and mod is not owner and not self._mentions(mod, root):
                continue
            state = self._static_state(mod)
            if state is None:
                continue
            inside = (site + ".", site + "[")
            bodies = set(state.classes)
            for code in state.code:
                if code.qualname == "<module>" or code.qualname in bodies:
                    continue  # the module's or a class's own initialisation
                # Writes into the object (not to a container holding it: a registry
                # filled with classes does not write their attributes).
                written = [w for w in code.writes if w == site or w.startswith(inside)]
                if not written:
                    continue
                if all(w in code.clears for w in written):
                    continue  # only empties it: an invalidation (clear_caches), no setter
                if not any(sites_overlap(r, site) for r in code.reads) and not (
                    not in_test and self._memo_helper(mod, state, code, site, test_module)
                ):
                    return False
                if in_test and code.qualname.rpartition(".")[2].startswith("test"):
                    return False
                if self._effects(mod, code) or (not in_test and self._reads_env(mod, code)):
                    return False
                seen_writer = seen_writer or not in_test
        return seen_writer or not need_writer

    def _seen_by_code(self, site: str, hide_ok: bool = False) -> bool:
        """:meth:`_observed`, noting a site it keeps from being learned.  ``hide_ok``: a
        dict memo that only test modules read is learned all the same, its entries hidden
        from the tests of those modules."""
        if self._observed(site) or (not hide_ok and site in self._read_by_tests):
            if site not in self.observed_memos:
                self._observed_pending[site] = None
            return True
        return False

    def _observed(self, site: str, stats: bool = False) -> bool:
        """Whether project code, the tests included, looks at memo ``site`` itself, not
        only through the code that fills it: reads it outside its own module (``len``,
        ``in``, a comparison), or, for a functools cache (``stats``), calls a function
        that uses ``cache_info`` on it anywhere.  Learned entries would show there: a
        test counting a memo's entries or a cache's hits would see what no fresh process
        shows.  Once per site for the same code (the project's files, tests included: see
        code_stamp), kept with the other verdicts; the scan reads every project source."""
        key = (site, "<observed>", stats)
        got = self.memo_verdicts.get(key)
        if got is None:
            if not stats and site in self._read_by_tests:
                return False
            tests: set[str] = set()
            got = self._find_observer(site, stats, None if stats else tests)
            if got or not tests:
                self.memo_verdicts[key] = self.memo_verdicts_new[key] = got
            else:
                # Read only by test modules: found again each run (which modules are
                # the tests' is this run's), not kept with the verdicts.
                self._read_by_tests[site] = tests
        return got

    def _find_observer(self, site: str, stats: bool, tests: set[str] | None = None) -> bool:
        owner = site.partition(":")[0]
        inside = (site + ".", site + "[")
        root = _last_name(site).encode()
        sources = self._project_sources()
        if stats:
            if self._stats_sources is None:
                self._stats_sources = [x for x in sources if b"cache_info" in x[2]]
            sources = self._stats_sources
        for name, mod, _ in [x for x in sources if root in x[2]]:
            if name == owner and not stats:
                if self._hands_out(mod, site, sources):
                    return True
                continue
            state = self._static_state(mod)
            names = self._code_names(mod) if stats else None
            if state is None or (stats and names is None):
                return True  # it names the memo, and what it does with it is not known
            for code in state.code:
                # (The site or what is in it: code reading what holds it, a class it
                # calls, does not look into it.)
                if not any(r == site or r.startswith(inside) for r in code.reads):
                    continue
                if stats:
                    used = names.get((code.firstlineno, code.qualname.rpartition(".")[2]))  # type: ignore[union-attr]
                    if used is None or "cache_info" in used:
                        return True
                    continue
                written = [w for w in code.writes if w == site or w.startswith(inside)]
                if written and all(w in code.clears for w in written):
                    continue  # empties it first: sees what a fresh process shows
                if tests is not None and name in self.test_modules:
                    tests.add(name)  # only its tests are to see the memo unlearned
                    break
                return True
        return False

    def _hands_out(
        self, mod: types.ModuleType, site: str, sources: list[tuple[str, Any, bytes]]
    ) -> bool:
        """Whether a function of memo ``site``'s own module reads the memo without
        filling it (a count or a listing of the cache) and is called from elsewhere (by
        its name in another project source, the tests included): what it returns would
        show learned entries.  A reader that only the module's own code calls, or that
        calls a function filling the memo (the lookup half of freezegun's module cache),
        is the memo's own code."""
        state = self._static_state(mod)
        if state is None:
            return False
        inside = (site + ".", site + "[")
        bodies = set(state.classes)
        owner = site.partition(":")[0]
        code_names = self._code_names(mod) or {}
        readers, fillers = [], set()
        for code in state.code:
            if code.qualname == "<module>" or code.qualname in bodies:
                continue
            if any(w == site or w.startswith(inside) for w in code.writes):
                fillers.add(code.qualname.rpartition(".")[2])  # (or empties it)
            elif any(r == site or r.startswith(inside) for r in code.reads):
                readers.append(code)
        for code in readers:
            short = code.qualname.rpartition(".")[2]
            if fillers & code_names.get((code.firstlineno, short), frozenset()):
                continue
            called = re.compile(rb"\b%s\b" % re.escape(short.encode()))
            if any(called.search(text) for name, _, text in sources if name != owner):
                return True
        return False

    def _project_sources(self) -> list[tuple[str, types.ModuleType, bytes]]:
        """(name, module, source) of the project's modules with a Python source (once a
        session: what the tests are is this run's); a module without one has no code the
        static pass could look at."""
        got = self._project_texts
        if got is None:
            got = self._project_texts = []
            mods = sys.modules
            for name in sorted(self.project):
                mod = mods.get(name)
                f = getattr(mod, "__file__", None)
                if mod is None or not isinstance(f, str) or not f.endswith(".py"):
                    continue
                text = self._source(f)
                if text is not None:
                    got.append((name, mod, text))
        return got

    def _effects(self, mod: object, code: Any) -> bool:
        """Whether a function that writes a memo candidate also warns, logs, prints or
        registers something (a "warn once" registry: an entry kept would silence the
        warning a later test expects).  By the names its compiled code uses; True when
        the source cannot be compiled."""
        used = self._names_used(mod, code)
        if used is None:
            return True
        if _EFFECT_NAMES.isdisjoint(used):
            return False
        calls = self._effect_calls.get(getattr(mod, "__file__", None) or "")
        key = (code.firstlineno, code.qualname.rpartition(".")[2])
        return True if calls is None else calls.get(key, True)

    def _names_used(self, mod: object, code: Any) -> Any:
        """The names the compiled code of function ``code`` (of the static pass) uses;
        None when the module's source cannot be compiled or the function is not found."""
        names = self._code_names(mod)
        if names is None:
            return None
        return names.get((code.firstlineno, code.qualname.rpartition(".")[2]))

    def _reads_env(self, mod: object, code: Any) -> bool:
        """Whether a function that fills a memo candidate reads environment variables
        itself (``os.environ``, ``getenv``): its entries depend on what tests set with
        ``monkeypatch.setenv``, which no reset of the memo sees.  True when the source
        cannot be compiled."""
        used = self._names_used(mod, code)
        return used is None or not _ENV_NAMES.isdisjoint(used)

    def _kept_together(self, site: str, beside: list[str]) -> bool:
        """Whether code of ``site``'s module that writes ``site`` also writes one of the
        sites ``beside`` it (an order queue or a hit counter kept with a memo dict, as
        globals or as attributes of one class).  True when the module's source cannot be
        analysed, or no code of it is seen writing ``site`` (a helper filling whatever
        container it is passed: what else it fills is not seen either)."""
        if site in self.writers:
            writers = self.writers[site]
        else:
            # What each function that writes ``site`` writes (once per site: a memo
            # whose neighbours change is asked about after many tests).
            state = self._static_state(sys.modules.get(site.partition(":")[0]))
            if state is None:
                writers = None
            else:
                bodies = set(state.classes)
                writers = [
                    sorted(code.writes)
                    for code in state.code
                    # (Initialisation binds every global.)
                    if code.qualname != "<module>"
                    and code.qualname not in bodies
                    and any(sites_overlap(w, site) for w in code.writes)
                ]
            self.writers[site] = self.writers_new[site] = writers
        if writers is None:
            return True
        for writes in writers:
            if any(sites_overlap(w, b) for w in writes for b in beside):
                return True
        # (A module's own namespace is written by name, `global X`: no writer to find.)
        return not writers and not site.endswith(":<globals>")

    def _memo_helper(
        self, mod: object, state: Any, writer: Any, site: str, test_module: object
    ) -> bool:
        """Whether a function of the dict's module that writes it without reading it is
        the filling half of a memo: every function of that module that calls it reads the
        site first (freezegun's ``_get_cached_module_attributes`` looks the entry up and
        calls ``_setup_module_cache`` on a miss), there is one at least, and the running
        test's module never names it.  Calls are found by name in the compiled code (a
        global or attribute name), so a helper reached another way is not a caller seen
        here: such a writer stays a setter unless its named callers all read first."""
        short = writer.qualname.rpartition(".")[2]
        if short.startswith("<") or (test_module is not mod and self._mentions(test_module, short)):
            return False
        names = self._code_names(mod)
        if names is None:
            return False
        callers = 0
        for code in state.code:
            if code is writer or code.qualname == "<module>":
                continue
            if short not in names.get((code.firstlineno, code.qualname.rpartition(".")[2]), ()):
                continue
            if not any(sites_overlap(r, site) for r in code.reads) or self._effects(mod, code):
                return False
            callers += 1
        return callers > 0

    def _code_names(self, mod: object) -> dict[tuple[int, str], frozenset[str]] | None:
        """(first line, name) of every code object compiled from a module's source -> the
        global and attribute names it uses (``co_names``); None without source."""
        f = getattr(mod, "__file__", None)
        if not isinstance(f, str):
            return None
        got = self._names_by_code.get(f, ())
        if got != ():
            return got  # type: ignore[return-value]
        out: dict[tuple[int, str], frozenset[str]] | None = None
        try:
            with open(f, "rb") as fh:
                tree = ast.parse(fh.read(), f)
            top = compile(tree, f, "exec", dont_inherit=True)
        except (OSError, SyntaxError, ValueError):
            pass
        else:
            out = {}
            todo = [top]
            while todo:
                code = todo.pop()
                key = (code.co_firstlineno, code.co_name)
                out[key] = out.get(key, frozenset()) | frozenset(code.co_names)
                todo += [c for c in code.co_consts if isinstance(c, types.CodeType)]
            self._effect_calls[f] = _effect_calls(tree)
        self._names_by_code[f] = out
        return out

    def _mentions(self, mod: object, name: str) -> bool:
        """Whether a module's source text contains ``name`` (True when it cannot be read)."""
        f = getattr(mod, "__file__", None)
        if not isinstance(f, str) or not name:
            return True
        text = self._source(f)
        return text is None or name.encode() in text

    def _source(self, f: str) -> bytes | None:
        """A file's bytes, read once (None: it cannot be read)."""
        text = self._sources.get(f)
        if text is None:
            try:
                with open(f, "rb") as fh:
                    text = self._sources[f] = fh.read()
            except OSError:
                return None
        return text

    def _static_state(self, mod: object) -> Any:
        """The static pass's view of a module's file (None: no source), once per file."""
        f = getattr(mod, "__file__", None)
        name = getattr(mod, "__name__", None)
        if not isinstance(f, str) or not isinstance(name, str) or not f.endswith(".py"):
            return None
        if f not in self._static:
            if self._file_cache is None:
                from isolator.analysis._tree import FileCache

                self._file_cache = FileCache(self.store_root)
            state = self._file_cache.analyze(f, name)
            self._static[f] = None if state.error else state
        return self._static[f]

    def save_static(self) -> None:
        """Keep the files analysed this run for the next (``.isolator/static-cache.json``)."""
        if self._file_cache is not None:
            self._file_cache.save()

    def code_stamp(self) -> str:
        """What memo knowledge from another run is valid for: this interpreter and
        environment, isolator's own modules (whose verdicts they are) and the project's
        module files as they are (path, size, modification time).  A memo entry
        recomputed the same by this code is recomputed the same by it again.  The
        interpreter is named by the file it is, not by the name that started it (a
        virtual environment's `python` and `python3`: `isolator run` starts through its
        console script's shebang, `python -m pytest` through what the user typed)."""
        import hashlib

        exe = os.path.realpath(sys.executable)
        h = hashlib.sha256(f"{sys.version}\0{sys.prefix}\0{exe}".encode())
        own = [os.path.join(d, f) for d in _OWN_DIRS for f in sorted(_py_files(d))]
        project = sorted(self.project - {"__main__"})  # (__main__: pytest's)
        for f in own + [getattr(sys.modules.get(name), "__file__", None) for name in project]:
            if isinstance(f, str):
                try:
                    st = os.stat(f)
                except OSError:
                    continue
                h.update(f"\0{f}\0{st.st_size}\0{st.st_mtime_ns}".encode())
        return h.hexdigest()

    def _absorb_submodules(self, kept: list[str]) -> None:
        """Submodules imported and kept stay bound on their (tracked) parent package."""
        for name in kept:
            parent, _, child = name.rpartition(".")
            t = self.tables.get(parent)
            if t is not None and t.lives and t.kinds[0] == 0:
                t.snaps[0][child] = sys.modules[name]

    def _check_children(self, out: Outcome) -> None:
        """Child processes the test started and left running (read only after a test that
        started one: the audit hook tells)."""
        now = live_children()
        if now is None:
            return
        helpers = _multiprocessing_helpers(self.modules.library_modules())
        for pid in helpers:
            now.pop(pid, None)
        deadline = _monotonic() + 0.05
        while any(pid not in self.children for pid in now) and _monotonic() < deadline:
            time.sleep(0.005)  # one that is exiting right now
            now = live_children() or {}
            for pid in helpers:
                now.pop(pid, None)
        for pid, name in sorted(now.items()):
            if pid not in self.children:
                out.unrestorable.append(
                    (f"<process>:{pid} ({name})", "child process still running after the test")
                )
        self.children = now  # each reported once

    def _leaked_threads(self) -> list[threading.Thread]:
        """Threads started since the baseline and still running (given 50 ms to end, and
        50 ms more after a collection: an idle pool's worker ends once the collector frees
        the executor that only a reference cycle, an exception's traceback, still held)."""
        leaked = [th for th in threading.enumerate() if th not in self.threads and th.is_alive()]
        _join_all(leaked, 0.05)
        leaked = [th for th in leaked if th.is_alive()]
        if leaked:
            gc.collect()
            _join_all(leaked, 0.05)
        return [th for th in leaked if th.is_alive()]

    def _check_threads(self, out: Outcome, leaked: list[threading.Thread]) -> None:
        for th in leaked:
            out.unrestorable.append((f"<thread>:{th.name}", "thread still running after the test"))
        self.leaked.update(leaked)
        # Report each leaked thread once.
        self.threads = {th for th in threading.enumerate() if th.is_alive()}
        self.thread_count = _thread._count()
        self._held = set()

    def threads_left_running(self) -> list[str]:
        """Names of the threads that earlier tests left running and that still run.  A
        forked child would have none of them: a test that hands work to one (a pool's
        worker, started by whichever test first used the pool) would wait there forever."""
        return [th.name for th in list(self.leaked) if th.is_alive()]

    # ------------------------------------------------------------- fixture scopes

    def probe_diffs(self) -> list[list[str]]:
        if not self.started:
            self._first_test()
        return [p.diff(snap) for p, snap in zip(self.probes, self.probe_snaps)]

    def phase_snaps(self) -> dict[int, Any]:
        """Before a higher-scoped fixture's set-up: snapshots of the resources that pytest
        changes during its phases (see :attr:`Probe.rebase`), for :meth:`push_scope`."""
        return {i: p.take() for i, p in enumerate(self.probes) if p.rebase is not None}

    def chain_marks(self) -> ChainMarks | None:
        """Before a higher-scoped fixture's set-up, in a test that an earlier test kept its
        state for (a state-setter chain): what differs from the baseline now, that test's
        writes, which stay out of the fixture's baseline (they are put back after this
        test, as without the fixture).  None when no state was kept."""
        if not self.holding:
            return None
        watches: dict[tuple[str, int], Any] = {}
        cells: dict[tuple[str, int], object] = {}
        for key, (idx, extras) in self._dirty_tables().items():
            t = self.tables[key]
            for i in idx:
                if t.kinds[i] in _MAPPING_KINDS:
                    live = as_read(t.lives[i])
                    watches[key, i] = {k: live.get(k, _EMPTY) for k in _diff_keys(live, t.snaps[i])}
                else:
                    watches[key, i] = t.copy_of(i)
            for j in extras[1]:
                cells[key, j] = _cell_value(t, j)
        added, replaced, deleted = self.modules.diff()
        mods = sys.modules
        modules = {n: mods.get(n, _EMPTY) for n in added + replaced + deleted}
        return ChainMarks(watches, cells, modules)

    def _fixture_part(
        self, dirty: dict[str, Any], chain: ChainMarks
    ) -> tuple[dict[str, Any], dict[str, dict[int, set[Any]]]]:
        """``dirty`` without what the chain's marks found changed before the fixture and
        the fixture left as it was; and, per table and mapping watch, those keys."""
        out: dict[str, Any] = {}
        keep_out: dict[str, dict[int, set[Any]]] = {}
        for key, (idx, (caches, cells, defaults, opaque)) in dirty.items():
            t = self.tables[key]
            mine: list[int] = []
            for i in idx:
                before = chain.watches.get((key, i), _MISSING)
                if before is _MISSING:
                    mine.append(i)
                elif t.kinds[i] in _MAPPING_KINDS:
                    live = as_read(t.lives[i])
                    keys = _diff_keys(live, t.snaps[i])
                    theirs = {k for k in keys if before.get(k, _MISSING) is live.get(k, _EMPTY)}
                    if len(theirs) < len(keys):
                        mine.append(i)
                    if theirs:
                        keep_out.setdefault(key, {})[i] = theirs
                elif _differs(t.lives[i], before):  # (as the check compares a snapshot)
                    mine.append(i)  # (changed by both: the fixture's baseline takes it all)
            cells = [
                j for j in cells if chain.cells.get((key, j), _MISSING) is not _cell_value(t, j)
            ]
            if mine or caches or cells or defaults or opaque:
                out[key] = (mine, (caches, cells, defaults, opaque))
        return out, keep_out

    def push_scope(
        self,
        key: int,
        undo_mark: int,
        files_mark: int,
        pre: list[list[str]],
        chain: ChainMarks | None = None,
        pre_snaps: dict[int, Any] | None = None,
    ) -> bool:
        """A higher-scoped fixture finished its setup: what it changed joins the baseline.

        ``pre`` is :meth:`probe_diffs` from before the fixture ran: only the process-wide
        sites that the fixture itself changed join the baseline, not pytest's own per-phase
        state (capture, PYTEST_CURRENT_TEST).  ``chain``: :meth:`chain_marks` from before
        it ran; ``pre_snaps``: :meth:`phase_snaps` from before it ran.  Returns False when
        the fixture changed nothing.
        """
        post = self.probe_diffs()
        _modules.collect_writes()
        # Aliases the fixture made, with what it bound on them, are its set-up (a test
        # of its scope alone gets them so from typing's caches): what a test binds on
        # them later goes to the undo log.
        _aliases.STATE.settle()
        probes_changed = [i for i, (a, b) in enumerate(zip(pre, post)) if a != b]
        dirty = self._dirty_tables()
        keep_out: dict[str, dict[int, set[Any]]] = {}
        if chain is not None:
            dirty, keep_out = self._fixture_part(dirty, chain)
        codes: list[tuple[StateTable, str, int, Any]] = []
        if self.files.code_written:
            self.files.code_written = False
            for t in self.tables.values():
                for i in t.dirty_codes():
                    where, fn, old = t.codes[i]
                    t.codes[i] = (where, fn, fn.__code__)  # baseline until its teardown
                    codes.append((t, "code", i, old))
        if self.tasks is not None:
            self.tasks.note()  # tasks it left pending (a server's) are the baseline's
        threads: set[threading.Thread] = set()
        if _thread._count() != self.thread_count:
            threads = {th for th in threading.enumerate() if th not in self.threads}
        children: dict[int, str] = {}
        if self.files.spawned:
            self.files.retake_tree()  # what its processes wrote so far is the baseline's
            now = live_children() or {}
            children = {pid: name for pid, name in now.items() if pid not in self.children}
        # Names the fixture imported, replaced (a fake module, mock.patch.dict) or removed.
        added, replaced, deleted = self.modules.diff()
        kept_names: list[str] = []
        if chain is not None:
            mods = sys.modules
            kept_names = [
                n
                for n in added + replaced + deleted
                if chain.modules.get(n, _MISSING) is mods.get(n, _EMPTY)
            ]
            if kept_names:
                gone = set(kept_names)
                added = [n for n in added if n not in gone]
                replaced = [n for n in replaced if n not in gone]
                deleted = [n for n in deleted if n not in gone]
        changed = (
            bool(probes_changed)
            or bool(codes)
            or bool(threads)
            or bool(children)
            or bool(dirty)
            or bool(added or replaced or deleted)
            or len(_modules.LOG.entries) > undo_mark
            or len(self.files.order) > files_mark
        )
        if not changed:
            return False
        log = _modules.LOG
        before, mods = self.modules.snap, sys.modules
        frame = Frame(
            key=key,
            modules={
                n: (before.get(n, _EMPTY), mods.get(n, _EMPTY)) for n in added + replaced + deleted
            },
            undo=log.entries[undo_mark:],
            files=self.files.take_since(files_mark),
        )
        self._record_deltas(frame, dirty, keep_out)
        frame.extras += codes
        frame.threads, frame.children = threads, children
        frame.fd = self.fd
        self.threads |= threads
        self.thread_count = _thread._count()
        self.children.update(children)
        del log.entries[undo_mark:]
        log.seen = {(id(m), n) for m, n, _ in log.entries}
        self._add_new_project_modules()
        self._set_tables(self._rebuild_dirty_tables(dirty, keep_out))
        snaps = list(self.probe_snaps)
        for i in probes_changed:
            probe = self.probes[i]
            new_sites = set(post[i]) - set(pre[i])
            if probe.absorb is not None:
                # Keyed probes (the environment): remember (old, new) per key.
                before = snaps[i]
                snaps[i] = probe.absorb(before, sorted(new_sites))
                keys = set(before) ^ set(snaps[i]) | {
                    k for k in before if k in snaps[i] and before[k] != snaps[i][k]
                }
                delta = {k: (before.get(k, _EMPTY), snaps[i].get(k, _EMPTY)) for k in keys}
                frame.probes.append((i, delta))
            elif probe.rebase is not None and pre_snaps and i in pre_snaps:
                frame.probes.append((i, snaps[i]))
                snaps[i] = probe.rebase(snaps[i], pre_snaps[i], probe.take())
            else:
                frame.probes.append((i, snaps[i]))
                snaps[i] = probe.take()
        self.probe_snaps = snaps
        snap = dict(sys.modules)
        for n in kept_names:  # (the chain's imports: unloaded after this test)
            was = before.get(n, _EMPTY)
            if was is _EMPTY:
                snap.pop(n, None)
            else:
                snap[n] = was
        self.modules.snap = snap
        self.modules.n = len(snap)
        self.frames.append(frame)
        return True

    def watch_value(self, key: int, name: str, value: object) -> bool:
        """A higher-scoped fixture's value is shared by the tests of its scope: what one
        writes into it (a function fixture filling pytest's ``doctest_namespace``, a test
        adding to a registry a session fixture returned) is put back after that test, as
        module state is, until the fixture's teardown (:meth:`pop_scope`).  Watched only
        where it holds state (containers, objects of project classes) not watched already
        as part of a module's.  Returns whether it is watched."""
        if value is None or type(value) in _UNWATCHED_VALUES:
            return False
        site, prefixes = f"<fixture>:{name}", tuple(self.project)
        # Leaving out what the module tables watch already.
        t = StateTable(SeenBeside([self._watched_ids()]))
        t.add_value(site, value, prefixes)
        if not (t.lives or t.cells or t.caches or t.opaque):
            return False
        table_key = f"<fixture {name}>@{key}"
        tables = dict(self.tables)
        tables[table_key] = t
        self._set_tables(tables)
        self._value_tables[key] = table_key
        return True

    def _watched_ids(self) -> set[int]:
        """The ids of the objects the tables watch, brought up to date with what each
        table watched since (a table's watches are only ever added to): a class-scoped
        fixture's value is not checked against a set of every watched object made anew.
        Made again when a table left (the objects it kept alive may be gone)."""
        tables = self.tables.values()
        counts = self._live_counts
        if not counts.keys() <= set(tables):
            counts.clear()
            self._live_ids = set()
        ids = self._live_ids
        for t in tables:
            n, lives = counts.get(t, 0), t.lives
            if len(lives) > n:
                ids.update(map(id, itertools.islice(lives, n, None)))
                counts[t] = len(lives)
        return ids

    def _add_new_project_modules(self) -> None:
        names = sys.modules.keys() - self._module_names_seen
        if not names:
            return
        self._module_names_seen |= names
        for name in names:
            mod = sys.modules.get(name)
            if isinstance(mod, types.ModuleType) and name not in self.project:
                if self.is_project(mod):
                    self.project.add(name)

    def _record_deltas(
        self, frame: Frame, dirty: dict[str, Any], keep_out: dict[str, dict[int, set[Any]]]
    ) -> None:
        """Note, per watch, what the fixture changed relative to the current baseline."""
        for key, (idx, extras) in dirty.items():
            t = self.tables[key]
            out = keep_out.get(key, {})
            for i in idx:
                kind, live, snap = t.kinds[i], as_read(t.lives[i]), t.snaps[i]
                if kind in _MAPPING_KINDS:
                    theirs = out.get(i, ())
                    delta = {
                        k: (snap.get(k, _EMPTY), live.get(k, _EMPTY))
                        for k in _diff_keys(live, snap)
                        if k not in theirs
                    }
                    frame.tables.append((t, i, kind, delta))
                else:
                    frame.tables.append((t, i, kind, snap))
            caches, cells, defaults, _ = extras
            frame.extras += [(t, "cache", j, (t.caches[j][2], t.cache_base.get(j))) for j in caches]
            frame.extras += [(t, "cell", j, t.cells[j][2]) for j in cells]
            frame.extras += [(t, "defaults", j, t.defaults[j][2:]) for j in defaults]

    def pop_scope(self, key: int) -> None:
        """That fixture was torn down: what it added to the baseline is taken out again.

        Only this fixture's own deltas are reverted; fixtures set up after it (a session
        fixture first used inside a module fixture's scope) keep theirs.
        """
        table_key = self._value_tables.pop(key, None)
        if table_key is not None:
            tables = dict(self.tables)
            tables.pop(table_key, None)
            self._set_tables(tables)
        for j in range(len(self.frames) - 1, -1, -1):
            if self.frames[j].key == key:
                break
        else:
            return
        frame = self.frames.pop(j)
        if frame.fd >= 0 and (self.popped_fd < 0 or frame.fd < self.popped_fd):
            self.popped_fd = frame.fd
        if frame.threads or frame.children:
            # Still running after the teardown: reported after the test that ends now.
            self.threads -= frame.threads
            self.thread_count = -1
            for pid in frame.children:
                self.children.pop(pid, None)
            self.files.spawned = self.files.spawned or bool(frame.children)
        # Tables are never replaced and watches only appended, so (table, index) still
        # names the watch the delta was taken from.
        live_tables = set(self.tables.values())  # tables hash by identity
        for t, i, kind, delta in frame.tables:
            if t not in live_tables or t.kinds[i] != kind:
                continue
            snap = t.snaps[i]
            if kind in _MAPPING_KINDS:
                _revert(snap, delta)
            elif kind == LIST:
                snap[:] = delta
            elif kind == SET:
                snap.clear()
                snap.update(delta)
            elif kind == DEQUE:
                snap.clear()
                snap.extend(delta)
            else:
                t.snaps[i] = delta
        touched = {t: None for t, _, _, _ in frame.tables}  # tables hash by identity
        for t in touched:
            t.forget_versions()
        for t, what, i, old in frame.extras:
            if t not in live_tables:
                continue
            if what == "cache":
                site, fn, _ = t.caches[i]
                size, base = old
                t.caches[i] = (site, fn, size)
                if base is None:
                    t.cache_base.pop(i, None)
                else:
                    t.cache_base[i] = base
                t.changed()
            elif what == "cell":
                site, cell, _ = t.cells[i]
                t.cells[i] = (site, cell, old)
                self.files.class_written = True  # (an instance's class: as for defaults)
            elif what == "code":
                where, fn, _ = t.codes[i]
                t.codes[i] = (where, fn, old)
                self.files.code_written = True  # (read after the next test)
                continue
            else:
                site, fn, _, _ = t.defaults[i]
                t.defaults[i] = (site, fn, *old)
                # Defaults are read only after an audit event of a rebinding: the baseline
                # moved instead, so the next check must read them.
                self.files.defaults_written = True
            touched[t] = None
        for t in touched:
            t.changed()  # snapshots replaced: the scopes lay this table out again
        for i, old in frame.probes:
            if self.probes[i].absorb is not None and isinstance(old, dict):
                cur = self.probe_snaps[i]
                for k, (was, now) in old.items():
                    if cur.get(k, _EMPTY) != now:
                        continue  # changed again by a later fixture
                    if was is _EMPTY:
                        cur.pop(k, None)
                    else:
                        cur[k] = was
            else:
                self.probe_snaps[i] = old
        _revert(self.modules.snap, frame.modules)
        self.modules.n = len(self.modules.snap)
        log = _modules.LOG
        # Older originals first in the log, so that undoing in reverse ends on them.
        log.entries[:0] = frame.undo
        log.seen |= {(id(m), n) for m, n, _ in frame.undo}
        self.files.give_back(frame.files)
