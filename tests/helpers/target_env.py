"""A 1-D target-reaching env whose optimum is known: the "learns" test of continuous actions.

Each step shows a target g uniform in [-1, 1]; the action a (Box [-2, 2]) is where the agent
reaches, rewarded -(a - g)^2. An episode is ``steps`` targets, then it terminates. The optimal
policy (a = g) returns exactly 0; the initial policy (mean ~0, std 1) about -(1 + 1/3) per step.
Env id ``tests.helpers.target_env:make``.
"""
import gymnasium as gym
import numpy as np


class TargetEnv(gym.Env):
    def __init__(self, steps: int = 4):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.action_space = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
        self.steps = steps
        self.t = 0
        self.target = np.zeros(1, np.float32)

    def _new_target(self) -> np.ndarray:
        self.target = self.np_random.uniform(-1.0, 1.0, (1,)).astype(np.float32)
        return self.target.copy()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._new_target(), {}

    def step(self, action):
        reward = -float((np.asarray(action, np.float32)[0] - self.target[0]) ** 2)
        self.t += 1
        return self._new_target(), reward, self.t >= self.steps, False, {}


def make(steps: int = 4) -> TargetEnv:
    return TargetEnv(steps)


class MultiTargetEnv(gym.Env):
    """MultiDiscrete([3, 4]): show two targets (as fractions), reward 1 per dimension whose action hits its target."""

    def __init__(self, steps: int = 4):
        self.nvec = np.array([3, 4])
        self.observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.MultiDiscrete(self.nvec)
        self.steps, self.t = steps, 0
        self.target = np.zeros(2, np.int64)

    def _obs(self) -> np.ndarray:
        self.target = self.np_random.integers(self.nvec)
        return (self.target / self.nvec).astype(np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        assert self.action_space.contains(np.asarray(action)), action
        reward = float((np.asarray(action) == self.target).sum())
        self.t += 1
        return self._obs(), reward, self.t >= self.steps, False, {}


def make_multi(steps: int = 4) -> MultiTargetEnv:
    return MultiTargetEnv(steps)
