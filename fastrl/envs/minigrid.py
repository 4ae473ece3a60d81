"""MiniGrid ids (``MiniGrid-DoorKey-5x5-v0``): made with the observation fastrl learns from.

MiniGrid observes ``{"image": uint8 [7, 7, 3], "direction": Discrete(4), "mission": Text}``. The
image is not a picture: each cell of the agent's 7x7 view holds three small indices (object,
colour, state), far below the Nature CNN's 36x36, and its values are categories, not intensities.
``MiniGridObservation`` therefore

- drops ``mission``: in the MiniGrid tasks it is one fixed sentence per task ("use the key to open
  the door and then get to the goal"), so it tells the policy nothing (BabyAI's instructions vary
  per episode and need a language encoder: its ids are refused, naming why);
- gives ``image`` as a float32 Box of the same indices: a vector part of the Dict, so the row is
  ``gymnasium.spaces.flatten``'s 147 cell values plus the direction one-hot (4) and ``model = "auto"``
  is the MLP, with ``model.normalize_obs`` scaling each cell's index.

``minigrid`` is the optional extra ``fastrl-engine[minigrid]``; an id of it without the package installed is
a clear error naming the extra.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from fastrl.envs.actions import UnsupportedEnvError
from fastrl.errors import install_hint

PREFIXES = ("MiniGrid-", "BabyAI-")


def is_minigrid_id(env_id: str) -> bool:
    return env_id.startswith(PREFIXES)


class MiniGridObservation(gym.ObservationWrapper):
    """``{"image": float32 cells, "direction": Discrete(4)}``: the mission dropped (see the module's doc)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        spaces = env.observation_space.spaces
        image = spaces["image"]
        kept = {"image": gym.spaces.Box(image.low.astype(np.float32), image.high.astype(np.float32), dtype=np.float32)}
        if "direction" in spaces:
            kept["direction"] = spaces["direction"]
        self.observation_space = gym.spaces.Dict(kept)

    def observation(self, observation: dict) -> dict:
        kept = {"image": observation["image"].astype(np.float32)}
        if "direction" in observation:
            kept["direction"] = observation["direction"]
        return kept


def make_minigrid(env_id: str, **kwargs) -> gym.Env:
    """The MiniGrid env ``env_id`` behind ``MiniGridObservation``."""
    if env_id.startswith("BabyAI-"):
        raise UnsupportedEnvError(
            f"env.id = {env_id!r}: BabyAI's missions change every episode and fastrl has no "
            "language encoder for them; the MiniGrid-* tasks (one mission each) are supported"
        )
    try:
        import minigrid  # noqa: F401  (importing it registers the MiniGrid ids)
    except ImportError:
        raise UnsupportedEnvError(
            f"env.id = {env_id!r} needs the minigrid package: {install_hint('minigrid')}"
        ) from None
    if env_id not in gym.registry:
        import difflib

        close = difflib.get_close_matches(env_id, [i for i in gym.registry if is_minigrid_id(i)], n=3)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise UnsupportedEnvError(f"env.id = {env_id!r} is not a MiniGrid id{hint}")
    return MiniGridObservation(gym.make(env_id, **kwargs))
