"""The random module's global generator."""

from __future__ import annotations

import random


def test_shuffle_is_permutation() -> None:
    # Consumes global randomness but does not depend on its state.
    items = list(range(10))
    random.shuffle(items)
    assert sorted(items) == list(range(10))


def test_seed_for_reproducibility() -> None:
    # State-setter for test_reproducible_draw.
    random.seed(2024)


def test_reproducible_draw() -> None:
    # Brittle: fails alone (the generator is seeded from the OS at start-up).
    assert random.random() == random.Random(2024).random()
