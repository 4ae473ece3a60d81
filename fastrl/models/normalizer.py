"""Running normalisation of observations (per element, (x − mean) / std, clipped to ±5) and of returns.

sample-factory's Atari defaults normalise inputs this way (rl_games' RunningMeanStd), and it
is their main difference from CleanRL's PPO, which reaches the same Pong score with several
times the frames. In Pong almost every pixel is static background: subtracting each pixel's
running mean and dividing by its running std leaves the ball and the paddles as the only
large inputs from the first update on.

The statistics are float32 buffers of the model, so they travel with the parameters: the
actors receive them through the shared weights, checkpoints and ``load_policy`` keep them,
and a resumed run goes on with them. Only the learner moves them (``observe``), once per
update on the storage it learns from, so they are as deterministic as the parameters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

MergeRanks = Callable[[int, Tensor, Tensor], tuple[int, Tensor, Tensor]]  # (count, mean, var) of every rank's batch


def obs_to_float(obs: Tensor) -> Tensor:
    """The observation as float32: uint8 is scaled by 1/255, float32 passes through unchanged,
    any other dtype is cast (not scaled)."""
    if obs.dtype == torch.uint8:
        return obs.float().div_(255.0)  # .float() made a fresh tensor, so div_ is safe
    if obs.dtype == torch.float32:
        return obs
    return obs.float()


class RunningMeanStd(nn.Module):
    """Running per-element mean and variance (float32 buffers), merged a batch at a time."""

    def __init__(self, shape: Sequence[int], eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        # the prior of one sample with mean 0 and variance 1, as in rl_games / sample-factory
        self.register_buffer("mean", torch.zeros(tuple(shape)))
        self.register_buffer("var", torch.ones(tuple(shape)))
        self.register_buffer("count", torch.ones(()))

    def std(self) -> Tensor:
        return torch.sqrt(self.var + self.eps)

    @torch.no_grad()
    def observe(self, x: Tensor, merge_ranks: MergeRanks | None = None) -> None:
        """Merge the moments of the batch ``x`` ``[B, *shape]`` (float) into the running ones (Chan et al.);
        ``merge_ranks``: makes them the moments of every rank's batch (``fastrl.ranks.cohort``)."""
        batch = x.shape[0]
        if batch == 0:
            return
        var, mean = torch.var_mean(x, dim=0, correction=0)
        if merge_ranks is not None:
            batch, mean, var = merge_ranks(batch, mean, var)
        total = self.count + batch
        delta = mean - self.mean
        self.mean += delta * (batch / total)
        self.var.copy_((self.var * self.count + var * batch + delta.square() * (self.count * batch / total)) / total)
        self.count.copy_(total)


class ObsNormalizer(RunningMeanStd):
    """Observations in, ``(x − mean) / std`` clipped to ±``clip`` out."""

    def __init__(self, shape: Sequence[int], clip: float = 5.0, eps: float = 1e-5):
        super().__init__(shape, eps)
        self.clip = clip

    def forward(self, obs: Tensor) -> Tensor:
        """``obs`` in its env dtype; uint8 frames are scaled by 1/255 in the same pass (one multiply-add
        per element instead of a scale, a subtraction and a multiplication)."""
        inv_std = torch.rsqrt(self.var + self.eps)
        x = obs.float()
        scale = inv_std / 255.0 if obs.dtype == torch.uint8 else inv_std
        return torch.addcmul(-self.mean * inv_std, x, scale).clamp_(-self.clip, self.clip)


class ValueNormalizer(RunningMeanStd):
    """``algo.normalize_returns`` (sample-factory's normalize_returns): the value head predicts the return
    in units of the running return statistics; ``forward`` turns that back into a return, so everything
    that reads a value (GAE, the actors' slots, eval) sees returns, and only the loss measures the value
    error in normalised units (``ppo_loss``'s ``value_scale``)."""

    def __init__(self, eps: float = 1e-5):
        super().__init__((), eps)

    def forward(self, normalized: Tensor) -> Tensor:
        return normalized * self.std() + self.mean


OBSERVED_ROWS = 256  # at most this many rows of an update move the observation statistics


def observed_rows(count: int, first: int = 0, total: int | None = None) -> slice:
    """Every k-th row, at most ``OBSERVED_ROWS`` of ``count``: a fixed pick (never from timing). The moments
    of all 1024 Pong frames of an update took a fifth of the learner's time; running statistics over
    many updates do not need every row. ``first``/``total``: these ``count`` rows are rows first.. of
    ``total`` over every rank, and the pick is that of the ``total`` rows (the same rows as one rank's)."""
    total = count if total is None else total
    step = -(-total // OBSERVED_ROWS)
    return slice((-first) % step, None, step)


def observe_observations(model: nn.Module, obs: Tensor, merge_ranks: MergeRanks | None = None) -> None:
    """Update ``model``'s observation statistics with ``obs`` ``[B, *shape]`` (env dtype), if it keeps any."""
    normalizer = getattr(model, "obs_normalizer", None)
    if normalizer is None:
        return
    # a model whose rows pack several parts (fastrl.models.multi) says which of them its statistics are of
    select = getattr(model, "obs_for_normalizer", None)
    normalizer.observe(obs_to_float(obs) if select is None else select(obs), merge_ranks)


def observe_returns(model: nn.Module, returns: Tensor, merge_ranks: MergeRanks | None = None) -> float:
    """Update ``model``'s return statistics with ``returns`` ``[B]``; the scale the value loss divides by
    (1 without)."""
    normalizer = getattr(model, "value_normalizer", None)
    if normalizer is None:
        return 1.0
    normalizer.observe(returns.float(), merge_ranks)
    return float(normalizer.std())
