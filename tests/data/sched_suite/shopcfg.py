"""Shared, module-level state of a tiny shop application."""

SETTINGS: dict[str, object] = {"currency": None, "tax": None}
FLAGS = {"debug": False}
PLUGINS: dict[str, dict[str, bool]] = {}


def price(amount: float) -> str:
    tax = SETTINGS["tax"]
    total = amount * (1 + tax) if isinstance(tax, float) else amount
    return f"{total:.2f} {SETTINGS['currency']}"


def log_line(msg: str) -> str:
    return f"DEBUG {msg}" if FLAGS["debug"] else msg
