"""Process-wide state: environment, cwd, import system, logging, warnings, RNG, decimal...

Each *probe* knows how to take a snapshot of one resource, tell which sites differ from
it, and put it back.  Probes are ordered so that restoring one never disturbs another
(the cwd comes back before anything that resolves relative paths).
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # C-level getsignal: no enum conversion
import _thread
import _tracemalloc
import decimal
import faulthandler
import gc
import locale
import logging
import operator
import os
import random
import signal
import socket
import sys
import threading
import types
import warnings
from collections.abc import Callable
from typing import Any, Final

from isolator import _versions

try:
    import resource as _resource
except ImportError:  # (not on Windows)
    _resource = None  # type: ignore[assignment]

# Protect ourselves from code under test that monkeypatches these (coverage.py does the same).
_getcwd = os.getcwd
_chdir = os.chdir
_umask = os.umask
_getstate = random.getstate
_setstate = random.setstate
_environ_data: dict[Any, Any] = os.environ._data  # type: ignore[attr-defined]
_decode = os.environ.decodevalue
_decodekey = os.environ.decodekey

# The C function: locale.setlocale() is a Python wrapper that normalizes its arguments.
_query_locale: Callable[[int, str | None], str] = getattr(
    __import__("_locale"), "setlocale", locale.setlocale
)

_SIGNALS = [
    s
    for s in ("SIGINT", "SIGTERM", "SIGHUP", "SIGALRM", "SIGUSR1", "SIGUSR2", "SIGCHLD", "SIGPIPE")
    if hasattr(signal, s)
]

_get_ident = _thread.get_ident
_MAIN_IDENT = threading.main_thread().ident

_DECIMAL_FIELDS = ("prec", "rounding", "Emin", "Emax", "capitals", "clamp")


_DECIMAL_SCALARS = operator.attrgetter(*_DECIMAL_FIELDS)


def _decimal_state(ctx: decimal.Context) -> tuple[object, ...]:
    return (_DECIMAL_SCALARS(ctx), ctx.traps.copy())


def _logger_states() -> list[tuple[str, tuple[object, ...]]]:
    manager = logging.Logger.manager
    out = [("root", _logger_state(logging.root))]
    for name, lg in list(manager.loggerDict.items()):
        if isinstance(lg, logging.Logger):
            out.append((name, _logger_state(lg)))
    return out


def _logger_state(lg: logging.Logger) -> tuple[object, ...]:
    return (lg.level, lg.disabled, lg.propagate, tuple(lg.handlers), tuple(lg.filters))


class Probe:
    """One process-wide resource."""

    __slots__ = ("name", "take", "diff", "put", "absorb", "rebase")

    def __init__(
        self,
        name: str,
        take: Callable[[], Any],
        diff: Callable[[Any], list[str]],
        put: Callable[[Any, list[str]], None],
        absorb: Callable[[Any, list[str]], Any] | None = None,
        rebase: Callable[[Any, Any, Any], Any] | None = None,
    ):
        self.name = name
        self.take = take
        self.diff = diff
        self.put = put
        # absorb(snapshot, sites) -> a snapshot in which those sites have their current
        # value; None means "take a fresh snapshot".
        self.absorb = absorb
        # rebase(snapshot, before, after) -> the snapshot with what changed from ``before``
        # to ``after`` (both taken inside one of pytest's phases, around a fixture's
        # set-up), for a resource pytest itself changes during each phase (logging).
        self.rebase = rebase


# --------------------------------------------------------------------- probes


# pytest sets and removes this one itself around every phase.
_PYTEST_VAR = os.environ.encodekey("PYTEST_CURRENT_TEST")


def _env_take() -> dict[Any, Any]:
    return dict(_environ_data)


def _env_diff(snap: dict[Any, Any]) -> list[str]:
    cur = _environ_data.get(_PYTEST_VAR)
    if cur is None:
        snap.pop(_PYTEST_VAR, None)
    else:
        snap[_PYTEST_VAR] = cur
    if _environ_data == snap:
        return []
    keys = [k for k in snap if k not in _environ_data]
    keys += [k for k, v in _environ_data.items() if snap.get(k, None) != v]
    return [f"<env>:{_decodekey(k)}" for k in keys]


def _env_put(snap: dict[Any, Any], sites: list[str]) -> None:
    for site in sites:
        key = site.split(":", 1)[1]
        enc = os.environ.encodekey(key)
        if enc in snap:
            os.environ[key] = _decode(snap[enc])
        else:
            try:
                del os.environ[key]
            except KeyError:
                pass


def _env_absorb(snap: dict[Any, Any], sites: list[str]) -> dict[Any, Any]:
    new = dict(snap)
    for site in sites:
        enc = os.environ.encodekey(site.split(":", 1)[1])
        if enc in _environ_data:
            new[enc] = _environ_data[enc]
        else:
            new.pop(enc, None)
    return new


def _cwd_take() -> str:
    return _getcwd()


def _cwd_diff(snap: str) -> list[str]:
    try:
        return [] if _getcwd() == snap else ["<cwd>"]
    except OSError:  # the test deleted the directory it was in
        return ["<cwd>"]


def _cwd_put(snap: str, sites: list[str]) -> None:
    _chdir(snap)


def _list_probe(name: str, get: Callable[[], list[Any]]) -> Probe:
    def take() -> tuple[list[Any], list[Any]]:
        lst = get()
        return lst, list(lst)

    def diff(snap: tuple[list[Any], list[Any]]) -> list[str]:
        obj, items = snap
        return [] if get() is obj and obj == items else [name]

    def put(snap: tuple[list[Any], list[Any]], sites: list[str]) -> None:
        obj, items = snap
        obj[:] = items
        attr = name.strip("<>").split(".", 1)[1]
        if getattr(sys, attr, None) is not obj:
            setattr(sys, attr, obj)

    return Probe(name, take, diff, put)


_LOGGER_ATTRS = operator.attrgetter("level", "disabled", "propagate")
_HANDLERS = operator.attrgetter("handlers")
_FILTERS = operator.attrgetter("filters")
_DICT = operator.attrgetter("__dict__")


class _LoggingSnap:
    """Logger states, plus the same data laid out flat for a C-level clean check.

    Where dict version tags can be trusted (see ``_versions``), the loggers' ``__dict__``
    tags stand for their level, disabled and propagate attributes and the bindings of
    their handler and filter lists: one read of a few bytes each, not an attribute read
    per logger and field."""

    __slots__ = (
        "states", "disable", "n", "loggers", "attrs", "hl", "hc", "fl", "fc", "dicts", "views",
        "image",
    )  # fmt: skip

    def __init__(self) -> None:
        manager = logging.Logger.manager
        self.states = _logger_states()
        self.disable = manager.disable
        self.n = len(manager.loggerDict)
        self.loggers = [logging.root] + [
            lg for lg in manager.loggerDict.values() if isinstance(lg, logging.Logger)
        ]
        self.attrs = list(map(_LOGGER_ATTRS, self.loggers))
        self.hl = list(map(_HANDLERS, self.loggers))
        self.hc = [list(h) for h in self.hl]
        self.fl = list(map(_FILTERS, self.loggers))
        self.fc = [list(f) for f in self.fl]
        self.views: list[memoryview] | None = None
        self.image = b""
        # Kept alive here (the tags are read at their addresses), and compared by identity
        # with the loggers' (a replaced __dict__ would leave its old tag unmoved).
        self.dicts = list(map(_DICT, self.loggers))
        cells = [_versions.cell_for(d) for d in self.dicts]
        if all(c is not None for c in cells):
            self.views = [memoryview(c).cast("B") for c in cells]  # type: ignore[arg-type]
            self.image = b"".join(self.views)

    def clean(self) -> bool:
        if len(logging.Logger.manager.loggerDict) != self.n or (
            logging.root.manager.disable != self.disable
        ):
            return False
        views = self.views
        if (
            views is None
            or b"".join(views) != self.image
            or any(map(operator.is_not, map(_DICT, self.loggers), self.dicts))
        ):
            lgs = self.loggers
            if not (
                list(map(_LOGGER_ATTRS, lgs)) == self.attrs
                and not any(map(operator.is_not, map(_HANDLERS, lgs), self.hl))
                and not any(map(operator.is_not, map(_FILTERS, lgs), self.fl))
            ):
                return False
            if views is not None:
                self.image = b"".join(views)  # written back as it was: trust the tags again
        # The lists' contents (appended to in place, which no tag sees).
        return self.hl == self.hc and self.fl == self.fc


def _logging_take() -> _LoggingSnap:
    return _LoggingSnap()


_FRESH_LOGGER = (logging.NOTSET, False, True, (), ())


def _logging_diff(snap: _LoggingSnap) -> list[str]:
    if snap.clean():
        return []
    states, disable = snap.states, snap.disable
    now = _logger_states()
    out = []
    if logging.root.manager.disable != disable:
        out.append("<logging>:<disable>")
    if now != states:
        old = dict(states)
        for name, st in now:
            # A logger created during the test is compared with a fresh one.
            if old.get(name, _FRESH_LOGGER) != st:
                out.append(f"<logging>:{name}")
    return out


def _merged(base: tuple[Any, ...], before: tuple[Any, ...], after: tuple[Any, ...]) -> list[Any]:
    """``base``'s items less those taken out between ``before`` and ``after``, plus those
    put in (in their order)."""
    out = [x for x in base if x in after or x not in before]
    return out + [x for x in after if x not in before and x not in out]


def _logging_rebase(base: _LoggingSnap, before: _LoggingSnap, after: _LoggingSnap) -> _LoggingSnap:
    """The logging baseline after a higher-scoped fixture's set-up: ``base`` with the
    fields, handlers and filters that changed from ``before`` to ``after`` (a snapshot
    taken just now, made over into the result).  Both were taken inside pytest's set-up
    phase, with its capture handlers on the root logger (and its level, under
    ``log_level``): those are pytest's, and never join the baseline."""
    old, was = dict(base.states), dict(before.states)
    states: list[tuple[str, tuple[object, ...]]] = []
    for name, now in after.states:
        b = old.get(name, _FRESH_LOGGER)
        p = was.get(name, _FRESH_LOGGER)
        fields = [now[k] if now[k] != p[k] else b[k] for k in range(3)]
        handlers = tuple(_merged(b[3], p[3], now[3]))  # type: ignore[arg-type]
        filters = tuple(_merged(b[4], p[4], now[4]))  # type: ignore[arg-type]
        states.append((name, (*fields, handlers, filters)))
    snap = after  # (its loggers are in the order of ``states``)
    snap.states = states
    if after.disable == before.disable:
        snap.disable = base.disable
    snap.attrs = [(st[0], st[1], st[2]) for _, st in states]
    snap.hc = [list(st[3]) for _, st in states]  # type: ignore[call-overload]
    snap.fc = [list(st[4]) for _, st in states]  # type: ignore[call-overload]
    snap.image = b""  # (not what the tags say now: compared in full once)
    return snap


