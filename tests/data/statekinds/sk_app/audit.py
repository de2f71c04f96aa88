"""Audit messages on a named logger."""

from __future__ import annotations

import logging

LOGGER = logging.getLogger("sk_app.audit")


class MemorySink(logging.Handler):
    """Keeps the records it receives."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def record(event: str) -> None:
    LOGGER.warning("audit: %s", event)


def configure() -> None:
    """Back to the default level (inherit from the root logger)."""
    LOGGER.setLevel(logging.NOTSET)


def attach_sink() -> MemorySink:
    sink = MemorySink()
    LOGGER.addHandler(sink)
    return sink


def sinks() -> list[MemorySink]:
    return [h for h in LOGGER.handlers if isinstance(h, MemorySink)]
