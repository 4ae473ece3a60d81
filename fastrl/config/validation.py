"""The checks of a whole config: what involves more than one key, the algorithm registry and the modes (each
key's own type and rules: ``fastrl.tables``, as the config is read; the ``"auto"`` keys that follow from the
others: ``fastrl.config.derived``, as a Config is made)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from fastrl.algos import registry
from fastrl.errors import ConfigError
from fastrl.layer import check_layers
from fastrl.modes import MODES, algorithm_error, get_mode
from fastrl.registry import check_entry_points
from fastrl.tables import AUTO

if TYPE_CHECKING:
    from fastrl.schema import Config


def validate(config: Config) -> None:
    """Checks that involve more than one key, and the installed plug-ins' entry points."""
    check_entry_points()
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
    _validate_algorithm(config)
    _validate_mode(config)
    check_layers(config)


LAUNCH_KEYS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")  # what torchrun tells every process it starts


def launch_size(environ: Mapping[str, str] = os.environ) -> int:
    """The ranks torchrun started (1 without it): a run's input like its config (``fastrl.ranks.launch``)."""
    return int(environ.get("WORLD_SIZE", 1)) if all(key in environ for key in LAUNCH_KEYS) else 1


def _validate_algorithm(config: Config) -> None:
    """``algo.name`` against the mode and the settings that need an algorithm to take them, and the algorithm's own
    checks and options; a plug-in's once its module is imported (``load_algorithm``, when a run starts)."""
    name = config.algo.name
    wrong = algorithm_error(config.engine.mode, name)
    if wrong:
        raise ConfigError(wrong)
    algorithm = registry.known(name)
    if algorithm is None:  # a plug-in not imported yet
        return
    if config.algo.normalize_returns and not algorithm.normalizes_returns:
        takers = [a.name for a in registry.registered() if a.normalizes_returns]
        raise ConfigError(
            f"algo.normalize_returns = true is implemented for algo.name = {_either(takers)}, not {name!r}"
        )
    problem = algorithm.check(config) if algorithm.check is not None else None
    if problem:
        raise ConfigError(problem)
    registry.options_of(algorithm, config.algo.options)  # its own keys (PPO's clip schedule...): its alone


def _either(names) -> str:
    return " or ".join(repr(n) for n in names)


def _validate_mode(config: Config) -> None:
    """``engine.learners`` against the mode, and the mode's own checks."""
    mode, learners = get_mode(config.engine.mode), config.engine.learners
    if learners != 1 and not mode.learners:
        many = [m.name for m in MODES.values() if m.learners]
        raise ConfigError(
            f"engine.learners = {learners} needs engine.mode = {_either(many) or 'a mode of many learners'} "
            f"(engine.mode = {mode.name!r} has one learner)"
        )
    problem = mode.check(config) if mode.check is not None else None
    if problem:
        raise ConfigError(problem)
