"""The classic mutable default argument."""

from __future__ import annotations


def add_tag(tag: str, tags: list[str] = []) -> list[str]:  # noqa: B006 - planted on purpose
    tags.append(tag)
    return tags
