"""State in a closure cell (nonlocal counter)."""

from __future__ import annotations

from sk_app.ids import next_id


def test_first_id_is_one() -> None:
    # Victim of test_allocate_ids.
    assert next_id() == 1


def test_allocate_ids() -> None:
    # Polluter.
    ids = [next_id() for _ in range(3)]
    assert ids == sorted(ids)
