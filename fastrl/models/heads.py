"""Policy heads of the built-in models: what the trunk's features become, ``[B, head_size]`` float32.

Categorical logits are one linear layer (``policy_head`` in the models). A diagonal Gaussian
(Box actions) is ``GaussianHead``: a linear layer for the means and a state-independent log-std
vector (CleanRL's ``ppo_continuous_action`` and stable-baselines3's default), concatenated so the
model still returns one head tensor, which ``fastrl.models.distributions.DiagonalGaussian`` reads.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn


class GaussianHead(nn.Module):
    """``[B, width]`` features -> ``[B, 2 D]``: D means (orthogonal init, gain ``gain``), then log-std."""

    def __init__(self, width: int, dims: int, gain: float = 0.01, log_std_init: float = 0.0):
        super().__init__()
        self.mean = nn.Linear(width, dims)
        nn.init.orthogonal_(self.mean.weight, gain=gain)
        nn.init.zeros_(self.mean.bias)
        self.log_std = nn.Parameter(torch.full((dims,), float(log_std_init)))

    def forward(self, h: Tensor) -> Tensor:
        mean = self.mean(h)
        return torch.cat([mean, self.log_std.expand_as(mean)], dim=-1)


def policy_head(width: int, head_size: int, gaussian: bool, init) -> nn.Module:
    """The built-in models' policy head: ``head_size`` logits, or a Gaussian of ``head_size // 2`` dimensions."""
    if gaussian:
        if head_size % 2:
            raise ValueError(f"a Gaussian head has 2 D columns (means, log-stds), got {head_size}")
        return GaussianHead(width, head_size // 2)
    return init(nn.Linear(width, head_size), 0.01)