def _logging_put(snap: _LoggingSnap, sites: list[str]) -> None:
    states, disable = snap.states, snap.disable
    logging.disable(disable)
    old = dict(states)
    for site in sites:
        name = site.split(":", 1)[1]
        if name == "<disable>":
            continue
        lg = logging.root if name == "root" else logging.getLogger(name)
        level, disabled, propagate, handlers, filters = old.get(name, _FRESH_LOGGER)
        lg.setLevel(level)  # type: ignore[arg-type]
        lg.disabled = disabled  # type: ignore[assignment]
        lg.propagate = propagate  # type: ignore[assignment]
        lg.handlers[:] = list(handlers)  # type: ignore[call-overload]
        lg.filters[:] = list(filters)  # type: ignore[call-overload]


_warnings: Any = warnings  # filters/onceregistry are module internals typeshed does not list


def _warnings_take() -> tuple[list[Any], list[Any], dict[Any, Any]]:
    return _warnings.filters, list(_warnings.filters), dict(_warnings.onceregistry)


def _warnings_diff(snap: tuple[list[Any], list[Any], dict[Any, Any]]) -> list[str]:
    obj, items, once = snap
    if _warnings.filters is obj and obj == items and _warnings.onceregistry == once:
        return []
    return ["<warnings>"]


