"""Keys that moved, still read: ``[algo]``'s PPO and IMPALA keys are now their algorithm's own ``[algo.options]``
(``fastrl.algos.ppo_options``, ``fastrl.algos.impala_options``), so that an algorithm's hyper-parameters are read
in one place; a layer's keys that were the core's are now its section's (``Layer.moved_keys``). A config written
before (a file, ``--set``, the config a checkpoint holds) still reads: each old key goes where its value is read
now, with one warning naming the new key; one the run's algorithm has no option of was read and never used before,
and is left out now, with a warning saying so."""

from __future__ import annotations

import logging

from fastrl.algos import registry
from fastrl.errors import ConfigError
from fastrl.layer import layer_moved_keys

log = logging.getLogger(__name__)


def moved_algo_keys() -> dict[str, str]:
    """Each old ``[algo]`` key -> the algorithm whose ``[algo.options]`` holds it now, under the same name (its
    registration's ``moved_keys``)."""
    return {key: algorithm.name for algorithm in registry.registered() for key in algorithm.moved_keys}


def moved_keys(data: dict) -> dict:
    """``data`` (one source's tables) with every moved key where it is read now: an algorithm's options, a layer's
    section."""
    return moved_to_sections(moved_to_options(data))


def moved_to_sections(data: dict) -> dict:
    """Each layer's old core keys moved into its section, with a warning naming the new key; one source giving a key
    both ways is a ``ConfigError`` naming both."""
    if not isinstance(data, dict):
        return data
    for (old_section, old_key), (section, key) in layer_moved_keys().items():
        old = data.get(old_section)
        if not isinstance(old, dict) or old_key not in old:
            continue
        new = data.get(section, {})
        if not isinstance(new, dict):
            return data  # the section's own check names a value that is no table
        if key in new:
            raise ConfigError(
                f"{old_section}.{old_key} and {section}.{key} are both set: {old_section}.{old_key} is the old name "
                f"of {section}.{key}; keep {section}.{key} alone"
            )
        log.warning("%s.%s is deprecated: write %s.%s", old_section, old_key, section, key)
        rest = {k: v for k, v in old.items() if k != old_key}
        data = {**data, old_section: rest, section: {**new, key: old[old_key]}}
    return data


def moved_to_options(data: dict) -> dict:
    """``data`` (one source's tables: a file, one ``--set``, a dict, a checkpoint's config) with each old ``[algo]``
    key moved to ``[algo.options]``, with a warning naming the new key, so a later source overrides it as it would
    the new key. One source giving a key both ways is a ``ConfigError`` naming both. A key the run's algorithm has
    no option of is then left out with a warning (``fastrl.algos.registry.others_options``), as it was unused."""
    algo = data.get("algo") if isinstance(data, dict) else None
    known = moved_algo_keys()
    if not isinstance(algo, dict) or not known.keys() & algo.keys():
        return data
    moved = {key: value for key, value in algo.items() if key in known}
    options = algo.get("options", {})
    if not isinstance(options, dict):
        return data  # the options' own check names a table that is not one
    both = [key for key in moved if key in options]
    if both:
        key = both[0]
        raise ConfigError(
            f"algo.{key} and algo.options.{key} are both set: algo.{key} is the old name of algo.options.{key}; "
            f"keep algo.options.{key} alone"
        )
    for key in moved:
        log.warning("algo.%s is deprecated: write algo.options.%s", key, key)
    rest = {key: value for key, value in algo.items() if key not in moved}
    return {**data, "algo": {**rest, "options": {**options, **moved}}}
