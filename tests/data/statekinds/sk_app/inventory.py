"""Reads data files by path, relative ones against the current directory."""

from __future__ import annotations

from pathlib import Path


def read_lines(path: str | Path) -> list[str]:
    return Path(path).read_text(encoding="utf-8").splitlines()
