"""The minibatches of an update's epochs: which rows each optimizer step learns from.

Drawn from (run seed, the algorithm's stream, rollout), never from timing, so every layout and every resume
draws the same. Under torchrun the minibatches are drawn over every rank's rows and each rank takes the rows
it holds (``fastrl.ranks.cohort``: ``first``/``count`` of ``total``). A recurrent model's minibatches are whole
envs' rollouts (``length`` rows each, replayed from their first state). The whole plan of an update is drawn
up front and its indices reach the learner's device in one copy: nothing per minibatch waits for a GPU.
"""

from __future__ import annotations

import numpy as np
import torch


def minibatch_indices(count: int, minibatches: int, rng: np.random.Generator) -> list[np.ndarray]:
    """A fresh permutation of ``count`` rows cut into ``minibatches`` nearly equal parts."""
    if not 1 <= minibatches <= count:
        raise ValueError(f"minibatches must be in 1..{count}, got {minibatches}")
    return np.array_split(rng.permutation(count), minibatches)


def whole(groups: list[np.ndarray], length: int) -> list[np.ndarray]:
    """Minibatches of groups (envs) as row indices of the env-major flat rows: all ``length`` rows of each."""
    if length == 1:
        return groups
    return [(group[:, None] * length + np.arange(length)).ravel() for group in groups]


def plan(
    seed: list[int],
    epochs: int,
    minibatches: int,
    groups: int,
    length: int,
    first: int,
    count: int,
    device: torch.device,
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Every minibatch of an update as (its global row indices, the rows of them this rank holds), both on
    ``device``: ``epochs`` permutations of ``groups`` groups of ``length`` rows, drawn from ``seed``, cut into
    ``minibatches`` each; this rank holds rows ``first .. first + count``."""
    rng = np.random.default_rng(seed)
    drawn = []
    for _ in range(epochs):
        for index in whole(minibatch_indices(groups, minibatches, rng), length):
            mine = index[(index >= first) & (index < first + count)] - first  # the rows this rank holds
            drawn.append((index, mine))
    flat = torch.from_numpy(np.concatenate([np.concatenate(pair) for pair in drawn])).to(device)
    parts = flat.split([size for index, mine in drawn for size in (len(index), len(mine))])
    return [(parts[2 * i], parts[2 * i + 1]) for i in range(len(drawn))]
