"""PPO's clipped surrogate loss (Schulman et al. 2017) over one storage, in minibatches.

The storage's behaviour log-probs (written by the actor with the policy that acted) are the
``old`` policy of the ratio, so the same loss serves ``sync`` (ratio starts at 1) and ``hts``
(the learner starts one version ahead; the clipped ratio corrects for that lag).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from fastrl.models.distributions import CATEGORICAL, ActionDistribution


@dataclass
class PPOBatch:
    """Flat [B, ...] tensors of one minibatch."""

    obs: torch.Tensor
    actions: torch.Tensor
    old_logp: torch.Tensor
    old_values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor


@dataclass
class PPOStats:
    policy_loss: float
    value_loss: float
    entropy: float
    clip_fraction: float
    approx_kl: float


def ppo_loss(model: torch.nn.Module, batch: PPOBatch, clip: float, value_clip: float, value_coef: float,
             entropy_coef: float, normalize_advantages: bool = True,
             value_scale: float = 1.0,
             distribution: ActionDistribution = CATEGORICAL,
             outputs: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor, PPOStats]:
    """Clipped surrogate + (optionally clipped) value loss - entropy bonus; ``value_clip`` 0 disables it.

    ``value_scale``: the running std of the returns when the model normalises them; value errors
    and the value clip range are measured in units of it (1: in returns). ``distribution`` reads the head
    (``fastrl.models.distributions``: logits, MultiDiscrete, Gaussian). ``outputs``: the batch's (head, value)
    rows already computed (a recurrent model replays whole sequences: ``fastrl.models.recurrent.unroll``)."""
    logits, values = model(batch.obs) if outputs is None else outputs
    logp, entropies = distribution.log_prob_entropy(logits, batch.actions)
    advantages = batch.advantages
    if normalize_advantages and advantages.numel() > 1:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    log_ratio = logp - batch.old_logp
    ratio = log_ratio.exp()
    surrogate = torch.min(ratio * advantages, ratio.clamp(1 - clip, 1 + clip) * advantages)
    policy_loss = -surrogate.mean()
    value_error = ((values - batch.returns) / value_scale).pow(2)
    if value_clip > 0:
        reach = value_clip * value_scale
        clipped = batch.old_values + (values - batch.old_values).clamp(-reach, reach)
        value_error = torch.max(value_error, ((clipped - batch.returns) / value_scale).pow(2))
    value_loss = 0.5 * value_error.mean()
    entropy = entropies.mean()
    loss = policy_loss + value_coef * value_loss - entropy_coef * entropy
    with torch.no_grad():
        stats = PPOStats(
            policy_loss.item(), value_loss.item(), entropy.item(),
            ((ratio - 1).abs() > clip).float().mean().item(), ((ratio - 1) - log_ratio).mean().item(),
        )
    return loss, stats


def minibatch_indices(count: int, minibatches: int, rng: np.random.Generator) -> list[np.ndarray]:
    """A fresh permutation of ``count`` rows cut into ``minibatches`` nearly equal parts."""
    if not 1 <= minibatches <= count:
        raise ValueError(f"minibatches must be in 1..{count}, got {minibatches}")
    return np.array_split(rng.permutation(count), minibatches)
