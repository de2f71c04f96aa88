"""The overlap rule of state sites, alone: the resetter uses it on every run without
importing the static pass or the dataclasses of ``_types`` (each a few compilations)."""

from __future__ import annotations


def sites_overlap(a: str, b: str) -> bool:
    """True if a write to one site can change what a read of the other sees.

    A site covers itself and every site nested under it: ``m:X`` overlaps ``m:X['k']``
    and ``m:X.attr``, but ``m:X1`` does not overlap ``m:X`` and ``m:X['a']`` does not
    overlap ``m:X['b']``.  A pseudo-module without a name (``<env>``) covers its names
    (``<env>:HOME``).
    """
    if len(a) > len(b):
        a, b = b, a
    if not b.startswith(a):
        return False
    if len(a) == len(b):
        return True
    sep = b[len(a)]
    return sep == "." or sep == "[" or (sep == ":" and ":" not in a)
