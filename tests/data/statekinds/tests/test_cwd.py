"""The working directory, changed without being restored."""

from __future__ import annotations

import os
from pathlib import Path

from sk_app.inventory import read_lines

WORKDIR = Path(__file__).resolve().parent.parent / "workdir"


def test_read_inventory_relative() -> None:
    # Victim of test_enter_workdir: opens a path relative to the suite root.
    assert read_lines("workdir/inventory.txt") == ["apple 10", "pear 4"]


def test_enter_workdir() -> None:
    # Polluter.
    os.chdir(WORKDIR)
    assert Path("inventory.txt").exists()
