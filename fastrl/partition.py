"""Contiguous shares: which executor, actor or gala learner owns which env (every process computes the same)."""

from __future__ import annotations

import numpy as np


def split(total: int, parts: int, unit: int = 1) -> list[np.ndarray]:
    """Contiguous, as-even-as-possible groups: ``split(10, 3)`` -> [0..3], [4..6], [7..9]; with ``unit`` k, of
    whole runs of k items (a k-agent env's rows stay in one executor): ``split(8, 3, 2)`` -> [0..3], [4, 5], [6, 7]."""
    units = np.array_split(np.arange(total // unit), parts)
    return [(u[:, None] * unit + np.arange(unit)).reshape(-1) for u in units]


def owner_of(total: int, parts: int, unit: int = 1) -> np.ndarray:
    """For each item, the index of the group ``split`` put it in."""
    owner = np.empty(total, np.int64)
    for part, items in enumerate(split(total, parts, unit)):
        owner[items] = part
    return owner


def learning_rows(envs: int, agents: int) -> np.ndarray:
    """Self-play against a pool (fastrl.layers.selfplay.pool): the row of each multi-agent env's learning seat, env
    g's agent g mod k, so every seat learns equally often."""
    games = np.arange(envs // agents)
    return games * agents + games % agents


def opponent_rows(envs: int, agents: int) -> np.ndarray:
    """For each row, whether a pool snapshot plays it (every seat but its env's learning one)."""
    opponent = np.ones(envs, bool)
    opponent[learning_rows(envs, agents)] = False
    return opponent
