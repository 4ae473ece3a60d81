"""CartPole with faults on purpose, for the fault tests: env ids "tests.helpers.faulty_envs:<factory>".

``cartpole(fault=..., at=k)`` misbehaves at the k-th step of each env instance (counted from
its creation, so the start-up probe in the main process, one step, never reaches it).
"""
import os
import re
import signal
import threading
import time

import gymnasium as gym
import numpy as np


class FaultyCartPole(gym.Wrapper):
    def __init__(
        self, fault: str = "none", at: int = 1_000_000, every: int = 0, step_s: float = 0.0, first_reset_s: float = 0.0
    ):
        super().__init__(gym.make("CartPole-v1"))
        self.fault, self.at, self.every, self.step_s = fault, at, every, step_s
        self.first_reset_s = first_reset_s  # a slow env's first reset (Crafter builds its world)
        self.steps = 0
        self.resets = 0

    def _due(self) -> bool:
        return self.steps == self.at or bool(self.every and self.steps % self.every == 0)

    def reset(self, **kwargs):
        self.resets += 1
        if self.resets == 1 and self.first_reset_s:
            time.sleep(self.first_reset_s)
        if self.fault == "raise_in_reset" and self.resets == self.at:
            raise RuntimeError(f"reset {self.resets} failed on purpose")
        return self.env.reset(**kwargs)

    def step(self, action):
        self.steps += 1
        if self.step_s:
            time.sleep(self.step_s)
        obs, reward, terminated, truncated, info = self.env.step(action)
        if not self._due():
            return obs, reward, terminated, truncated, info
        if self.fault == "raise":
            raise RuntimeError(f"step {self.steps} failed on purpose")
        if self.fault == "hang":
            time.sleep(3600)
        if self.fault == "sigkill":  # what the OOM killer does to a process of a cgroup at its memory limit
            os.kill(os.getpid(), signal.SIGKILL)
        if self.fault == "spin_in_c":  # C code holding the GIL: no Python signal handler runs until it returns
            re.match(r"(a+)+$", "a" * 64 + "b")  # catastrophic backtracking: 2^64 steps
        if self.fault == "nan_obs":
            obs = obs.copy()
            obs[2] = np.nan
        if self.fault == "wrong_shape":
            obs = np.zeros(5, np.float32)
        if self.fault == "reward_shape":
            reward = np.ones(2)
        if self.fault == "inf_reward":
            reward = float("inf")
        if self.fault == "huge_reward":  # finite, but the value loss overflows: a non-finite loss
            reward = 1e30
        return obs, reward, terminated, truncated, info


def cartpole(**kwargs) -> gym.Env:
    return FaultyCartPole(**kwargs)


class Unpicklable(gym.Wrapper):
    """A CartPole holding a lock, like an env holding a simulator handle: its state cannot be saved."""

    def __init__(self):
        super().__init__(gym.make("CartPole-v1"))
        self.lock = threading.Lock()


def unpicklable() -> gym.Env:
    return Unpicklable()


def wrong_shape_at_start() -> gym.Env:
    return FaultyCartPole(fault="wrong_shape", at=1)


def not_an_env():
    return object()


gym.register("FaultyCartPole-v0", entry_point="tests.helpers.faulty_envs:FaultyCartPole")


def cartpole_failing_its_first_reset(env_index: int, fail_env: int = 1) -> gym.Env:
    """Global env ``fail_env`` raises in its first reset, which its executor makes as it starts; the start-up
    probe in the main process (env 0) resets plainly."""
    return FaultyCartPole("raise_in_reset" if env_index == fail_env else "none", at=1)


def cartpole_failing_in_first_attempt(env_index: int, fail_env: int = 4, at: int = 300) -> gym.Env:
    """Global env ``fail_env`` raises at its step ``at``, in torchrun's first attempt only (its restart count
    is 0): the ``torchrun --max-restarts`` test. Every other env, and every env of a restart, is plain."""
    first_attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"
    return FaultyCartPole("raise" if first_attempt and env_index == fail_env else "none", at=at)


class WideInts(gym.Env):
    """Declares uint8 observations, and at step ``at`` returns an int64 one that uint8 cannot hold (a counter)."""

    observation_space = gym.spaces.Box(0, 255, (3,), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, at: int = 3):
        self.at, self.t = at, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.array([0, 1, 2], np.int64), {}

    def step(self, action):
        self.t += 1
        value = 300 if self.t == self.at else 7
        return np.array([1, value, 2], np.int64), 0.0, False, False, {}


def wide_ints(at: int = 3) -> gym.Env:
    return WideInts(at)


def text_observations() -> gym.Env:
    """An observation space fastrl cannot take (Text): a bad-input error naming it, before anything starts."""
    env = gym.make("CartPole-v1")
    env.observation_space = gym.spaces.Text(8)
    return env


def tuple_actions() -> gym.Env:
    """An action space fastrl cannot take (a Tuple): a bad-input error naming it, before anything starts."""
    env = gym.make("CartPole-v1")
    env.action_space = gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Discrete(2)))
    return env
