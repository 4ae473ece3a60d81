"""The learning algorithms, one module each, every one owning its loss and its update rule:

- ``a2c``     A2C: ``A2CSync`` (PAAC, lag 0) and ``A2CDelayed`` (HTS-RL's delayed gradient, lag 1).
- ``ppo``     PPO: clipped-surrogate epochs over minibatches (sync, and hts through a trainee).
- ``impala``  IMPALA: one V-trace step per gathered batch (async).
- ``update_rule``  what the rules share: the protocol the learner drives, ``Update``, ``Collect`` (no learning).

The maths they use stays apart: ``time_limits`` (V of truncated episodes' final observations),
``vtrace_torch`` (V-trace on a GPU learner; the numba kernels in ``csrc_free_kernels``: n-step
returns, GAE, V-trace), ``optimizers`` (TensorFlow's RMSprop, and the optimizer a config names),
``gossip_bounds`` (GALA's consensus bound). gala's mixing of parameters between learners is
``fastrl.learning.gossip``'s. Which mode takes which algorithm is ``fastrl.modes``' to say.
"""

from __future__ import annotations

import torch

from fastrl.algos.a2c import A2CDelayed, A2CSync
from fastrl.algos.impala import Impala
from fastrl.algos.ppo import PPO
from fastrl.algos.update_rule import Collect, Step, UpdateRule
from fastrl.config import AlgoConfig
from fastrl.models.distributions import ActionDistribution
from fastrl.ranks.cohort import Solo


def make_rule(
    algorithm: str,
    lag: int | None,
    model: torch.nn.Module,
    algo: AlgoConfig,
    device: torch.device,
    step: Step,
    seed: int,
    cohort: Solo | None = None,
    distribution: ActionDistribution | None = None,
) -> UpdateRule:
    """The rule of ``algo.name`` for a mode of policy ``lag`` (None: measured, async); the rest is what every
    rule takes (``fastrl.algos.update_rule.UpdateRule``), ``distribution`` the action space's. The config
    checked that the mode takes the algorithm."""
    given = (model, algo, device, step, seed, cohort)
    if algorithm == "none":
        return Collect(*given, distribution=distribution)
    if algorithm == "impala":
        return Impala(*given, distribution=distribution)
    if algorithm == "ppo":
        if lag is None:
            raise ValueError("ppo runs in a barrier mode (sync: lag 0, hts: lag 1), not with a measured lag")
        return PPO(*given, lag=lag, distribution=distribution)
    rule = A2CDelayed if lag == 1 else A2CSync
    return rule(*given, distribution=distribution)
