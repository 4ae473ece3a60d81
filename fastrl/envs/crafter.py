"""Crafter (Hafner 2021; ``pip install 'fastrl-engine[crafter]'``): an open world of 64x64 RGB frames, 17 actions and 22
achievements, behind the executor's adapter protocol (``fastrl.envs.base``).

Ids: ``crafter`` and ``CrafterReward-v1`` (the benchmark's reward: +1 for each achievement unlocked the first time
in an episode, +-0.1 per health point gained or lost), ``CrafterNoReward-v1`` (reward 0). ``env.kwargs`` go to
``crafter.Env`` (``area``, ``view``, ``size``, ``length``: 10,000 steps by default).

- **Spaces**: the frame is written channels first (``[3, size, size]`` uint8), as fastrl's CNNs take images;
  Discrete(17).
- **Ends**: the player's death is a terminal state (``TERMINATED``), the length limit a truncation (``TRUNCATED``:
  the learner bootstraps), as crafter's ``discount`` says (its old gym API gives one ``done`` for both).
- **Achievements**: ``episode_stats()`` gives, for each of the 22, 1 if the episode unlocked it; the metrics lines
  carry their means (``episode_stats``), from which ``fastrl bench crafter`` computes the benchmark's score.
- **Seeding**: ``reset(seed)`` sets crafter's seed and episode counter, so that the world is generated from the seed
  alone. Crafter keeps each chunk's creatures in a ``set``, which iterates in memory-address order, and its
  balancing picks a creature to despawn by its place in that order: the same seed gave other worlds in another
  process (and after a checkpoint's restore). The adapter keeps those sets in insertion order instead (the same
  draws, the same rules; only which creature a draw names no longer depends on addresses), so an episode is fixed by
  its seed and actions, runs are bit-identical across layouts, and ``get_state`` (a pickle) resumes exactly.
"""

from __future__ import annotations

import collections
import pickle
from typing import TYPE_CHECKING, Any

import numpy as np

from csrc_free_kernels.step_end import CONTINUES, TERMINATED, TRUNCATED
from fastrl.envs.actions import ActionSpec, UnsupportedEnvError
from fastrl.envs.base import EnvAdapter
from fastrl.envs.registry import EnvBackend, register_env_backend
from fastrl.errors import install_hint
from fastrl.schema import EnvConfig

if TYPE_CHECKING:
    from fastrl.envs.obs_layout import ObsLayout

NAME = "crafter"
IDS = {"crafter": True, "CrafterReward-v1": True, "CrafterNoReward-v1": False}  # id -> whether it rewards
INSTALL = install_hint("crafter")


def _crafter():
    try:
        import crafter
    except ImportError:
        raise UnsupportedEnvError(f"env.id = 'crafter' needs the crafter package: {INSTALL}") from None
    return crafter


def achievements() -> tuple[str, ...]:
    """The benchmark's 22 achievements, in crafter's order."""
    return tuple(_crafter().constants.achievements)


class _InsertionOrderedSet(dict):
    """The ``add``/``remove``/iteration of a set, in insertion order (a dict's keys): what crafter's chunks hold."""

    def add(self, item) -> None:
        self[item] = None

    def remove(self, item) -> None:
        del self[item]


def _order_chunks(world) -> None:
    """Crafter's chunk sets as insertion-ordered sets, their creatures in the order the world added them."""
    place = {id(obj): k for k, obj in enumerate(world._objects) if obj}
    ordered: collections.defaultdict[object, _InsertionOrderedSet] = collections.defaultdict(_InsertionOrderedSet)
    for key, objs in world._chunks.items():
        ordered[key] = _InsertionOrderedSet((obj, None) for obj in sorted(objs, key=lambda obj: place[id(obj)]))
    world._chunks = ordered


class CrafterEnv:
    """One Crafter world behind the executor's adapter protocol."""

    frames_per_step = 1
    obs_layout: ObsLayout | None = None  # a Box of pixels
    resets_from_seed = True  # the world comes from the seed alone (reset); engine.reset_ahead may use a spare

    def __init__(self, env_id: str, kwargs: dict | None = None):
        crafter = _crafter()
        options = dict(kwargs or {})
        options.setdefault("reward", IDS[env_id])
        try:
            self.env = crafter.Env(seed=0, **options)
        except TypeError as exc:
            raise UnsupportedEnvError(f"env.kwargs for {env_id!r}: {exc} (crafter.Env's arguments)") from None
        height, width, channels = self.env.observation_space.shape
        self.obs_shape: tuple[int, ...] = (int(channels), int(height), int(width))
        self.obs_dtype = np.dtype(np.uint8)
        self.n_actions = int(self.env.action_space.n)
        self.action_spec = ActionSpec.discrete(self.n_actions)
        self.names = tuple(crafter.constants.achievements)

    def reset(self, seed: int, out: np.ndarray) -> None:
        env = self.env
        env._seed, env._episode = int(seed), 0  # the world comes from hash((seed, 1)): the seed alone
        obs = env.reset()
        _order_chunks(env._world)
        out[...] = obs.transpose(2, 0, 1)

    def step(self, action, prev: np.ndarray, out: np.ndarray) -> tuple[float, float, int, bool]:
        obs, reward, done, info = self.env.step(int(action))
        out[...] = obs.transpose(2, 0, 1)
        reward = float(reward)
        if not done:
            return reward, reward, CONTINUES, False
        return reward, reward, TERMINATED if info["discount"] == 0 else TRUNCATED, True

    def episode_stats(self) -> dict[str, float]:
        """1 for each achievement the episode unlocked, else 0 (read before the reset)."""
        unlocked = self.env._player.achievements
        return {name: float(unlocked.get(name, 0) > 0) for name in self.names}

    def get_state(self) -> Any:
        return pickle.dumps(self.env, protocol=pickle.HIGHEST_PROTOCOL)

    def set_state(self, state: Any) -> None:
        self.env = pickle.loads(state)

    def probe(self, seed: int = 0) -> None:
        out = np.zeros(self.obs_shape, self.obs_dtype)
        self.reset(seed, out)
        self.step(0, out, out.copy())
        self.episode_stats()

    def close(self) -> None:
        pass


def _make(config: EnvConfig, env_index: int) -> EnvAdapter:
    return CrafterEnv(config.id, config.kwargs)


register_env_backend(
    EnvBackend(NAME, IDS.__contains__, _make, f"'crafter', 'CrafterReward-v1' and 'CrafterNoReward-v1' ({INSTALL})")
)
