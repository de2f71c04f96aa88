"""JSON export through the json module (looked up at call time)."""

from __future__ import annotations

import json


def to_json(obj: object) -> str:
    return json.dumps(obj)
