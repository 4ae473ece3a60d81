"""algo.normalize_rewards: the kernel against its numpy reference and gymnasium's wrapper, determinism
across process layouts, exact resume with the statistics, a MuJoCo smoke run, and bad values."""
import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import fastrl
from csrc_free_kernels.reward_scaling import (discounted_returns, new_stats, normalize_rewards,
                                              normalize_rewards_reference, scale_rewards, step_moments)
from fastrl.checkpoint import load_checkpoint
from fastrl.config import ConfigError, load_config
from tests.conftest import cartpole

SETTINGS = settings(max_examples=30, deadline=None, database=None)


def _batch(seed, rows, horizon, done_rate=0.1):
    """rewards/dones as [:, :T] views of [N, T+1] arrays (how the learner reads a storage); both kinds of end."""
    rng = np.random.default_rng(seed)
    rewards = (rng.normal(size=(rows, horizon + 1)) * rng.uniform(0.1, 50)).astype(np.float32)[:, :horizon]
    dones = np.where(rng.random((rows, horizon + 1)) < done_rate, rng.integers(1, 3, (rows, horizon + 1)), 0)
    return rewards, dones.astype(np.uint8)[:, :horizon]


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(1, 12), st.floats(0.0, 1.0),
       st.sampled_from([10.0, 0.5]))
def test_kernel_matches_the_reference_over_successive_rollouts(seed, rows, horizon, gamma, clip):
    got_carry, got_stats = np.zeros(rows), new_stats()
    want_carry, want_stats = np.zeros(rows), new_stats()
    for rollout in range(3):  # carry and statistics go on from one rollout to the next
        rewards, dones = _batch(seed + rollout, rows, horizon)
        got = normalize_rewards(rewards, dones, got_carry, got_stats, gamma, clip)
        want = normalize_rewards_reference(rewards, dones, want_carry, want_stats, gamma, clip)
        assert got.dtype == np.float32 and got.shape == (rows, horizon)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(got_carry, want_carry, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got_stats, want_stats, rtol=1e-10)
        assert np.abs(got).max() <= clip


def test_the_accumulator_restarts_after_any_end_and_rows_of_one_env_chain():
    rewards = np.array([[1, 2, 4, 8]], np.float32)
    dones = np.array([[0, 2, 0, 1]], np.uint8)  # truncated after step 1, terminated after step 3
    carry = np.array([10.0])
    np.testing.assert_allclose(discounted_returns(rewards, dones, carry, 0.5), [[6, 5, 4, 10]])
    assert carry.tolist() == [0.0]
    # two consecutive slots of env 1 in one batch (async): the second goes on from the first
    carry = np.zeros(2)
    twice = discounted_returns(np.ones((2, 2), np.float32), np.zeros((2, 2), np.uint8), carry, 0.5, env_ids=[1, 1])
    np.testing.assert_allclose(twice, [[1, 1.5], [1.75, 1.875]])
    assert carry.tolist() == [0.0, 1.875]
    with pytest.raises(ValueError, match="env_ids"):
        discounted_returns(rewards, dones, np.zeros(1), 0.5, env_ids=[3])


def test_two_halves_merged_by_moments_equal_the_whole():
    """What cohort.moments does across ranks: each half's per-step moments merged equal the whole batch's."""
    rewards, dones = _batch(7, 8, 16)
    whole_stats, halves_stats = new_stats(), new_stats()
    whole = normalize_rewards(rewards, dones, np.zeros(8), whole_stats, 0.99, 10.0)
    returns = discounted_returns(rewards, dones, np.zeros(8), 0.99)
    (m1, v1), (m2, v2) = step_moments(returns[:4]), step_moments(returns[4:])
    delta = m2 - m1
    mean, var = m1 + delta / 2, (v1 + v2) / 2 + delta**2 / 4
    halves = np.concatenate([scale_rewards(rewards[:4], 8, mean, var, halves_stats.copy(), 10.0),
                             scale_rewards(rewards[4:], 8, mean, var, halves_stats, 10.0)])
    np.testing.assert_allclose(halves, whole, rtol=1e-6)
    np.testing.assert_allclose(halves_stats, whole_stats, rtol=1e-12)


def test_without_episode_ends_it_is_gymnasiums_normalize_reward():
    """One env, no ends: the variants agree, so this is what CleanRL trains on."""
    rewards = np.random.default_rng(0).normal(3.0, 2.0, 300).astype(np.float32)

    class Rewards(gym.Env):
        observation_space = gym.spaces.Box(-1, 1, (1,))
        action_space = gym.spaces.Discrete(1)

        def reset(self, *, seed=None, options=None):
            self.t = 0
            return np.zeros(1, np.float32), {}

        def step(self, action):
            self.t += 1
            return np.zeros(1, np.float32), float(rewards[self.t - 1]), False, False, {}

    wrapped = gym.wrappers.NormalizeReward(Rewards(), gamma=0.99)
    wrapped.reset(seed=0)
    want = [wrapped.step(0)[1] for _ in range(300)]
    got = normalize_rewards(rewards[None], np.zeros((1, 300), np.uint8), np.zeros(1), new_stats(), 0.99, np.inf)
    np.testing.assert_allclose(got[0], want, rtol=1e-6)
