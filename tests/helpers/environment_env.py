"""CartPole whose every reward is read from an environment variable when the env is made: what a worker
sees of the main process's environment (tests/process/test_spawn.py)."""
import os

import gymnasium as gym

VARIABLE = "FASTRL_TEST_REWARD"


class RewardFromEnvironment(gym.Wrapper):
    def __init__(self):
        super().__init__(gym.make("CartPole-v1"))
        self.reward = float(os.environ.get(VARIABLE, "1"))

    def step(self, action):
        obs, _, terminated, truncated, info = self.env.step(action)
        return obs, self.reward, terminated, truncated, info


def cartpole() -> gym.Env:
    return RewardFromEnvironment()
