"""The dict internals isolator reads (isolator._versions), against the dicts themselves."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from isolator import _versions


def _image_or_skip(d: dict[str, object], n: int | None = None) -> bytes:
    image = _versions.entries_image(d, n)
    if image is None:
        pytest.skip(f"entry tables are not read on {sys.version_info[:2]}")
    return image


def test_an_entry_table_image_moves_on_a_rebinding_or_a_deletion_only() -> None:
    d: dict[str, object] = {f"name{i}": object() for i in range(8)}
    image = _image_or_skip(d)
    n = len(image) // _versions.ENTRY
    assert n == 8
    for i in range(300):  # appends, and the resizes they bring, keep the prefix
        d[f"more{i}"] = i
    assert _versions.entries_image(d, n) == image
    old = d["name3"]
    d["name3"] = object()
    assert _versions.entries_image(d, n) != image
    d["name3"] = old
    assert _versions.entries_image(d, n) == image
    del d["name5"]
    assert _versions.entries_image(d, n) != image
    d["name5"] = None
    assert _versions.entries_image(d, n) != image


def test_an_image_with_deleted_entries_still_names_the_live_ones() -> None:
    # sys.modules after a test's modules were unloaded: holes stay in the table until it
    # is rebuilt, and a prefix equal to the image still means "nothing replaced".
    d: dict[str, object] = {f"name{i}": object() for i in range(6)}
    del d["name2"]
    image = _image_or_skip(d)
    assert len(image) // _versions.ENTRY == 6  # the hole is in the table
    d["added"] = object()
    assert _versions.entries_image(d, 6) == image
    d["name4"] = object()
    assert _versions.entries_image(d, 6) != image


def test_tables_that_are_not_str_keyed_are_not_read() -> None:
    _image_or_skip({"a": 1})
    assert _versions.entries_image({1: "a", 2: "b"}) is None  # type: ignore[arg-type]

    class Sub(dict):  # type: ignore[type-arg]
        pass

    assert _versions.entries_image(Sub(a=1)) is None


@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 17, 64, 65, 257, 700])
def test_moved_entries_names_exactly_the_tags_that_differ(n: int) -> None:
    import random

    from isolator._state import moved_entries

    rng = random.Random(n)
    for _ in range(50):
        old = [rng.getrandbits(64) for _ in range(n)]
        new = list(old)
        for j in rng.sample(range(n), rng.randint(0, n)) if n else []:
            # A new tag, or one bit of it flipped (the top and bottom bits included).
            bit = rng.choice([0, 63, rng.randrange(64)])
            new[j] = rng.getrandbits(64) if rng.random() < 0.5 else old[j] ^ (1 << bit)
        now = b"".join(t.to_bytes(8, sys.byteorder) for t in new)
        image = bytearray(b"".join(t.to_bytes(8, sys.byteorder) for t in old))
        assert moved_entries(now, image) == [j for j in range(n) if new[j] != old[j]]


def _diff_keys_by_loop(live: Any, snap: dict[Any, Any]) -> list[Any]:
    out = [k for k in snap if k not in live]
    for k, v in live.items():
        if k not in snap or snap[k] is not v:
            out.append(k)
    return out


@pytest.mark.parametrize("as_class", [False, True], ids=["dict", "class"])
def test_diff_keys_names_removed_then_changed_keys_in_order(as_class: bool) -> None:
    # The C passes must name exactly the keys a loop names, in the loop's order (removed
    # keys come back in snapshot order when restored).
    import random

    from isolator._state import _diff_keys

    rng = random.Random(7)
    for _ in range(500):
        snap = {f"k{i}": object() for i in range(rng.randint(0, 30))}
        live = dict(snap)
        for _ in range(rng.randint(0, 6)):
            keys = list(live)
            op = rng.random()
            if op < 0.3 and keys:
                del live[rng.choice(keys)]
            elif op < 0.6:
                live[f"n{rng.randint(0, 40)}"] = object()
            elif keys:
                live[rng.choice(keys)] = object()
        if as_class:
            cls = type("C", (), dict(live))
            mapping: Any = cls.__dict__
            base = {k: v for k, v in cls.__dict__.items() if k.startswith("__")}
            snap = {**base, **snap}
        else:
            mapping = live
        assert _diff_keys(mapping, snap) == _diff_keys_by_loop(mapping, snap)


class _Three:
    __slots__ = ("a", "b", "c", "__weakref__")


class _Plain:
    pass


def test_a_slot_area_moves_on_each_write_to_a_slot_and_names_the_values() -> None:
    obj = _Three()
    view = _versions.slots_view(obj)
    if view is None:
        pytest.skip(f"slot areas are not read on {sys.version_info[:2]}")
    values = [object(), object(), object()]
    obj.a, obj.b, obj.c = values
    image = bytes(view)
    # The slots' values, as the pointers the object holds.
    words = [int.from_bytes(image[i : i + 8], sys.byteorder) for i in range(0, 24, 8)]
    assert words == [id(v) for v in values]
    for write in (
        lambda: setattr(obj, "b", object()),
        lambda: delattr(obj, "c"),
        lambda: setattr(obj, "c", values[2]),
    ):
        before = bytes(view)
        write()
        assert bytes(view) != before
    obj.b = values[1]
    assert bytes(view) == image  # the same objects back: the same bytes


def test_objects_with_a_dict_or_items_have_no_slot_area() -> None:
    class Sized(tuple):  # type: ignore[type-arg]
        __slots__ = ()

    assert _versions.slots_view(_Plain()) is None
    assert _versions.slots_view(Sized((1, 2))) is None
