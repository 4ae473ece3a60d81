"""The returns and advantages of a storage, time limits bootstrapped: the one call an update rule makes for them.

A storage is ``[N, T + 1, ...]`` per field; its ``done`` codes (``csrc_free_kernels.step_end``) say how each
step ended. A step that CONTINUES passes its return on from the next row, one TERMINATED ends it with its
reward, and one TRUNCATED by a time limit bootstraps from V of the episode's final observation
(``final_obs``, valued here with the model: ``fastrl.algos.time_limits``), since the reset wrote the next
episode's first observation over it. Row T's value bootstraps the steps still running when the rollout ends.

``returns_and_advantages`` does all of it: the n-step returns of A2C (``lam=None``) or GAE(λ) as PPO and
PQN's Q(λ) take it, over the values given (the loss's forward, or those the actors wrote while acting) or
the model's own, a recurrent model's final observations valued with the state after their row. A
multi-agent env's rows are returned alike; which of them a loss counts is the ``live`` field's
(``fastrl.algos.update_rule.live_weights``).
"""

from __future__ import annotations

import numpy as np
import torch

from csrc_free_kernels.gae import gae
from csrc_free_kernels.returns import nstep_returns
from csrc_free_kernels.step_end import TRUNCATED
from fastrl.algos.time_limits import final_values
from fastrl.models.recurrent import hidden_size


@torch.no_grad()
def returns_and_advantages(
    model: torch.nn.Module,
    storage,
    gamma: float,
    lam: float | None = None,
    *,
    values: torch.Tensor | np.ndarray | None = None,
    after: torch.Tensor | None = None,
    device: torch.device | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(returns, advantages)``, float32 ``[N, T]`` tensors on ``device`` (default: the storage's), of a
    ``[N, T + 1, ...]`` storage (``fastrl.buffers.device_storage.DeviceStorage``), time limits bootstrapped from
    ``model``'s values of the truncated steps' final observations.

    ``lam``: GAE's λ; advantages by GAE(λ) and returns = advantages + V. None: n-step returns (the discounted
    rewards on to row T's value) and advantages = returns − V (equal to λ = 1 up to rounding).

    ``values``: V of every row, ``[N, T + 1]`` (row T the bootstrap), as a tensor (detached here) or an array:
    the loss's own forward, or the values the actors wrote while acting with row T the learner's. None: the
    model's, forwarded here without gradient (a recurrent model replayed from the storage's first states).

    ``after``: with ``values`` of a recurrent model (``model.lstm``), its states after each row
    (``fastrl.algos.update_rule.forward_storage``'s third output), which its final observations are read with.
    """
    steps = storage["action"].shape[1] - 1
    device = storage.device if device is None else device
    if values is None:
        from fastrl.algos.update_rule import forward_storage

        _, values, after = forward_storage(model, storage.tensor("obs"), storage)
    elif after is None and hidden_size(model) and (storage["done"][:, :steps] == TRUNCATED).any():
        raise ValueError(
            "a recurrent model values a truncated step's final observation with its state after that row: pass "
            "after= (forward_storage's third output) with values="
        )
    if isinstance(values, torch.Tensor):
        values = values.detach().float()
    else:
        values = np.asarray(values, np.float32)
    if tuple(values.shape) != (storage["reward"].shape[0], steps + 1):
        raise ValueError(f"values {tuple(values.shape)} must be [N, T + 1] = {(storage['reward'].shape[0], steps + 1)}")
    rewards, dones = storage["reward"][:, :steps], storage["done"][:, :steps]
    ends = final_values(model, storage, device, after)  # V(final_obs) at the TRUNCATED steps, 0 elsewhere
    if lam is None:  # only row T's values go to the host
        bootstrap = _host(values[:, steps])
        returns = torch.from_numpy(nstep_returns(rewards, dones, bootstrap, gamma, final_values=ends)).to(device)
        return returns, returns - _rows(values, steps, device)
    advantages = torch.from_numpy(gae(rewards, dones, _host(values), gamma, lam, final_values=ends)).to(device)
    return advantages + _rows(values, steps, device), advantages


def _host(values: torch.Tensor | np.ndarray) -> np.ndarray:
    return values.cpu().numpy() if isinstance(values, torch.Tensor) else values


def _rows(values: torch.Tensor | np.ndarray, steps: int, device: torch.device) -> torch.Tensor:
    """V of rows 0..T-1 as a float32 tensor on ``device``."""
    if isinstance(values, torch.Tensor):
        return values[:, :steps].to(device)
    return torch.from_numpy(np.ascontiguousarray(values[:, :steps])).to(device)
