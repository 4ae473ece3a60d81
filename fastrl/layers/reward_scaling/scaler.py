"""``reward_scaling.normalize``: the learner trains on rewards scaled by the running std of a discounted return.

The scaling is the learner's, at its barrier, over the storage it learns from, in a fixed (step,
env) order (``csrc_free_kernels.reward_scaling``): so it is as deterministic as the parameters,
does not depend on how executors and actors are laid out, and a rollout's rewards are scaled once
whichever rule reads them. The slots keep the raw rewards (episode returns and metrics report raw
scores); the rule gets a copy of the storage whose ``reward`` is scaled.

State: each env's discounted-return accumulator and the running (count, mean, var), float64,
saved in the learner's checkpoint under ``reward_scaling`` and restored by a resumed run, which
then goes on bit for bit (hts learns the rollouts in order; async learns batches as they come,
which is fine since async is not reproducible anyway; each gala learner keeps its own over its
own envs). Across torchrun ranks the per-step moments of every rank's rows are merged in rank
order (``cohort.moments``), so 2 ranks x 4 envs scale as 1 rank x 8 envs, up to float rounding.
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from csrc_free_kernels.reward_scaling import (
    discounted_returns,
    new_stats,
    normalize_rewards,
    scale_rewards,
    step_moments,
)
from fastrl.learning.extensions import LearnerExtension, Storage
from fastrl.ranks.cohort import Solo

log = logging.getLogger(__name__)


class RewardScaler(LearnerExtension):
    key = "reward_scaling"

    def __init__(self, envs: int, gamma: float, clip: float, cohort: Solo | None = None):
        self.gamma, self.clip = gamma, clip
        self.cohort = cohort or Solo()
        self.returns = np.zeros(envs)  # G_e: the discounted return of each env's episode under way
        self.stats = new_stats()  # running (count, mean, var) of G
        self.pending = self.returns, self.stats  # what ``scaled`` computed, for ``commit``

    def scaled(self, storage: dict[str, np.ndarray], env_ids: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """``storage`` with its rewards scaled (a new array; the slots are not touched); ``env_ids``: the env
        of each slot (default: slot n is env n). The statistics and accumulators past it are kept pending
        until ``commit``: an update that fails leaves them as they were, with the parameters."""
        steps = storage["action"].shape[1] - 1
        rewards = storage["reward"][:, :steps]
        carry, stats = self.returns.copy(), self.stats.copy()
        returns = discounted_returns(rewards, storage["done"][:, :steps], carry, self.gamma, env_ids)
        count, mean, var = self.cohort.moments(returns.shape[0], *map(torch.from_numpy, step_moments(returns)))
        reward = storage["reward"].copy()  # row T (never learned from) stays raw
        reward[:, :steps] = scale_rewards(rewards, count, mean.cpu().numpy(), var.cpu().numpy(), stats, self.clip)
        self.pending = carry, stats
        return {**storage, "reward": reward}

    def commit(self) -> None:
        """The update learned from the last ``scaled`` storage: its statistics and accumulators are now the state."""
        self.returns, self.stats = self.pending

    def state(self) -> dict:
        return {"returns": torch.from_numpy(self.returns.copy()), "stats": torch.from_numpy(self.stats.copy())}

    def load(self, state: dict | None) -> None:
        if state is None:
            log.warning(
                "reward_scaling.normalize: the checkpoint has no reward statistics (it was trained without "
                "them); they start afresh"
            )
            return
        returns = state["returns"].numpy()
        if returns.shape != self.returns.shape:
            raise ValueError(
                f"the checkpoint's reward accumulators are for {len(returns)} envs, this learner has "
                f"{len(self.returns)}"
            )
        self.returns[:], self.stats[:] = returns, state["stats"].numpy()

    # ------------------------------------------------------------------ as a learner extension

    def before_learning(self, storage: Storage, rollout: int, env_ids: np.ndarray | None) -> Storage:
        return self.scaled(storage, env_ids)

    def learned(self) -> None:
        self.commit()


def reward_scaling(learner) -> RewardScaler | None:
    """A learner's scaler over its envs, or None without ``reward_scaling.normalize``."""
    options = learner.spec.config.reward_scaling
    if not options.normalize:
        return None
    return RewardScaler(len(learner.owned), learner.algo.gamma, options.clip, learner.cohort)


def warm_up() -> None:
    """Its kernel compiled into numba's cache (and loaded) before a run's workers start: the layer's ``warm_up``.
    The learner's [N, T] views of [N, T + 1] storages; with N = 1 numpy sees them as contiguous."""
    for n in (2, 1):
        rows = np.zeros((n, 3), np.float32)
        dones = np.zeros((n, 3), np.uint8)[:, :2]
        normalize_rewards(rows[:, :2], dones, np.zeros(n), new_stats(), 0.99, 10.0)
