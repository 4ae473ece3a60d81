"""The learning algorithms, one module each, every one owning its loss and its update rule, and its own
hyper-parameters (the config's ``[algo.options]``) in a light ``*_options`` module beside it, which the config
checks and lists without importing torch:

- ``a2c``     A2C: ``A2CSync`` (PAAC, lag 0) and ``A2CDelayed`` (HTS-RL's delayed gradient, lag 1).
- ``ppo``     PPO: clipped-surrogate epochs over minibatches (sync, and hts through a trainee); ``ppo_options``.
- ``impala``  IMPALA: one V-trace step per gathered batch (async); ``impala_options``.
- ``pqn``     PQN: Q(λ) regression, ε-greedy acting, written as a plug-in would be; ``pqn_options``.
- ``update_rule``  what the rules share: the protocol the learner drives, ``Update``, ``Collect`` (no learning).
- ``registry``     one registration per algorithm (the built-ins' and plug-ins'): what the config, the modes,
  the learner and the metrics know of it.

The maths they use stays apart: ``time_limits`` (V of truncated episodes' final observations),
``vtrace_torch`` (V-trace on a GPU learner; the numba kernels in ``csrc_free_kernels``: n-step
returns, GAE, V-trace), ``optimizers`` (TensorFlow's RMSprop, and the optimizer a config names),
``gossip_bounds`` (GALA's consensus bound). gala's mixing of parameters between learners is
``fastrl.layers.gossip.mixing``'s. This package's import is light (no torch): the config reads the registry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastrl.algos.registry import Algorithm, load_algorithm, options_of, register_algorithm

if TYPE_CHECKING:
    from fastrl.algos.update_rule import UpdateRule
    from fastrl.schema import AlgoConfig

__all__ = ["Algorithm", "action_sampler", "load_algorithm", "make_rule", "register_algorithm"]


def make_rule(algo: AlgoConfig, lag: int | None, *given: Any, distribution: Any = None) -> UpdateRule:
    """The update rule of ``algo.name`` for a mode of policy ``lag`` (None: measured, async), with its
    ``[algo.options]``; ``given``: what every rule takes (``fastrl.algos.update_rule.UpdateRule``: model, algo,
    device, step, seed, cohort), ``distribution`` the action space's. The config checked that the mode takes it."""
    algorithm = load_algorithm(algo.name)
    options = options_of(algorithm, algo.options)
    return algorithm.rule_class()(*given, distribution=distribution, lag=lag, options=options)


def action_sampler(spec: Any) -> Any:
    """How a run's actors turn a head into actions: its algorithm's own sampler (PQN's ε-greedy), else the action
    space's distribution (``fastrl.models.distributions``)."""
    from fastrl.models.distributions import distribution_for

    algorithm = load_algorithm(spec.config.algo.name)
    factory = algorithm.sampler_factory()
    if factory is None:
        return distribution_for(spec.env_info.action)
    return factory(spec, options_of(algorithm, spec.config.algo.options))
