"""IMPALA's loss (Espeholt et al. 2018) on a batch of trajectory slots, with V-trace targets.

Policy gradient with the V-trace advantages ρ_s (r_s + γ_s v_{s+1} − V(x_s)), value regression
to the V-trace targets v_s, entropy bonus. The behaviour log-probs μ are those the actor wrote
into the slots with the parameters it had then; the target π is the learner's current policy.
A step truncated by a time limit bootstraps from the learner's value of the episode's final
observation (``fastrl.algos.time_limits``); a terminated one does not. A multi-agent env's rows (the slots'
``live`` field): the policy terms over the rows whose agent acted, the value term over those where it was
present; a waiting agent's action was thrown away, so its ratio is 1 (the trace passes through it on-policy).
V-trace runs as the numba kernel on a CPU learner and in torch on a GPU one (same math,
tested against the numpy reference). ``algo.normalize_returns``: PopArt (``fastrl.algos.popart``): V-trace in
the returns' own units, from the values the model returns; its targets move the value statistics, the value
head is rescaled to keep its outputs, and the value error and the policy's advantages are divided by σ. Its
truncations and lambda are IMPALA's own options (``ImpalaOptions``, ``fastrl.algos.impala_options``: the
config's ``[algo.options]``); the batch, ``algo.batch_slots``, is the async mode's.

Loss scale against the paper. Its loss (the ``scalable_agent`` code) sums over the N = T x B
steps of a batch and halves the squared value error, so that d loss / d V = −(v_s − V):

    L_paper = Σ −A_s log π(a_s|x_s) + baseline_cost · ½ Σ (v_s − V(x_s))² − entropy_cost · Σ H(π(·|x_s))

This loss takes means instead, ``policy_loss + value_coef · mean (v_s − V)² − entropy_coef ·
mean H``, which is L_paper / N when ``value_coef = baseline_cost / 2`` (the paper's 0.5 is 0.25
here) and ``entropy_coef = entropy_cost``. Its gradients are therefore N times smaller: RMSProp's
step does not change, except through epsilon (TensorFlow's sqrt(E[g²] + ε) on the sum matches
torch's sqrt(E[g²]) + sqrt(ε)/N on the mean within a factor √2), and a global-norm clip c on the
sum's gradient is c / N here. ``configs/pong_impala_paper.toml`` sets the paper's Atari values so.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from csrc_free_kernels.vtrace import vtrace
from fastrl.algos import popart
from fastrl.algos.impala_options import ImpalaOptions
from fastrl.algos.time_limits import final_values
from fastrl.algos.update_rule import Gradient, LossStats, forward_storage, live_weights, weighted_mean
from fastrl.algos.vtrace_torch import vtrace_torch
from fastrl.buffers.device_storage import DeviceStorage
from fastrl.models.distributions import CATEGORICAL, ActionDistribution
from fastrl.models.normalizer import MergeRanks
from fastrl.schema import AlgoConfig


def impala_loss(
    model: torch.nn.Module,
    storage: DeviceStorage,
    algo: AlgoConfig,
    device: torch.device,
    distribution: ActionDistribution = CATEGORICAL,
    entropy_coef: float | None = None,
    options: ImpalaOptions | None = None,
    observe_targets: bool = False,
    merge_ranks: MergeRanks | None = None,
):
    """V-trace's ratios compare the stored behaviour log-probs with ``distribution``'s of the current head
    (summed over dimensions for MultiDiscrete and Box). ``entropy_coef``: the scheduled bonus (default
    ``algo.entropy_coef``); ``options``: V-trace's truncations and lambda (default ``ImpalaOptions()``).
    A model with value statistics (``algo.normalize_returns``): the value error and the advantages are in units
    of their σ, after ``observe_targets`` merged this batch's targets into them (the update's; not the warm-up's),
    every rank's with ``merge_ranks`` (``fastrl.ranks.cohort``)."""
    steps = storage["action"].shape[1] - 1
    obs = storage.tensor("obs")
    actions = storage.tensor("action")[:, :steps]
    logits, values, after = forward_storage(model, obs, storage)
    chosen, entropies = distribution.log_prob_entropy(logits[:, :steps], actions)
    ends = final_values(model, storage, device, after)  # V of truncated episodes' final observations, same θ
    acting, present = live_weights(storage, steps)  # a multi-agent env's rows: who acted, who was there
    target = chosen.detach()
    if acting is not None:  # an action thrown away was never taken: ratio 1
        target = torch.where(acting > 0, target, storage.tensor("logp")[:, :steps].to(target.dtype))
    own = options if options is not None else ImpalaOptions()
    args = (algo.gamma, own.rho_bar, own.c_bar, own.vtrace_lambda)
    vs, advantages = _vtrace(storage, target, values.detach(), ends, args, device)  # in the returns' units
    statistics = popart.value_statistics(model)
    if statistics is not None:  # PopArt: the errors in units of σ (of the statistics with this batch's targets)
        scale = popart.observe_targets(statistics, vs, present, merge_ranks) if observe_targets else statistics.std()
        vs, values, advantages = vs / scale, values / scale, advantages / scale
    policy_loss = -weighted_mean(advantages * chosen, acting)
    value_loss = weighted_mean((vs - values[:, :steps]).pow(2), present)
    entropy = weighted_mean(entropies, acting)
    bonus = algo.entropy_coef if entropy_coef is None else entropy_coef
    loss = policy_loss + algo.value_coef * value_loss - bonus * entropy
    return loss, LossStats(policy_loss.item(), value_loss.item(), entropy.item())


