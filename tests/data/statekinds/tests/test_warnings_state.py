"""warnings.filters changed without catch_warnings()."""

from __future__ import annotations

import warnings

from sk_app.legacy import old_total


def test_legacy_total_still_works() -> None:
    # Victim of test_strict_warnings: a deprecation warning becomes an error.
    assert old_total() == 42


def test_strict_warnings() -> None:
    # Polluter.
    warnings.simplefilter("error")
    assert warnings.filters[0][0] == "error"
