"""The keys left at ``"auto"`` that follow from the others, filled in as a ``Config`` is made: the algorithm of the
mode, the network the algorithm learns with, and the input and return normalisation the built-in models, PPO and
IMPALA take, so everything after it (and the run's config.toml) reads plain values. They need the algorithm
registry and the modes, which stand above the schema, so this module installs ``resolve_derived_defaults`` into it
(``fastrl.schema.install_derived_defaults``) when ``fastrl.config`` is imported; it reads the sections it fills,
never the whole config."""

from __future__ import annotations

from fastrl.algos import registry
from fastrl.modes import default_algorithm
from fastrl.schema import AlgoConfig, ModelConfig, install_derived_defaults
from fastrl.tables import AUTO

BUILTIN_MODELS = ("auto", "mlp", "nature", "shallow", "impala", "multi")


def resolve_derived_defaults(mode: str, algo: AlgoConfig, model: ModelConfig) -> None:
    """``algo.name`` the mode's algorithm (``fastrl.modes.default_algorithm``); ``model.name`` the algorithm's own
    network where it names one; ``model.normalize_obs`` and ``algo.normalize_returns`` on where the built-in
    models and the algorithms registered with ``normalizes_returns`` (PPO; IMPALA, as PopArt) take them, off for
    'random', custom models and other algorithms."""
    if algo.name == AUTO:
        algo.name = default_algorithm(mode)
    algorithm = registry.known(algo.name)  # a plug-in not imported yet: None
    if model.name == AUTO and algorithm is not None and algorithm.model:
        model.name = algorithm.model  # the network the algorithm learns with (PQN's Q-network)
    builtin = model.name in BUILTIN_MODELS
    if model.normalize_obs == AUTO:
        model.normalize_obs = builtin
    if algo.normalize_returns == AUTO:
        algo.normalize_returns = builtin and algorithm is not None and algorithm.normalizes_returns


install_derived_defaults(resolve_derived_defaults)
