"""Modes: which slot an env fills next, when a slot is handed to the learner, and in which order
the learner's steps run. One module per mode, each owning its flags and its schedule:

- ``sync``          lockstep, learn after every rollout (lag 0)
- ``hts``           two storages, the delayed gradient, envs run ahead (lag 1)
- ``asynchronous``  ``async``: free/full queues of slots, no barrier (measured lag)

A layer registers a mode of its own with ``register_mode`` (GALA's gossip: ``fastrl.layers.gossip.mode``).

All modes use the same trajectory slots. A barrier mode (sync, hts) gives every env
``storages`` slots; rollout j of env e goes to slot ``(j % storages) * envs + e``, so a storage
(all envs' slots of one rollout) is contiguous and the learner reads it as a view.

The values of ``engine.mode`` are the registered modes' names (``MODES``). Which algorithms each learns with follows
from the policy lags of its data, the mode's own ``takes`` and each algorithm's registration
(``fastrl.algos.registry``).
"""

from __future__ import annotations

from fastrl.algos import registry
from fastrl.modes import asynchronous, hts, sync
from fastrl.modes.base import BarrierSteps, Mode, ModeSpec, Schedule
from fastrl.registry import Registry, RegistryError

MODES: Registry[Mode] = Registry("mode", check=lambda name, mode: None if isinstance(mode, Mode) else "not a Mode")


def register_mode(mode: Mode, *, replace: bool = False) -> Mode:
    """Make ``mode`` a value of ``engine.mode``; returns it."""
    MODES.register(mode.name, mode, replace=replace)
    return mode


for _mode in (sync.MODE, hts.MODE, asynchronous.MODE):
    register_mode(_mode)

__all__ = [
    "MODES",
    "BarrierSteps",
    "Mode",
    "ModeSpec",
    "Schedule",
    "algorithm_error",
    "algorithms_of",
    "default_algorithm",
    "get_mode",
    "mode_of",
    "register_mode",
]


def get_mode(name: str) -> Mode:
    if name not in MODES:
        raise RegistryError(f"engine.mode = {name!r} is not implemented; available: {', '.join(MODES.names())}")
    return MODES.get(name)


def mode_of(config) -> ModeSpec:
    """The slot schedule of a run: its mode's, or for ``gala`` its base mode's, named after both."""
    return get_mode(config.engine.mode).spec_of(config)


def takes(mode: Mode, algorithm: registry.Algorithm) -> bool:
    """Whether ``mode`` learns with ``algorithm``: it learns at one of the mode's policy lags and the mode's own
    ``takes`` allows it; collecting without learning goes anywhere."""
    if not algorithm.learns:
        return True
    if mode.takes is not None and not mode.takes(algorithm):
        return False
    return any(lag in algorithm.lags for lag in mode.lags)


def algorithms_of(mode: str) -> tuple[str, ...]:
    """The registered algorithms ``mode`` learns with, in registration order ("none" included)."""
    this = get_mode(mode)
    return tuple(a.name for a in registry.registered() if takes(this, a))


def default_algorithm(mode: str) -> str:
    """What ``algo.name = "auto"`` learns with in ``mode``: the first of ``registry.DEFAULT_PREFERENCE`` the mode
    takes (sync, hts: PPO; async: IMPALA; gala: A2C)."""
    algorithms = algorithms_of(mode)
    return next(a for a in registry.DEFAULT_PREFERENCE if a in algorithms)


def algorithm_error(mode: str, algorithm: str) -> str | None:
    """Why ``engine.mode = mode`` cannot learn with ``algo.name = algorithm``; None when it can, or when the
    algorithm is a plug-in not imported yet (checked when the run starts)."""
    found = registry.known(algorithm)
    if found is None:
        return None if registry.is_plugin(algorithm) else f"algo.name = {algorithm!r}: {registry.allowed_names()}"
    this = get_mode(mode)
    if takes(this, found):
        return None
    learning = _either(a for a in algorithms_of(mode) if registry.known(a).learns)  # type: ignore[union-attr]
    homes = [m.name for m in MODES.values() if takes(m, found)]
    if len(homes) == 1:  # an algorithm of one mode only (impala, async): name that mode
        return f"algo.name = {algorithm!r} needs engine.mode = {homes[0]!r} (got {mode!r}); use {learning}"
    return f"engine.mode = {mode!r} learns with algo.name = {learning} ({this.because}), not {algorithm!r}"


def _either(names) -> str:
    return " or ".join(repr(name) for name in names)