def _warnings_put(snap: tuple[list[Any], list[Any], dict[Any, Any]], sites: list[str]) -> None:
    obj, items, once = snap
    obj[:] = items
    _warnings.filters = obj
    _warnings.onceregistry.clear()
    _warnings.onceregistry.update(once)
    _warnings._filters_mutated()


def _mt_fingerprint_reader() -> Callable[[], object] | None:
    """A cheap fingerprint of the global Mersenne Twister: its position and first words.

    ``random.getstate()`` builds a 625-int tuple (tens of microseconds); the C struct of
    CPython's ``_random.Random`` is ``{PyObject_HEAD; int index; uint32_t state[624];}``.
    The layout is checked against getstate() before it is trusted; else None.
    """
    try:
        from isolator import _cmem

        inst = random._inst
        if type(inst).__mro__[-2].__name__ != "Random" or sys.implementation.name != "cpython":
            return None
        base = id(inst) + object.__basicsize__
        index = _cmem.c_int.from_address(base)
        words = (_cmem.c_uint32 * 4).from_address(base + _cmem.sizeof(_cmem.c_int))
        state = inst.getstate()[1]
        if index.value != state[624] or list(words) != list(state[:4]):
            return None
        gauss = operator.attrgetter("gauss_next")
        # The index and the first words, read as raw bytes in one call.
        raw = memoryview((_cmem.c_char * (_cmem.sizeof(_cmem.c_int) + 16)).from_address(base))

        def read() -> object:
            return (raw.tobytes(), gauss(inst))

        return read
    except Exception:
        return None


_mt_read = _mt_fingerprint_reader()


def _random_take() -> tuple[object, Any]:
    return (_mt_read() if _mt_read is not None else None), _getstate()


def _random_diff(snap: tuple[object, Any]) -> list[str]:
    fp, state = snap
    if _mt_read is not None:
        return [] if _mt_read() == fp else ["<random>"]
    return [] if _getstate() == state else ["<random>"]


def _random_put(snap: tuple[object, Any], sites: list[str]) -> None:
    _setstate(snap[1])


def _decimal_take() -> tuple[decimal.Context, tuple[object, ...], decimal.Context]:
    ctx = decimal.getcontext()
    return ctx, _decimal_state(ctx), ctx.copy()


def _decimal_diff(snap: tuple[decimal.Context, tuple[object, ...], decimal.Context]) -> list[str]:
    ctx, state, _ = snap
    now = decimal.getcontext()
    if now is ctx and _DECIMAL_SCALARS(now) == state[0] and now.traps == state[1]:
        return []  # (no copy of the traps made to compare them)
    return ["<decimal>"]


def _decimal_put(
    snap: tuple[decimal.Context, tuple[object, ...], decimal.Context], sites: list[str]
) -> None:
    ctx, _, saved = snap
    for f in _DECIMAL_FIELDS:
        setattr(ctx, f, getattr(saved, f))
    ctx.traps.update(saved.traps)
    ctx.clear_flags()
    decimal.setcontext(ctx)


def _scalar_probe(name: str, get: Callable[[], Any], set_: Callable[[Any], object]) -> Probe:
    def diff(snap: Any) -> list[str]:
        return [] if get() == snap else [name]

    def put(snap: Any, sites: list[str]) -> None:
        set_(snap)

    return Probe(name, get, diff, put)


def _get_umask() -> int:
    old = _umask(0o22)
    _umask(old)
    return old


def _get_locale() -> str:
    return _query_locale(locale.LC_ALL, None)


def _set_locale(value: str) -> None:
    try:
        locale.setlocale(locale.LC_ALL, value)
    except locale.Error:
        pass


def _signals_take() -> tuple[list[Any], list[Any], tuple[bool, ...]]:
    sigs = []
    for name in _SIGNALS:
        sig = getattr(signal, name)
        try:
            signal.getsignal(sig)
        except (ValueError, OSError):
            continue
        sigs.append(sig)
    return sigs, list(map(_signal.getsignal, sigs)), _armed()


