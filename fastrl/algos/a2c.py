"""A2C (Mnih et al. 2016; PAAC in ``sync``, HTS-RL's delayed gradient in ``hts``, each GALA agent's
rule): the loss on one storage and the two update rules that apply it.

The loss works on ``[N, T + 1, ...]`` views of the trajectory slots; step T holds only the
observation whose value bootstraps the n-step returns. A step truncated by a time limit
bootstraps from the value of its episode's final observation (``fastrl.algos.advantages``).

- ``A2CSync``     the gradient of D(θ_j) at θ_j gives θ_{j+1} (lag 0).
- ``A2CDelayed``  HTS-RL eq. 6: θ_{j+1} = θ_j − η g_{j−1}; g_j is taken at θ_j (``behaviour``,
                  kept when the model moves on) on D(θ_j) (lag 1).
"""

from __future__ import annotations

import torch

from fastrl.algos.advantages import returns_and_advantages
from fastrl.algos.update_rule import Gradient, LossStats, forward_storage, live_weights, weighted_mean
from fastrl.buffers.device_storage import DeviceStorage
from fastrl.models.compiling import compiled_copy
from fastrl.models.distributions import CATEGORICAL, ActionDistribution
from fastrl.schema import AlgoConfig


def a2c_loss(
    model: torch.nn.Module,
    storage: DeviceStorage,
    algo: AlgoConfig,
    device: torch.device,
    distribution: ActionDistribution = CATEGORICAL,
    entropy_coef: float | None = None,
):
    """``distribution`` reads the head (``fastrl.models.distributions``: logits, MultiDiscrete, Gaussian).
    ``entropy_coef``: the scheduled bonus (default ``algo.entropy_coef``)."""
    steps = storage["action"].shape[1] - 1
    obs = storage.tensor("obs")
    actions = storage.tensor("action")[:, :steps]
    logits, values, after = forward_storage(model, obs, storage)
    # n-step returns to row T's value, time limits bootstrapped from V(final observation) with the same θ
    returns, _ = returns_and_advantages(model, storage, algo.gamma, values=values, after=after, device=device)
    chosen, entropies = distribution.log_prob_entropy(logits[:, :steps], actions)
    advantages = returns - values[:, :steps]
    acting, present = live_weights(storage, steps)  # a multi-agent env's rows: who acted, who was there
    policy_loss = -weighted_mean(advantages.detach() * chosen, acting)
    value_loss = weighted_mean(advantages.pow(2), present)
    entropy = weighted_mean(entropies, acting)
    bonus = algo.entropy_coef if entropy_coef is None else entropy_coef
    loss = policy_loss + algo.value_coef * value_loss - bonus * entropy
    return loss, LossStats(policy_loss.item(), value_loss.item(), entropy.item())


class A2CSync(Gradient):
    def _loss(self, net, storage):
        return a2c_loss(net, storage, self.algo, self.device, self.distribution, self.entropy_coef)


class A2CDelayed(A2CSync):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.behaviour = compiled_copy(self.model)  # holds θ_j while its gradient is taken

    def _acting(self) -> torch.nn.Module:
        return self.behaviour

    def advance(self):
        self.behaviour.load_state_dict(self.model.state_dict())  # θ_j, before it moves on
        return super().advance()

    def state(self) -> dict:
        grads = self.pending_grads
        return {"pending_grads": [g.detach().cpu() for g in grads] if grads is not None else None}

    def load(self, state: dict) -> None:
        grads = state.get("pending_grads")
        self.pending_grads = [g.to(self.device) for g in grads] if grads is not None else None


def a2c_rule(*args, lag: int | None, **kwargs) -> A2CSync:
    """A2C's rule for a mode of policy ``lag``: PAAC's (0) or HTS-RL's delayed gradient (1)."""
    if lag not in (0, 1):
        raise ValueError(f"a2c learns in a barrier mode (sync: lag 0, hts: lag 1), not with lag {lag!r}")
    return (A2CDelayed if lag == 1 else A2CSync)(*args, lag=lag, **kwargs)
