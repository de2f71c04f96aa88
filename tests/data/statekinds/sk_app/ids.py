"""An id allocator whose state lives in a closure cell."""

from __future__ import annotations

from collections.abc import Callable


def _make_counter() -> Callable[[], int]:
    count = 0

    def next_id() -> int:
        nonlocal count
        count += 1
        return count

    return next_id


next_id = _make_counter()
