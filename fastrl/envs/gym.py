"""Any gymnasium env behind the executor's adapter protocol (see base.py)."""
from __future__ import annotations

import gymnasium as gym
import numpy as np


class UnsupportedEnvError(ValueError):
    pass


def check_spaces(env_id: str, env: gym.Env) -> tuple[tuple[int, ...], np.dtype, int]:
    """-> (obs_shape, obs_dtype, n_actions) or a clear error for spaces fastrl cannot learn on."""
    obs_space, act_space = env.observation_space, env.action_space
    if not isinstance(act_space, gym.spaces.Discrete):
        raise UnsupportedEnvError(
            f"env {env_id!r}: action space {act_space} is not supported; fastrl policies need a Discrete action space"
        )
    if not isinstance(obs_space, gym.spaces.Box):
        raise UnsupportedEnvError(
            f"env {env_id!r}: observation space {obs_space} is not supported; use a Box observation space "
            "(wrap Discrete/Dict observations, e.g. with gymnasium.wrappers.FlattenObservation)"
        )
    dtype = np.dtype(obs_space.dtype)
    if dtype not in (np.dtype(np.uint8), np.dtype(np.float32), np.dtype(np.float64)):
        raise UnsupportedEnvError(f"env {env_id!r}: observation dtype {dtype} is not supported (uint8, float32)")
    if dtype == np.float64:
        dtype = np.dtype(np.float32)  # stored and learned in float32
    return tuple(obs_space.shape), dtype, int(act_space.n)


class GymEnv:
    frames_per_step = 1

    def __init__(self, env_id: str, env: gym.Env):
        self.env_id = env_id
        self.env = env
        self.obs_shape, self.obs_dtype, self.n_actions = check_spaces(env_id, env)

    def _write(self, obs, out: np.ndarray) -> None:
        obs = np.asarray(obs)
        if obs.shape != out.shape:
            raise ValueError(
                f"env {self.env_id!r} returned an observation of shape {obs.shape}; its space declares {out.shape}"
            )
        out[...] = obs

    def reset(self, seed: int, out: np.ndarray) -> None:
        obs, _ = self.env.reset(seed=seed)
        self._write(obs, out)

    def step(self, action: int, prev: np.ndarray, out: np.ndarray) -> tuple[float, float, bool, bool]:
        obs, reward, terminated, truncated, _ = self.env.step(action)
        self._write(obs, out)
        reward = float(reward)
        over = bool(terminated or truncated)
        return reward, reward, over, over

    def close(self) -> None:
        self.env.close()
