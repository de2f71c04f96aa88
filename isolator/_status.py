"""Wait statuses in words (kept free of heavy imports: the supervisor uses it)."""

from __future__ import annotations

import os
import signal


def describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        return f"killed by signal {name}"
    return f"exit code {os.WEXITSTATUS(status)}"
