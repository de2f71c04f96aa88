"""A module global rebound through a `global` statement."""

from __future__ import annotations

from sk_app import counter


def test_running_total_starts_empty() -> None:
    # Victim of test_accumulate.
    assert counter.add(1) == 1


def test_accumulate() -> None:
    # Polluter.
    counter.add(5)
    assert counter.total() >= 5
