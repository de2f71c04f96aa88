"""A named logger's level and handlers."""

from __future__ import annotations

import pytest
from sk_app import audit


def test_reconfigure_audit() -> None:
    # Cleaner for test_silence_audit -> test_refund_is_audited.
    audit.configure()
    assert audit.LOGGER.level == 0


def test_refund_is_audited(caplog: pytest.LogCaptureFixture) -> None:
    # Victim of test_silence_audit.
    audit.record("refund")
    assert "audit: refund" in caplog.text


def test_silence_audit() -> None:
    # Polluter: raises the level of the named logger.
    audit.LOGGER.setLevel("ERROR")
    assert not audit.LOGGER.isEnabledFor(30)


def test_attach_memory_sink() -> None:
    # State-setter: adds a handler to the named logger.
    audit.attach_sink()


def test_sink_receives_records() -> None:
    # Brittle: fails alone (no sink attached).
    sinks = audit.sinks()
    assert sinks
    audit.LOGGER.error("audit: chargeback")
    assert sinks[-1].records[-1].getMessage() == "audit: chargeback"
