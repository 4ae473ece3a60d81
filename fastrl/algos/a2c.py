"""A2C loss on one storage: n-step returns, policy gradient, value regression, entropy bonus.

Works on ``[N, T + 1, ...]`` views of the trajectory slots; step T holds only the observation
whose value bootstraps the returns. A step truncated by a time limit bootstraps from the value
of its episode's final observation (``fastrl.algos.time_limits``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from csrc_free_kernels.returns import nstep_returns
from fastrl.algos.optimizers import RMSpropTF
from fastrl.algos.time_limits import final_values
from fastrl.config import AlgoConfig
from fastrl.models.distributions import CATEGORICAL, ActionDistribution
from fastrl.models.recurrent import hidden_size, unroll


@dataclass
class LossStats:
    policy_loss: float
    value_loss: float
    entropy: float


def forward_storage(model: torch.nn.Module, obs: torch.Tensor, storage: dict[str, np.ndarray],
                    device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Forward all N*(T+1) observations at once -> heads [N, T+1, H], values [N, T+1], and for a recurrent
    model the states after each row [N, T+1, 2H] (replayed from the storage's first states; else None)."""
    n, t1 = obs.shape[:2]
    if hidden_size(model):
        return unroll(model, obs, torch.from_numpy(storage["hidden"][:, 0]).to(device),
                      torch.from_numpy(storage["done"]).to(device))
    logits, values = model(obs.reshape(n * t1, *obs.shape[2:]))
    return logits.reshape(n, t1, -1), values.reshape(n, t1), None


def a2c_loss(model: torch.nn.Module, storage: dict[str, np.ndarray], algo: AlgoConfig, device: torch.device,
             distribution: ActionDistribution = CATEGORICAL):
    """``distribution`` reads the head (``fastrl.models.distributions``: logits, MultiDiscrete, Gaussian)."""
    steps = storage["action"].shape[1] - 1
    obs = torch.from_numpy(storage["obs"]).to(device)
    actions = torch.from_numpy(storage["action"][:, :steps]).to(device)
    logits, values, after = forward_storage(model, obs, storage, device)
    bootstrap = values[:, steps].detach().float().cpu().numpy()
    returns = nstep_returns(storage["reward"][:, :steps], storage["done"][:, :steps], bootstrap, algo.gamma,
                            final_values=final_values(model, storage, device, after))
    returns = torch.from_numpy(returns).to(device)
    chosen, entropies = distribution.log_prob_entropy(logits[:, :steps], actions)
    advantages = returns - values[:, :steps]
    policy_loss = -(advantages.detach() * chosen).mean()
    value_loss = advantages.pow(2).mean()
    entropy = entropies.mean()
    loss = policy_loss + algo.value_coef * value_loss - algo.entropy_coef * entropy
    return loss, LossStats(policy_loss.item(), value_loss.item(), entropy.item())


def make_optimizer(model: torch.nn.Module, algo: AlgoConfig) -> torch.optim.Optimizer:
    if algo.optimizer == "rmsprop":
        return torch.optim.RMSprop(model.parameters(), lr=algo.lr, alpha=algo.rms_alpha, eps=algo.eps)
    if algo.optimizer == "rmsprop_tf":  # TF's formula (fastrl.algos.optimizers)
        return RMSpropTF(model.parameters(), lr=algo.lr, alpha=algo.rms_alpha, eps=algo.eps)
    if algo.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=algo.lr, eps=algo.eps)
    return torch.optim.SGD(model.parameters(), lr=algo.lr)
