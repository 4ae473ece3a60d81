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

from fastrl.algos.a2c import A2CDelayed, A2CSync
from fastrl.algos.impala import Impala
from fastrl.algos.ppo import PPO
from fastrl.algos.update_rule import Collect, UpdateRule
from fastrl.models.distributions import ActionDistribution


def make_rule(algorithm: str, lag: int | None, *given, distribution: ActionDistribution | None = None) -> UpdateRule:
    """The rule of ``algo.name`` for a mode of policy ``lag``; ``given``: what every rule takes (see
    ``fastrl.algos.update_rule.UpdateRule``), ``distribution`` the action space's (the config checked the pair)."""
    if algorithm == "none":
        return Collect(*given, distribution=distribution)
    if algorithm == "impala":
        return Impala(*given, distribution=distribution)
    if algorithm == "ppo":
        return PPO(*given, lag=lag, distribution=distribution)
    rule = A2CDelayed if lag == 1 else A2CSync
    return rule(*given, distribution=distribution)