def _signals_diff(snap: tuple[list[Any], list[Any], tuple[bool, ...]]) -> list[str]:
    sigs, handlers, armed = snap
    if _get_ident() != _MAIN_IDENT:
        return []
    timers = _armed()
    if timers == armed and not any(map(operator.is_not, map(_signal.getsignal, sigs), handlers)):
        return []
    return [
        f"<signal>:{signal.Signals(s).name}"
        for s, h in zip(sigs, handlers)
        if _signal.getsignal(s) is not h
    ] + ["<signal>:<timers>"] * (timers != armed)


def _signals_put(snap: tuple[list[Any], list[Any], tuple[bool, ...]], sites: list[str]) -> None:
    sigs, handlers, armed = snap
    # Timers first: an alarm left armed would fire on the handler put back (the default
    # one ends the process), in a later test.
    for which, was, now in zip(_ITIMERS, armed, _armed()):
        if now and not was:
            signal.setitimer(which, 0)
        elif was and not now:
            UNRESTORABLE.append(("<signal>:<timers>", "the test disarmed a timer set before it"))
    for s, h in zip(sigs, handlers):
        if h is not None and _signal.getsignal(s) is not h:
            signal.signal(s, h)


def _stdio_take() -> tuple[Any, Any, Any]:
    return sys.stdin, sys.stdout, sys.stderr


def _stdio_diff(snap: tuple[Any, Any, Any]) -> list[str]:
    if sys.stdin is snap[0] and sys.stdout is snap[1] and sys.stderr is snap[2]:
        return []
    names = ("stdin", "stdout", "stderr")
    return [f"<sys.{n}>" for n, old in zip(names, snap) if getattr(sys, n) is not old]


def _stdio_put(snap: tuple[Any, Any, Any], sites: list[str]) -> None:
    sys.stdin, sys.stdout, sys.stderr = snap


_SYS_HOOKS = (
    "excepthook",
    "displayhook",
    "breakpointhook",
    "unraisablehook",
    "dont_write_bytecode",
)


def _sys_hooks_take() -> tuple[object, ...]:
    return tuple(getattr(sys, n, None) for n in _SYS_HOOKS)


def _sys_hooks_diff(snap: tuple[object, ...]) -> list[str]:
    if not any(map(operator.is_not, _sys_hooks_take(), snap)):
        return []
    return [f"sys:{n}" for n, old in zip(_SYS_HOOKS, snap) if getattr(sys, n, None) is not old]


def _sys_hooks_put(snap: tuple[object, ...], sites: list[str]) -> None:
    for n, old in zip(_SYS_HOOKS, snap):
        setattr(sys, n, old)


_SYS_HOOKS_GET = operator.attrgetter(*_SYS_HOOKS)


# Patches a test started with unittest.mock's ``patch(...).start()`` (``patch.object``,
# ``patch.dict``, ``patch.multiple``) and never stopped: whatever they patched -- a library
# class's attribute, an object's, a dict's keys -- comes back when they are stopped, which
# is what the next test would find in a fresh process.  (Patches a higher-scoped fixture
# started are part of the baseline while it lives.)  The backport ``mock`` has its own list.
_MOCK_MODULES = ("unittest.mock", "mock.mock")


def _patches_take() -> tuple[object, ...]:
    out: tuple[object, ...] = ()
    mods = sys.modules
    for name in _MOCK_MODULES:
        mod = mods.get(name)
        if mod is not None:
            active = getattr(getattr(mod, "_patch", None), "_active_patches", None)
            if type(active) is list and active:
                out += tuple(active)
    return out


class _PatchSnap(tuple):  # type: ignore[type-arg]
    """The active patches (compared as a plain tuple), with the object each ``patch`` had
    put in place when the snapshot was taken (by ``id`` of the patcher): a patch that a
    test stops is started again with it, so that what it patched holds the very object
    it held before the test (a mock made by ``new_callable`` or ``autospec`` included)."""

    values: dict[int, object]


def _patches_snap() -> tuple[object, ...]:
    """The probe's snapshot: :func:`_patches_take` with what each patch put in place."""
    active = _patches_take()
    if not active:
        return active
    snap = _PatchSnap(active)
    snap.values = values = {}
    for patch in active:
        for one in (patch, *(getattr(patch, "additional_patchers", None) or ())):
            target, attribute = getattr(one, "target", None), getattr(one, "attribute", None)
            if target is None or not isinstance(attribute, str):
                continue
            try:  # as set (a staticmethod stays one), where the object keeps a __dict__
                values[id(one)] = vars(target)[attribute]
            except (TypeError, KeyError):
                try:
                    values[id(one)] = getattr(target, attribute)
                except Exception:
                    pass
    return snap


def _restart(patch: object, values: dict[int, object]) -> bool:
    """Start again a patch a test stopped, putting back what it had put in place: the
    recorded object for ``patch``/``patch.object``/``patch.multiple`` (never a new
    mock), its own values for ``patch.dict``.  False where that cannot be done."""
    parts = (patch, *(getattr(patch, "additional_patchers", None) or ()))
    if hasattr(patch, "in_dict"):
        saved: list[tuple[Any, object, object, object]] = []
    elif all(hasattr(one, "new") and id(one) in values for one in parts):
        # (the mock's configuration, ``return_value=`` and the like, went into it)
        saved = [(one, one.new, one.autospec, one.kwargs) for one in parts]
    else:
        return False
    # patch.dict copies the dict as its original again when started: the copy it took
    # before the test is the one its stop must put back (a fixture's ``patch.dict
    # (os.environ)`` started while pytest's PYTEST_CURRENT_TEST was set).
    original = getattr(patch, "_original", None)
    try:
        for one, _, _, _ in saved:
            one.new, one.autospec, one.kwargs = values[id(one)], None, {}
        patch.start()  # type: ignore[attr-defined]
    except Exception:
        return False
    else:
        if original is not None:
            patch._original = original  # type: ignore[attr-defined]
    finally:
        for one, new, autospec, kwargs in saved:
            one.new, one.autospec, one.kwargs = new, autospec, kwargs
    return True


