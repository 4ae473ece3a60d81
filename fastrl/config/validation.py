"""Checks that involve more than one key (each key's own type and rules: ``fastrl.config.loading``)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from fastrl.config.schema import AUTO, Config
from fastrl.errors import ConfigError
from fastrl.modes import algorithm_error


def validate(config: Config) -> None:
    """Checks that involve more than one key."""
    engine = config.engine
    # keys still 'auto' are checked again once resolved (process/auto_layout.py), before the run starts
    if isinstance(engine.executors, int) and engine.executors > engine.envs:
        raise ConfigError(f"engine.executors = {engine.executors} is more than engine.envs = {engine.envs}")
    if isinstance(engine.actors, int) and engine.actors > engine.envs:
        raise ConfigError(f"engine.actors = {engine.actors} is more than engine.envs = {engine.envs}")
    layout_known = AUTO not in (engine.actors, engine.executors)
    if engine.inline_actors is True and layout_known and engine.actors != engine.executors:
        raise ConfigError(
            f"engine.inline_actors = true runs one actor inside each executor: set engine.actors = engine.executors "
            f"(now {engine.actors} and {engine.executors})"
        )
    name = config.algo.name
    wrong_algorithm = algorithm_error(engine.mode, name)
    if wrong_algorithm:
        raise ConfigError(wrong_algorithm)
    if config.algo.normalize_returns and name != "ppo":
        raise ConfigError(f"algo.normalize_returns = true is implemented for algo.name = 'ppo', not {name!r}")
    if config.algo.clip_schedule != "constant" and name != "ppo":
        raise ConfigError(
            f"algo.clip_schedule = {config.algo.clip_schedule!r} anneals PPO's clip range: algo.name is {name!r}, "
            "which clips nothing; leave algo.clip_schedule = 'constant'"
        )
    if config.algo.normalize_rewards and name == "none":
        raise ConfigError(
            "algo.normalize_rewards = true needs a learning algorithm: algo.name = 'none' trains on no reward"
        )
    if config.algo.name == "ppo" and config.algo.minibatches > engine.envs * engine.rollout:
        raise ConfigError(
            f"algo.minibatches = {config.algo.minibatches} is more than the {engine.envs * engine.rollout} steps "
            f"of a storage (engine.envs x engine.rollout)"
        )
    if config.algo.name == "ppo" and config.model.lstm and config.algo.minibatches > engine.envs:
        raise ConfigError(
            f"algo.minibatches = {config.algo.minibatches} is more than engine.envs = {engine.envs}: with model.lstm "
            f"a minibatch is whole envs' rollouts (replayed from their first state), so at most one per env"
        )
    if engine.mode == "gala":
        _validate_gala(config)
    elif engine.learners != 1:
        raise ConfigError(
            f"engine.learners = {engine.learners} needs engine.mode = 'gala' (the other modes have one learner)"
        )


LAUNCH_KEYS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")  # what torchrun tells every process it starts


def launch_size(environ: Mapping[str, str] = os.environ) -> int:
    """The ranks torchrun started (1 without it): a run's input like its config (``fastrl.ranks.launch``)."""
    return int(environ.get("WORLD_SIZE", 1)) if all(key in environ for key in LAUNCH_KEYS) else 1


def _validate_gala(config: Config) -> None:
    engine = config.engine
    if engine.learners * launch_size() < 2:
        raise ConfigError(
            "engine.mode = 'gala' needs engine.learners >= 2 (the number of gossiping agents; under "
            "torchrun engine.learners is per rank, and one per rank is enough)"
        )
    if engine.envs % engine.learners:
        raise ConfigError(
            f"engine.envs = {engine.envs} must be a multiple of engine.learners = {engine.learners}: "
            "each gala agent owns an equal share of the envs"
        )
    if engine.serial:
        raise ConfigError(
            "engine.serial = true cannot run gala: its learners wait on each other's messages, "
            "so they need processes of their own"
        )
