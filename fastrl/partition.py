"""Contiguous shares: which executor, actor or gala learner owns which env (every process computes the same)."""

from __future__ import annotations

import numpy as np


def split(total: int, parts: int) -> list[np.ndarray]:
    """Contiguous, as-even-as-possible groups: ``split(10, 3)`` -> [0..3], [4..6], [7..9]."""
    return np.array_split(np.arange(total), parts)


def owner_of(total: int, parts: int) -> np.ndarray:
    """For each item, the index of the group ``split`` put it in."""
    owner = np.empty(total, np.int64)
    for part, items in enumerate(split(total, parts)):
        owner[items] = part
    return owner