def _vtrace(
    storage, target_logp: torch.Tensor, values: torch.Tensor, ends: np.ndarray, args: tuple, device: torch.device
):
    """(v_s, advantages) as tensors on ``device``; numba on the CPU, torch elsewhere. ``args``: (gamma, rho_bar,
    c_bar, lambda)."""
    steps = target_logp.shape[1]
    gamma, rho_bar, c_bar, lam = args
    behaviour, rewards, dones = (storage[k][:, :steps] for k in ("logp", "reward", "done"))
    if device.type == "cpu":
        target, value_rows = target_logp.float().numpy(), values.float().numpy()
        vs, advantages = vtrace(
            behaviour, target, rewards, dones, value_rows, gamma, rho_bar, c_bar, lam, final_values=ends
        )
        return torch.from_numpy(vs), torch.from_numpy(advantages)
    behaviour_t, rewards_t, dones_t = (storage.tensor(k)[:, :steps] for k in ("logp", "reward", "done"))  # once
    ends_t = torch.from_numpy(ends).to(device)
    return vtrace_torch(
        behaviour_t, target_logp, rewards_t, dones_t, values, gamma, rho_bar, c_bar, lam, final_values=ends_t
    )


class Impala(Gradient):
    """One V-trace step per batch at the current θ; the async learner measures the lag (``lag`` None). With value
    statistics (``algo.normalize_returns``), each update moves them by its targets and rescales the value head to
    keep its outputs (PopArt, ``fastrl.algos.popart``)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.options: ImpalaOptions = self.options if self.options is not None else ImpalaOptions()
        self._learning = False  # the loss of an update moves the value statistics; the warm-up's does not

    def _loss(self, net, storage):
        own = (self.distribution, self.entropy_coef, self.options, self._learning, self.cohort.moments)
        return impala_loss(net, storage, self.algo, self.device, *own)

    def learn(self, storage, rollout):
        statistics = popart.value_statistics(self.model)
        if statistics is None:
            return super().learn(storage, rollout)
        head = popart.value_head(self.model)
        before, saved = popart.snapshot(statistics), copy.deepcopy(statistics.state_dict())
        self._learning = True
        try:
            losses = super().learn(storage, rollout)  # the statistics move by this batch's targets
        except BaseException:
            statistics.load_state_dict(saved)  # no update was made from this batch (a non-finite loss): nor by it
            raise
        finally:
            self._learning = False
        after = popart.snapshot(statistics)
        popart.preserve_outputs(head, before, after)
        if self.pending_grads is not None:
            self.pending_grads = popart.rescaled_gradients(self.model, self.pending_grads, head, before, after)
        return losses
