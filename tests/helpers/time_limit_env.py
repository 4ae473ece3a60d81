"""A tiny env cut by a time limit, for the time-limit tests: env id "tests.helpers.time_limit_env:make".

Every step pays ``reward`` whatever the action; the episode never terminates on its own (unless
``terminate_at``), gymnasium's ``TimeLimit`` truncates it after ``limit`` steps. The observation
is the step count within the episode (``observe="time"``) or a constant 1 (``"constant"``: one
state, whose value with discount γ is reward / (1 − γ) when time limits are bootstrapped).
"""
import gymnasium as gym
import numpy as np


class Steps(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, reward: float = 1.0, observe: str = "time", terminate_at: int = 0):
        self.observation_space = gym.spaces.Box(0.0, 1e6, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.reward, self.observe, self.terminate_at = float(reward), observe, int(terminate_at)
        self.t = 0

    def _obs(self) -> np.ndarray:
        return np.array([self.t if self.observe == "time" else 1.0], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), self.reward, self.t == self.terminate_at, False, {}


def make(limit: int = 20, **kwargs) -> gym.Env:
    return gym.wrappers.TimeLimit(Steps(**kwargs), max_episode_steps=limit)
