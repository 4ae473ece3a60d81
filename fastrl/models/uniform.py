"""The uniform random policy: equal logits whatever the observation (sampling benchmarks).

It never reads the observation, so with it the engine's cost is all plumbing: env
stepping, queues, buffer writes and sampling from the executor's random number.
"""

from __future__ import annotations

import torch
from torch import nn


class UniformPolicy(nn.Module):
    reads_observations = False  # the actor may skip gathering observations for it

    def __init__(self, obs_shape, n_actions: int):
        super().__init__()
        self.n_actions = n_actions
        # one parameter so optimizers and the shared weight buffer have something to hold
        self.zero = nn.Parameter(torch.zeros(()))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        batch = obs.shape[0]
        logits = self.zero.expand(batch, self.n_actions).float()
        return logits, self.zero.expand(batch).float()
