"""sys.path: an entry added at run time."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

PLUGINS = Path(__file__).resolve().parent.parent / "workdir" / "plugins"


def test_add_plugin_dir() -> None:
    # State-setter for test_plugin_importable.
    sys.path.insert(0, str(PLUGINS))


def test_plugin_importable() -> None:
    # Brittle: fails alone (workdir/plugins is not on the path).
    assert importlib.import_module("skplug_extra").VERSION == "1.2"