def _patch_site(patch: object) -> str:
    """``<mock.patch>:module:Class.attribute`` for a patch's target (while it is on)."""
    attribute = getattr(patch, "attribute", None)
    target = getattr(patch, "target", None)
    if target is None and attribute is not None:
        try:  # a stopped patch: its getter names the target again (imported already)
            target = patch.getter()  # type: ignore[attr-defined]
        except Exception:
            target = None
    if attribute is None:  # patch.dict: the dict it changed
        target, attribute = getattr(patch, "in_dict", None), "<keys>"
    if isinstance(target, types.ModuleType):
        owner = f"{target.__name__}:"
    elif isinstance(target, type):
        owner = f"{target.__module__}:{target.__qualname__}."
    else:
        owner = f"<{type(target).__name__} object>."
    return f"<mock.patch>:{owner}{attribute}"


def _patches_diff(snap: tuple[object, ...]) -> list[str]:
    now = _patches_take()
    if now == snap:
        return []
    before = {id(p) for p in snap}
    after = {id(p) for p in now}
    return [_patch_site(p) for p in now if id(p) not in before] + [
        _patch_site(p) for p in snap if id(p) not in after
    ]


def _patches_put(snap: tuple[object, ...], sites: list[str]) -> None:
    before = {id(p) for p in snap}
    now = _patches_take()
    for patch in reversed(now):  # the last started first, as stopall() does
        if id(patch) in before:
            continue
        site = _patch_site(patch)
        try:
            patch.stop()  # type: ignore[attr-defined]
        except Exception as exc:
            UNRESTORABLE.append((site, f"stopping the patch raised {exc!r}"))
    after = {id(p) for p in now}
    values: dict[int, object] = getattr(snap, "values", {})
    restarted = False
    for patch in snap:
        if id(patch) not in after:
            # A patch a higher-scoped fixture started and the test stopped (a mocker's
            # ``restart()``, a ``stopall()``): started again, as the next test alone
            # would find it; the test's own patches were stopped above, so what it
            # patched is as before the test, for it to take as its original again.
            if _restart(patch, values):
                restarted = True
                continue
            UNRESTORABLE.append((_patch_site(patch), "the test stopped a patch started before it"))
            # What it had patched stays as the test left it, like the report says.
            for one in (patch, *(getattr(patch, "additional_patchers", None) or ())):
                target, attribute = _patch_target(one), getattr(one, "attribute", None)
                if target is not None and isinstance(attribute, str):
                    LEFT_AS_IS.append((target, attribute))
    if restarted:  # in their order before the test (stopall() stops the last first)
        order = {id(p): i for i, p in enumerate(snap)}
        for name in _MOCK_MODULES:
            mod = sys.modules.get(name)
            active = getattr(getattr(mod, "_patch", None), "_active_patches", None)
            if type(active) is list:
                active.sort(key=lambda p: order.get(id(p), len(order)))


def _patch_target(patch: object) -> object:
    target = getattr(patch, "target", None)
    if target is None:
        try:
            target = patch.getter()  # type: ignore[attr-defined]
        except Exception:
            return None
    return target


# Time left frozen: freezegun's ``freeze_time(...).start()`` and time-machine's
# ``travel(...).start()`` never stopped.  What they patched in modules comes back with the
# modules' other state (library module writes are undone), but each keeps a stack of its
# own that says time is frozen: left as the test left it, the next test's own freeze
# would be taken for a nested one and patch nothing (freezegun), and time-machine's patch
# of the C clock functions would stay on.  The stacks are cut back to the baseline's, as
# their ``stop()`` does.
_FREEZEGUN_STACKS: Final = ("freeze_factories", "tz_offsets", "ignore_lists", "tick_flags")
# Libraries whose own record of the patches they made a probe puts back (see
# Resetter._note_patchers): unittest.mock is the standard library's.
OWN_STATE_PROBED: Final = frozenset({"freezegun", "time_machine", "mock"})


def _stack(module: str, name: str) -> list[Any] | None:
    mod = sys.modules.get(module)
    stack = getattr(mod, name, None) if mod is not None else None
    return stack if type(stack) is list else None


def _freezers_take() -> tuple[tuple[object, ...], tuple[object, ...]]:
    fg = _stack("freezegun.api", "freeze_factories")
    tm = _stack("time_machine", "traveller_stack")
    return (tuple(fg) if fg else (), tuple(tm) if tm else ())


def _freezers_diff(snap: tuple[tuple[object, ...], tuple[object, ...]]) -> list[str]:
    now = _freezers_take()
    if now == snap:
        return []
    out = []
    if now[0] != snap[0]:
        out.append("<freezegun>:freeze_factories")
    if now[1] != snap[1]:
        out.append("<time_machine>:traveller_stack")
    return out


