"""sys.modules: a replaced module and an inserted fake module."""

from __future__ import annotations

import importlib
import sys
import types


def test_backend_module_is_real() -> None:
    # Victim of test_stub_backend_module.
    assert importlib.import_module("sk_app.backend").NAME == "sqlite"


def test_stub_backend_module() -> None:
    # Polluter: replaces a module in sys.modules.
    stub = types.ModuleType("sk_app.backend")
    stub.NAME = "stub"  # type: ignore[attr-defined]
    sys.modules["sk_app.backend"] = stub


def test_install_fast_json_shim() -> None:
    # State-setter: inserts a fake module.
    shim = types.ModuleType("sk_fastjson")
    shim.dumps = repr  # type: ignore[attr-defined]
    sys.modules["sk_fastjson"] = shim


def test_fast_json_available() -> None:
    # Brittle: fails alone (no such module on disk).
    import sk_fastjson  # type: ignore[import-not-found]

    assert sk_fastjson.dumps([1]) == "[1]"
