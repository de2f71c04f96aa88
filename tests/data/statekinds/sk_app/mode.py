"""Behaviour read from the environment at call time."""

from __future__ import annotations

import os


def current_mode() -> str:
    return os.environ.get("SK_MODE", "prod")


def timeout() -> int:
    return int(os.environ.get("SK_TIMEOUT", "30"))


def session_token() -> str | None:
    return os.environ.get("SK_SESSION_TOKEN")


def tenant() -> str | None:
    return os.environ.get("SK_TENANT")