def _freezers_put(snap: tuple[tuple[object, ...], tuple[object, ...]], sites: list[str]) -> None:
    fg_base, tm_base = snap
    if "<freezegun>:freeze_factories" in sites:
        factories = _stack("freezegun.api", "freeze_factories") or []
        if factories[: len(fg_base)] != list(fg_base):
            UNRESTORABLE.append(
                ("<freezegun>:freeze_factories", "the test stopped a freeze started before it")
            )
        else:
            for name in _FREEZEGUN_STACKS:
                stack = _stack("freezegun.api", name)
                if stack is not None:
                    del stack[len(fg_base) :]
    if "<time_machine>:traveller_stack" in sites:
        travellers = _stack("time_machine", "traveller_stack") or []
        if travellers[: len(tm_base)] != list(tm_base):
            UNRESTORABLE.append(
                ("<time_machine>:traveller_stack", "the test stopped a travel started before it")
            )
            return
        while len(travellers) > len(tm_base):
            travellers.pop()._stop()
        c_module = getattr(sys.modules.get("time_machine"), "_time_machine", None)
        unpatch = getattr(c_module, "unpatch", None)
        if not travellers and callable(unpatch):
            unpatch()


# What the restore of a probe could not do, as (site, why): the resetter reports each
# (and runs that test in a forked child from the next run on).
UNRESTORABLE: list[tuple[str, str]] = []
# (object, attribute) that such a restore left as the test left it, which no other
# mechanism may then put back (see UndoLog.leave).
LEFT_AS_IS: list[tuple[object, str]] = []

# The interpreter's own settings: garbage collection, thread switching, int/str
# conversion limit (3.11+), profile and trace functions, faulthandler and, on 3.12+, the
# sys.monitoring tool ids (by name; isolator's own tracer is left out: it comes and goes
# with the recording).
_get_max_digits: Callable[[], int] = getattr(sys, "get_int_max_str_digits", lambda: 0)
_monitoring: Any = getattr(sys, "monitoring", None)
_TOOL_IDS = tuple(range(6))
_OWN_TOOL = "isolator-deps"


# isolator's own profile/trace functions (the read tracer of ``isolator deps``, on only
# inside test phases): seen as "none", or a fixture's set-up would take them into the
# baseline.  id -> the object, kept alive so that its id stays its own.
_OWN_HOOKS: dict[int, object] = {}


def own_hook(obj: object) -> None:
    """Leave ``obj``, one of isolator's own profile or trace functions, out of the probe."""
    _OWN_HOOKS[id(obj)] = obj


def _tools() -> tuple[object, ...]:
    if _monitoring is None:
        return ()
    names = map(_monitoring.get_tool, _TOOL_IDS)
    return tuple(None if name == _OWN_TOOL else name for name in names)


_RLIMITS: Final = tuple(
    getattr(_resource, n)
    for n in (
        "RLIMIT_NOFILE", "RLIMIT_STACK", "RLIMIT_CORE", "RLIMIT_AS", "RLIMIT_DATA",
        "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NPROC",
    )
    if _resource is not None and hasattr(_resource, n)
)  # fmt: skip
_ITIMERS: Final = tuple(
    getattr(signal, n)
    for n in ("ITIMER_REAL", "ITIMER_VIRTUAL", "ITIMER_PROF")
    if hasattr(signal, n)
)
_getitimer = getattr(signal, "getitimer", None)
_SIG_BLOCK: Final = getattr(signal, "SIG_BLOCK", 0)
# (The C function: signal's wrapper makes an enum member of each blocked signal.)
_sigmask = getattr(_signal, "pthread_sigmask", None)


def _armed() -> tuple[bool, ...]:
    """Whether each interval timer (alarm() is ITIMER_REAL) is armed: a test that leaves
    one armed has its signal kill a later test once the handler is put back."""
    if _getitimer is None:
        return ()
    return tuple(_getitimer(w) != (0.0, 0.0) for w in _ITIMERS)


def _blocked() -> frozenset[int] | None:
    """The signals the main thread blocks (None: elsewhere, or not on this platform)."""
    if _sigmask is None or _get_ident() != _MAIN_IDENT:
        return None
    return frozenset(_sigmask(_SIG_BLOCK, ()))


def _limits() -> tuple[tuple[int, int], ...]:
    return tuple(map(_resource.getrlimit, _RLIMITS)) if _RLIMITS else ()


# Whether resource limits may have changed since they were last found as in the baseline
# (the audit events of setrlimit and prlimit say so): eight system calls a check saved.
_LIMITS_WRITTEN = [True]


def limits_written() -> None:
    _LIMITS_WRITTEN[0] = True


def limits_settled() -> None:
    """The check after a test found or put the limits back as in the baseline: they are
    not read again until a test changes one."""
    _LIMITS_WRITTEN[0] = False


def _tracing() -> tuple[bool, int]:
    return _tracemalloc.is_tracing(), _tracemalloc.get_traceback_limit()


def _interp_take() -> tuple[object, ...]:
    profile, trace = sys.getprofile(), sys.gettrace()
    if _OWN_HOOKS:
        profile = None if id(profile) in _OWN_HOOKS else profile
        trace = None if id(trace) in _OWN_HOOKS else trace
    return (
        gc.isenabled(),
        gc.get_threshold(),
        sys.getswitchinterval(),
        _get_max_digits(),
        profile,
        trace,
        faulthandler.is_enabled(),
        _tools(),
        tuple(gc.callbacks),
        gc.get_debug(),
        sys.get_asyncgen_hooks(),
        sys.get_coroutine_origin_tracking_depth(),
        tuple(sys.warnoptions),
        # logging.addLevelName's two tables (the logging probe sees the loggers).
        (dict(_level_names), dict(_name_levels)),
        _blocked(),
        _limits(),
        _tracing(),
    )


_level_names: dict[int, str] = logging._levelToName
_name_levels: dict[str, int] = logging._nameToLevel


