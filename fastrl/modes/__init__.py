"""Modes: which slot an env fills next, when a slot is handed to the learner, and in which order
the learner's steps run. One module per mode, each owning its flags and its schedule:

- ``sync``          lockstep, learn after every rollout (lag 0)
- ``hts``           two storages, the delayed gradient, envs run ahead (lag 1)
- ``asynchronous``  ``async``: free/full queues of slots, no barrier (measured lag)
- ``gala``          n learners, each on ``sync`` or ``hts`` (composed from them), gossiping

All modes use the same trajectory slots. A barrier mode (sync, hts) gives every env
``storages`` slots; rollout j of env e goes to slot ``(j % storages) * envs + e``, so a storage
(all envs' slots of one rollout) is contiguous and the learner reads it as a view.

This module is the one place that lists the modes and the algorithms each learns with: the
config's choices and checks, ``build_learner`` and ``make_rule`` read them from here.
"""

from __future__ import annotations

from fastrl.modes import asynchronous, gala, hts, sync
from fastrl.modes.base import BarrierSteps, Mode, ModeSpec, Schedule

MODES: dict[str, Mode] = {mode.name: mode for mode in (sync.MODE, hts.MODE, asynchronous.MODE, gala.MODE)}
ALGORITHMS = ("a2c", "ppo", "impala", "none")  # algo.name's choices, in the order the docs give them
GALA_BASES = tuple(gala.BASES)

__all__ = [
    "ALGORITHMS",
    "GALA_BASES",
    "MODES",
    "BarrierSteps",
    "Mode",
    "ModeSpec",
    "Schedule",
    "algorithm_error",
    "default_algorithm",
    "get_mode",
    "mode_of",
]


def get_mode(name: str) -> Mode:
    try:
        return MODES[name]
    except KeyError:
        raise ValueError(f"engine.mode = {name!r} is not implemented; available: {', '.join(MODES)}") from None


def mode_of(config) -> ModeSpec:
    """The slot schedule of a run: its mode's, or for ``gala`` its base mode's, named after both."""
    return get_mode(config.engine.mode).spec_of(config)


def default_algorithm(mode: str) -> str:
    """What ``algo.name = "auto"`` learns with in ``mode``: PPO where the mode takes it (sync, hts), else the
    mode's own learning algorithm (async: IMPALA, gala: A2C)."""
    algorithms = get_mode(mode).algorithms
    return "ppo" if "ppo" in algorithms else next(a for a in algorithms if a != "none")


def algorithm_error(mode: str, algorithm: str) -> str | None:
    """Why ``engine.mode = mode`` cannot learn with ``algo.name = algorithm``; None when it can."""
    this = get_mode(mode)
    if algorithm in this.algorithms:
        return None
    learning = _either(a for a in this.algorithms if a != "none")
    homes = [m.name for m in MODES.values() if algorithm in m.algorithms]
    if len(homes) == 1:  # an algorithm of one mode only (impala, async): name that mode
        return f"algo.name = {algorithm!r} needs engine.mode = {homes[0]!r} (got {mode!r}); use {learning}"
    return f"engine.mode = {mode!r} learns with algo.name = {learning} ({this.because}), not {algorithm!r}"


def _either(names) -> str:
    return " or ".join(repr(name) for name in names)
