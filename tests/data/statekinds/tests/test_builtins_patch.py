"""Monkeypatched library function, assigned directly (not through the monkeypatch fixture)."""

from __future__ import annotations

import functools
import json

from sk_app.export import to_json


def test_export_keeps_key_order() -> None:
    # Victim of test_sorted_json_everywhere.
    assert to_json({"b": 1, "a": 2}) == '{"b": 1, "a": 2}'


def test_sorted_json_everywhere() -> None:
    # Polluter: "configures" json globally for stable output and never puts it back.
    json.dumps = functools.partial(json.dumps, sort_keys=True)
    assert to_json({"b": 1, "a": 2}) == '{"a": 2, "b": 1}'


def test_export_list() -> None:
    assert to_json([1, 2]) == "[1, 2]"