_INTERP_SITES = (
    "<gc>",
    "<gc.threshold>",
    "<sys.switchinterval>",
    "<sys.int_max_str_digits>",
    "<sys.profile>",
    "<sys.trace>",
    "<faulthandler>",
    "<sys.monitoring>",
    "<gc.callbacks>",
    "<gc.debug>",
    "<sys.asyncgen_hooks>",
    "<sys.coroutine_origin_tracking_depth>",
    "<sys.warnoptions>",
    "<logging>:<level names>",
    "<signal>:<blocked>",
    "<resource limits>",
    "<tracemalloc>",
)


def _interp_same(snap: Any) -> bool:
    """``_interp_take() == snap`` without building the tuple (the check after every test:
    no copies of the level tables, and the first difference ends it)."""
    (enabled, threshold, interval, digits, profile, trace, fault, tools, callbacks, debug,
     agen_hooks, origin_depth, warnoptions, (names, levels), blocked, limits,
     tracing) = snap  # fmt: skip
    now_profile, now_trace = sys.getprofile(), sys.gettrace()
    if _OWN_HOOKS:
        now_profile = None if id(now_profile) in _OWN_HOOKS else now_profile
        now_trace = None if id(now_trace) in _OWN_HOOKS else now_trace
    return (
        gc.isenabled() == enabled
        and now_profile is profile
        and now_trace is trace
        and gc.get_threshold() == threshold
        and sys.getswitchinterval() == interval
        and _get_max_digits() == digits
        and faulthandler.is_enabled() == fault
        and len(gc.callbacks) == len(callbacks)
        and not any(map(operator.is_not, gc.callbacks, callbacks))
        and gc.get_debug() == debug
        and sys.get_asyncgen_hooks() == agen_hooks
        and sys.get_coroutine_origin_tracking_depth() == origin_depth
        and len(sys.warnoptions) == len(warnoptions)
        and not any(map(operator.ne, sys.warnoptions, warnoptions))
        and _level_names == names
        and _name_levels == levels
        and (_monitoring is None or _tools() == tools)
        and _blocked() == blocked
        and (not _LIMITS_WRITTEN[0] or _limits() == limits)
        and _tracing() == tracing
    )


def _interp_diff(snap: tuple[object, ...]) -> list[str]:
    if _interp_same(snap):
        return []  # (no tuple, no copies of the level tables)
    now = _interp_take()
    if now == snap:
        return []
    return [site for site, a, b in zip(_INTERP_SITES, now, snap) if a is not b and a != b]


def _interp_put(snap: Any, sites: list[str]) -> None:
    (enabled, threshold, interval, digits, profile, trace, fault, tools, callbacks, debug,
     agen_hooks, origin_depth, warnoptions, level_names, blocked, limits,
     tracing) = snap  # fmt: skip
    if "<signal>:<blocked>" in sites and blocked is not None and _sigmask is not None:
        _sigmask(signal.SIG_SETMASK, blocked)  # (ints: the C function takes them)
    if "<resource limits>" in sites:
        for res, old, now in zip(_RLIMITS, limits, _limits()):
            if old != now:
                try:
                    _resource.setrlimit(res, old)
                except (OSError, ValueError) as exc:
                    UNRESTORABLE.append(
                        (f"<resource limits>:{res}", f"setrlimit refused the old limits: {exc}")
                    )
    if "<tracemalloc>" in sites:
        on, frames = tracing
        _tracemalloc.stop()
        if on:
            _tracemalloc.start(frames)
    if "<gc>" in sites:
        (gc.enable if enabled else gc.disable)()
    if "<gc.threshold>" in sites:
        gc.set_threshold(*threshold)
    if "<sys.switchinterval>" in sites:
        sys.setswitchinterval(interval)
    if "<sys.int_max_str_digits>" in sites:
        sys.set_int_max_str_digits(digits)
    # A profile or trace function set from C (cProfile, coverage's tracer) cannot always be
    # put back through sys.setprofile/settrace: only the Python-level ones and "none" are.
    for site, old, setter in (
        ("<sys.profile>", profile, sys.setprofile),
        ("<sys.trace>", trace, sys.settrace),
    ):
        if site in sites:
            if old is None or type(old) in (types.FunctionType, types.MethodType):
                setter(old)
            else:
                UNRESTORABLE.append((site, f"the test replaced {old!r} (set from C code)"))
    if "<faulthandler>" in sites:
        if fault:
            # Where it wrote (pytest's copy of stderr) is not known: it is not put back.
            UNRESTORABLE.append(("<faulthandler>", "the test disabled faulthandler"))
        else:
            faulthandler.disable()
    if "<sys.monitoring>" in sites:
        _tools_put(tools)
    if "<gc.callbacks>" in sites:
        gc.callbacks[:] = callbacks
    if "<gc.debug>" in sites:
        gc.set_debug(debug)
    if "<sys.asyncgen_hooks>" in sites:
        sys.set_asyncgen_hooks(*agen_hooks)
    if "<sys.coroutine_origin_tracking_depth>" in sites:
        sys.set_coroutine_origin_tracking_depth(origin_depth)
    if "<sys.warnoptions>" in sites:
        sys.warnoptions[:] = warnoptions
    if "<logging>:<level names>" in sites:
        names, levels = level_names
        _level_names.clear()
        _level_names.update(names)
        _name_levels.clear()
        _name_levels.update(levels)


