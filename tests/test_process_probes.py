"""The process probes' one-call clean check agrees with their own diffs."""

from __future__ import annotations

import gc
import logging
import os
import sys
from collections.abc import Callable, Iterator
from unittest import mock

import pytest

from isolator import _process


@pytest.fixture
def probes() -> Iterator[tuple[list[_process.Probe], list[object]]]:
    ps = _process.default_probes()
    snaps = [p.take() for p in ps]
    yield ps, snaps
    for p, s in zip(ps, snaps):
        sites = p.diff(s)
        if sites:
            p.put(s, sites)


def _diffs(ps: list[_process.Probe], snaps: list[object]) -> list[str]:
    return [site for p, s in zip(ps, snaps) for site in p.diff(s)]


def _set_level() -> None:
    logging.getLogger("isolator.test.probes").setLevel(logging.DEBUG)


def _add_handler() -> None:
    logging.getLogger("isolator.test.probes").handlers.append(logging.NullHandler())


def _new_dict() -> None:
    lg = logging.getLogger("isolator.test.probes")
    lg.__dict__ = dict(lg.__dict__, level=logging.ERROR)


def _no_propagate() -> None:
    logging.getLogger("isolator.test.probes").propagate = False


def _env() -> None:
    os.environ["ISOLATOR_TEST_PROBES"] = "1"


def _path() -> None:
    sys.path.append("/nonexistent/isolator-test")


def _hook() -> None:
    sys.excepthook = lambda *a: None


def _unraisable_hook() -> None:
    sys.unraisablehook = lambda *a: None


def _gc_threshold() -> None:
    gc.set_threshold(gc.get_threshold()[0] + 1)


def _switch_interval() -> None:
    sys.setswitchinterval(sys.getswitchinterval() * 2)


def _profile() -> None:
    sys.setprofile(lambda *a: None)


def _gc_callback() -> None:
    gc.callbacks.append(lambda *a: None)


def _warnoption() -> None:
    sys.warnoptions.append("ignore::isolator-test")


def _level_name() -> None:
    logging.addLevelName(27, "ISOLATOR_TEST")


def _mock_patch() -> None:
    mock.patch.object(logging, "raiseExceptions", False).start()


@pytest.mark.parametrize(
    "change",
    [
        _set_level,
        _add_handler,
        _new_dict,
        _no_propagate,
        _env,
        _path,
        _hook,
        _unraisable_hook,
        _gc_threshold,
        _switch_interval,
        _profile,
        _gc_callback,
        _warnoption,
        _level_name,
        _mock_patch,
    ],
)
def test_a_change_is_seen_by_both(
    probes: tuple[list[_process.Probe], list[object]], change: Callable[[], None]
) -> None:
    ps, snaps = probes
    logging.getLogger("isolator.test.probes")  # created before the snapshots below
    snaps[:] = [p.take() for p in ps]
    check = _process.fast_check(ps)
    assert check is not None
    assert check(snaps) and _diffs(ps, snaps) == []
    change()
    assert _diffs(ps, snaps) != []
    assert not check(snaps)
    for p, snap in zip(ps, snaps):
        p.put(snap, p.diff(snap))
    assert check(snaps) and _diffs(ps, snaps) == []


def test_a_value_written_back_is_clean_again(
    probes: tuple[list[_process.Probe], list[object]],
) -> None:
    ps, snaps = probes
    lg = logging.getLogger("isolator.test.probes.back")
    snaps[:] = [p.take() for p in ps]
    check = _process.fast_check(ps)
    assert check is not None
    old = lg.level
    lg.setLevel(logging.CRITICAL)
    assert not check(snaps)
    lg.setLevel(old)
    assert check(snaps)
    assert check(snaps)  # and stays so


def test_other_probe_lists_get_no_fast_check() -> None:
    assert _process.fast_check(_process.default_probes()[1:]) is None
