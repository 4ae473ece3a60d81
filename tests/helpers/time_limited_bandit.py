"""The masked contextual bandit (``tests.helpers.masked_env:bandit``) whose episodes never end but are cut by a time
limit: env id ``tests.helpers.time_limited_bandit:bandit``.

The rows are the bandit's (the observation names the rewarded action, the mask allows it and one other, 1 for the
rewarded action), but gymnasium's ``TimeLimit`` truncates each episode after ``length`` steps, so a learner
bootstraps from the final observation's value and the values sit near r / (1 − γ): 100 for the best policy at
γ = 0.99, 50 for a uniform choice within the mask, against the ≤ 20 of the terminating bandit. The score is still
the episode's return: 20 for the best policy, 10 for a uniform one within the mask (4 without it). IMPALA's
value-scale test (tests/test_impala_popart.py)."""

import gymnasium as gym

from tests.helpers.masked_env import MaskedBandit

NEVER = 1 << 62  # the bandit's own end, never reached: the time limit cuts every episode


def bandit(n: int = 5, length: int = 20, masked: bool = True) -> gym.Env:
    return gym.wrappers.TimeLimit(MaskedBandit(n, NEVER, masked), max_episode_steps=length)
