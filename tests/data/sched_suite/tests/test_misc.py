"""Independent tests: they only make orders and worker loads realistic."""

import pytest


@pytest.mark.parametrize("n", range(24))
def test_square(n):
    assert n * n == n**2


def test_words():
    assert "shop".upper() == "SHOP"