def _tools_put(old: tuple[object, ...]) -> None:
    mon = _monitoring
    now = _tools()
    for i, was, name in zip(_TOOL_IDS, old, now):
        if was == name:
            continue
        if was is None:
            # A tool id the test took and kept: its events and callbacks go with it.
            mon.set_events(i, 0)
            for event in vars(mon.events).values():
                if isinstance(event, int) and event and not event & (event - 1):
                    try:
                        mon.register_callback(i, event, None)
                    except ValueError:
                        pass
            mon.free_tool_id(i)
        else:
            UNRESTORABLE.append((f"<sys.monitoring>:{i}", f"the test freed tool {was!r}"))


def _all_clean(snaps: list[Any]) -> bool:
    """Whether every probe of :func:`default_probes` finds its resource as in ``snaps``
    (what each ``diff`` returning [] tells), in one call: after most tests all are clean,
    and one function with the checks inline costs a fraction of twenty calls.  False
    also when a check cannot tell; the probes' own ``diff`` then decide."""
    (patches, freezers, cwd, env, path, meta, hooks, argv, logs, warn, rnd, dec, umask, rlimit,
     timeout, loc, sigs, stdio, syshooks, interp) = snaps  # fmt: skip
    try:
        return (
            _patches_take() == patches
            and _freezers_take() == freezers
            and _getcwd() == cwd
            and _environ_data == env
            and sys.path is path[0]
            and path[0] == path[1]
            and sys.meta_path is meta[0]
            and meta[0] == meta[1]
            and sys.path_hooks is hooks[0]
            and hooks[0] == hooks[1]
            and sys.argv is argv[0]
            and argv[0] == argv[1]
            and logs.clean()
            and _warnings.filters is warn[0]
            and warn[0] == warn[1]
            and _warnings.onceregistry == warn[2]
            and (_mt_read() == rnd[0] if _mt_read is not None else _getstate() == rnd[1])
            and not _decimal_diff(dec)
            and _get_umask() == umask
            and sys.getrecursionlimit() == rlimit
            and socket.getdefaulttimeout() == timeout
            and _get_locale() == loc
            and (
                _get_ident() != _MAIN_IDENT
                or (
                    not any(map(operator.is_not, map(_signal.getsignal, sigs[0]), sigs[1]))
                    and _armed() == sigs[2]
                )
            )
            and sys.stdin is stdio[0]
            and sys.stdout is stdio[1]
            and sys.stderr is stdio[2]
            and not any(map(operator.is_not, _SYS_HOOKS_GET(sys), syshooks))
            and _interp_same(interp)
        )
    except Exception:
        return False


def fast_check(probes: list[Probe]) -> Callable[[list[Any]], bool] | None:
    """The one-call clean check of ``probes`` when they are the default ones, else None."""
    if [p.name for p in probes] != [p.name for p in default_probes()]:
        return None
    return _all_clean


def default_probes() -> list[Probe]:
    """Every process-wide probe, in restore order."""
    probes = [
        # First: stopping a patch puts back what it patched, which other probes look at
        # (patch.dict(os.environ), patch.dict(sys.modules)).
        Probe("<mock.patch>", _patches_snap, _patches_diff, _patches_put),
        Probe("<frozen time>", _freezers_take, _freezers_diff, _freezers_put),
        Probe("<cwd>", _cwd_take, _cwd_diff, _cwd_put),
        Probe("<env>", _env_take, _env_diff, _env_put, _env_absorb),
        _list_probe("<sys.path>", lambda: sys.path),
        _list_probe("<sys.meta_path>", lambda: sys.meta_path),
        _list_probe("<sys.path_hooks>", lambda: sys.path_hooks),
        _list_probe("<sys.argv>", lambda: sys.argv),
        Probe("<logging>", _logging_take, _logging_diff, _logging_put, None, _logging_rebase),
        Probe("<warnings>", _warnings_take, _warnings_diff, _warnings_put),
        Probe("<random>", _random_take, _random_diff, _random_put),
        Probe("<decimal>", _decimal_take, _decimal_diff, _decimal_put),
        _scalar_probe("<umask>", _get_umask, _umask),
        _scalar_probe("<recursionlimit>", sys.getrecursionlimit, sys.setrecursionlimit),
        _scalar_probe("<socket.timeout>", socket.getdefaulttimeout, socket.setdefaulttimeout),
        _scalar_probe("<locale>", _get_locale, _set_locale),
        Probe("<signal>", _signals_take, _signals_diff, _signals_put),
        Probe("<stdio>", _stdio_take, _stdio_diff, _stdio_put),
        Probe("<sys hooks>", _sys_hooks_take, _sys_hooks_diff, _sys_hooks_put),
        Probe("<interpreter>", _interp_take, _interp_diff, _interp_put),
    ]
    return probes


def live_children() -> dict[int, str] | None:
    """This process's running child processes (pid -> command), from Linux's /proc; None
    where that cannot be read.  Exited children not yet waited for (zombies) are left out."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    pids: set[int] = set()
    # Read as bytes: no codec is looked up (a first lookup imports its module).
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/children", "rb") as f:
                pids.update(map(int, f.read().split()))
        except FileNotFoundError:
            continue  # the thread ended
        except (OSError, ValueError):
            return None  # a kernel without the children file
    out: dict[int, str] = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                name, _, rest = f.read().rpartition(b")")
        except OSError:
            continue
        if rest.split()[:1] != [b"Z"]:
            out[pid] = name.partition(b"(")[2].decode("utf-8", "replace")
    return out


def live_threads() -> set[threading.Thread]:
    return set(threading.enumerate())
