"""DelayEnv: a trivial env whose every step takes a Gamma-distributed time (HTS-RL, Claim 1).

The step time X ~ Gamma(shape k, rate λ): mean k/λ, variance k/λ². Its RNG is seeded by
``reset(seed=...)``, so delays are reproducible. The reward is 1 when the action matches a
fixed target derived from the observation, so there is something to learn.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np


class DelayEnv(gym.Env):
    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, mean_s: float = 0.002, variance_s2: float = 0.0, episode_steps: int = 100, n_actions: int = 2):
        if mean_s < 0 or variance_s2 < 0:
            raise ValueError("DelayEnv: mean_s and variance_s2 must be >= 0")
        self.mean_s, self.variance_s2 = float(mean_s), float(variance_s2)
        self.episode_steps = int(episode_steps)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (4,), np.float32)
        self.action_space = gym.spaces.Discrete(n_actions)
        self._rng = np.random.default_rng()
        self._t = 0
        self._obs = np.zeros(4, np.float32)

    def _delay(self) -> float:
        if self.mean_s == 0:
            return 0.0
        if self.variance_s2 == 0:
            return self.mean_s
        shape = self.mean_s**2 / self.variance_s2  # k = mean^2 / var, scale = var / mean
        return float(self._rng.gamma(shape, self.variance_s2 / self.mean_s))

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._t = 0
        self._obs = self._rng.random(4).astype(np.float32)
        return self._obs.copy(), {}

    def step(self, action):
        delay = self._delay()
        if delay > 0:
            time.sleep(delay)
        target = int(self._obs[0] * self.action_space.n) % self.action_space.n
        reward = 1.0 if int(action) == target else 0.0
        self._t += 1
        self._obs = self._rng.random(4).astype(np.float32)
        return self._obs.copy(), reward, False, self._t >= self.episode_steps, {}
