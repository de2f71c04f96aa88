"""Files outside any tmp dir: modified, deleted, created."""

from __future__ import annotations

from pathlib import Path

from sk_app.inventory import read_lines

WORKDIR = Path(__file__).resolve().parent.parent / "workdir"


def test_ledger_has_opening_balance() -> None:
    # Victim of test_post_payment_appends.
    assert read_lines(WORKDIR / "ledger.txt") == ["opening balance 100"]


def test_catalog_file_readable() -> None:
    # Victim of test_purge_catalog.
    assert read_lines(WORKDIR / "catalog.csv")[0] == "sku,price"


def test_post_payment_appends() -> None:
    # Polluter: modifies a file.
    with open(WORKDIR / "ledger.txt", "a", encoding="utf-8") as f:
        f.write("payment -30\n")
    assert len(read_lines(WORKDIR / "ledger.txt")) >= 2


def test_purge_catalog() -> None:
    # Polluter: deletes a file.
    (WORKDIR / "catalog.csv").unlink()
    assert not (WORKDIR / "catalog.csv").exists()


def test_create_lock() -> None:
    # State-setter: creates a file.
    (WORKDIR / "sk.lock").write_text("held\n", encoding="utf-8")


def test_lock_is_held() -> None:
    # Brittle: fails alone.
    assert (WORKDIR / "sk.lock").read_text(encoding="utf-8") == "held\n"
