"""Recall: an env whose reward needs an observation seen several steps earlier (the memory test).

The first observation shows a cue, one of two (one-hot in its first two elements); then come
``delay`` blank observations; then a query (third element 1). The action taken at the query is
rewarded +1 if it names the cue and -1 if not, and the episode terminates; actions before the
query earn 0. A feed-forward policy sees the same query whatever the cue, so its best expected
return is 0; a recurrent one can remember the cue and return +1. Env id ``tests.helpers.memory_env:recall``.
"""
import gymnasium as gym
import numpy as np

BLANK = np.zeros(3, np.float32)
QUERY = np.array([0.0, 0.0, 1.0], np.float32)


class RecallEnv(gym.Env):
    def __init__(self, delay: int = 3):
        self.observation_space = gym.spaces.Box(0.0, 1.0, (3,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.delay = delay
        self.t = 0
        self.cue = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.cue = int(self.np_random.integers(2))
        obs = BLANK.copy()
        obs[self.cue] = 1.0
        return obs, {}

    def step(self, action):
        self.t += 1
        if self.t <= self.delay:
            return (QUERY if self.t == self.delay else BLANK).copy(), 0.0, False, False, {}
        return BLANK.copy(), 1.0 if int(action) == self.cue else -1.0, True, False, {}


def recall(delay: int = 3) -> RecallEnv:
    return RecallEnv(delay)
