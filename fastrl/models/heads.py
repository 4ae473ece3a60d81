"""Policy heads of the built-in models: what the trunk's features become, ``[B, head_size]`` float32.

Categorical logits are one linear layer (``policy_head`` in the models). A diagonal Gaussian
(Box actions) is ``GaussianHead``: a linear layer for the means and a state-independent log-std
vector (CleanRL's ``ppo_continuous_action`` and stable-baselines3's default), concatenated so the
model still returns one head tensor, which ``fastrl.models.distributions.DiagonalGaussian`` reads.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from fastrl.models.initialisation import orthogonal_
from fastrl.models.recurrent import LSTMCore


class GaussianHead(nn.Module):
    """``[B, width]`` features -> ``[B, 2 D]``: D means (orthogonal init, gain ``gain``), then log-std."""

    def __init__(self, width: int, dims: int, gain: float = 0.01, log_std_init: float = 0.0):
        super().__init__()
        self.mean = nn.Linear(width, dims)
        orthogonal_(self.mean.weight, gain=gain)
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


class HeadedPolicy(nn.Module):
    """What the built-in models share past their encoder: an optional LSTM core (``model.lstm``,
    ``fastrl.models.recurrent``), then a policy head and a value head (``value_normalizer``: a model's
    ``algo.normalize_returns`` statistics, or None). A subclass gives ``encode(obs) -> [B, W]`` and
    calls ``_build_heads`` after its encoder, so the heads' initialisation draws come last.

    ``forward(obs)`` -> ``(head, value)``; with a core, ``forward(obs, hidden)`` -> ``(head, value, hidden')``.
    """

    value_normalizer: nn.Module | None

    def _build_heads(self, width: int, head_size: int, gaussian: bool, lstm: int, init: Callable) -> None:
        self.core = LSTMCore(width, lstm) if lstm else None
        width = lstm or width
        self.policy_head = policy_head(width, head_size, gaussian, init)
        self.value_head = init(nn.Linear(width, 1), 1.0)

    @property
    def hidden_size(self) -> int:
        return 2 * self.core.size if self.core is not None else 0

    def encode(self, obs: Tensor) -> Tensor:
        raise NotImplementedError

    def decode(self, h: Tensor) -> tuple[Tensor, Tensor]:
        value = self.value_head(h).squeeze(-1)
        if self.value_normalizer is not None:
            value = self.value_normalizer(value)
        return self.policy_head(h), value

    def forward(self, obs: Tensor, hidden: Tensor | None = None):
        h = self.encode(obs)
        if self.core is None:
            return self.decode(h)
        h, hidden = self.core(h, hidden)
        return (*self.decode(h), hidden)
