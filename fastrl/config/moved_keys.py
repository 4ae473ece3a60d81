"""Keys that moved, still read: ``[algo]``'s PPO and IMPALA keys are now their algorithm's own ``[algo.options]``
(``fastrl.algos.ppo_options``, ``fastrl.algos.impala_options``), so that an algorithm's hyper-parameters are read
in one place. A config written before (a file, ``--set``, the config a checkpoint holds) still reads: each old key
goes where its value is read now, with one warning naming the new key; one the run's algorithm has no option of
was read and never used before, and is ignored now, with a warning saying so."""

from __future__ import annotations

import logging
from typing import Any

from fastrl.algos import registry
from fastrl.errors import ConfigError

log = logging.getLogger(__name__)

# old [algo] key -> the algorithm whose [algo.options] holds it now, under the same name
MOVED_ALGO_KEYS = {
    "clip": "ppo",
    "clip_schedule": "ppo",
    "clip_final": "ppo",
    "clip_anneal_frames": "ppo",
    "value_clip": "ppo",
    "target_kl": "ppo",
    "gae_lambda": "ppo",
    "normalize_advantages": "ppo",
    "rho_bar": "impala",
    "c_bar": "impala",
    "vtrace_lambda": "impala",
}


def take_moved_keys(data: dict) -> tuple[dict, dict[str, Any]]:
    """``data`` (a config's tables) without the old ``[algo]`` keys, and those keys' values by name. A key given
    both ways is a ``ConfigError`` naming both."""
    algo = data.get("algo") if isinstance(data, dict) else None
    if not isinstance(algo, dict) or not MOVED_ALGO_KEYS.keys() & algo.keys():
        return data, {}
    moved = {key: value for key, value in algo.items() if key in MOVED_ALGO_KEYS}
    options = algo.get("options")
    both = [key for key in moved if isinstance(options, dict) and key in options]
    if both:
        key = both[0]
        raise ConfigError(
            f"algo.{key} and algo.options.{key} are both set: algo.{key} is the old name of algo.options.{key}; "
            f"keep algo.options.{key} alone"
        )
    rest = {key: value for key, value in algo.items() if key not in moved}
    return {**data, "algo": rest}, moved


def place_moved_keys(config: Any, moved: dict[str, Any]) -> None:
    """The old keys ``take_moved_keys`` took, into ``config.algo.options`` (checked there as every option is), once
    ``algo.name`` is resolved; those the algorithm has no option of are dropped. An algorithm not known yet (a
    plug-in, imported when its run starts) gets them all: its options' check names any it lacks."""
    if not moved:
        return
    algorithm = registry.known(config.algo.name)
    takes = registry.option_names(algorithm) if algorithm is not None else frozenset()
    placed = {key: value for key, value in moved.items() if algorithm is None or key in takes}
    for key in placed:
        log.warning("algo.%s is deprecated: write algo.options.%s", key, key)
    ignored = [key for key in moved if key not in placed]
    if ignored:
        names = ", ".join(f"algo.{key}" for key in ignored)
        owners = " and ".join(sorted({MOVED_ALGO_KEYS[key] for key in ignored}))
        log.warning(
            "%s: deprecated (now algo.options.KEY of %s), and algo.name = %r has no such option: ignored",
            names,
            owners,
            config.algo.name,
        )
    if placed:
        config.algo.options = {**config.algo.options, **placed}
