import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from csrc_free_kernels.gae import gae, gae_reference
from csrc_free_kernels.returns import nstep_returns

pytestmark = pytest.mark.unit  # the fast tier: no engine run

SETTINGS = settings(max_examples=30, deadline=None, database=None)


def random_batch(seed, n_envs, horizon):
    """rewards/dones as [:, :T] views of [N, T+1] arrays, values [N, T+1]."""
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(n_envs, horizon + 1)).astype(np.float32)[:, :horizon]
    dones = (rng.random((n_envs, horizon + 1)) < 0.2).astype(np.uint8)[:, :horizon]
    values = rng.normal(size=(n_envs, horizon + 1)).astype(np.float32)
    return rewards, dones, values


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(1, 12),
       st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_matches_reference(seed, n_envs, horizon, gamma, lam):
    rewards, dones, values = random_batch(seed, n_envs, horizon)
    got = gae(rewards, dones, values, gamma, lam)
    want = gae_reference(rewards, dones, values, gamma, lam)
    assert got.dtype == np.float32 and got.shape == (n_envs, horizon)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(1, 12), st.floats(0.0, 1.0))
def test_lambda_one_is_nstep_return_minus_value(seed, n_envs, horizon, gamma):
    rewards, dones, values = random_batch(seed, n_envs, horizon)
    got = gae(rewards, dones, values, gamma, 1.0)
    want = nstep_returns(rewards, dones, values[:, horizon], gamma) - values[:, :horizon]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_out_view():
    rewards, dones, values = random_batch(3, 3, 5)
    buf = np.zeros((3, 6), np.float32)
    gae(rewards, dones, values, 0.99, 0.95, out=buf[:, :5])
    np.testing.assert_allclose(buf[:, :5], gae_reference(rewards, dones, values, 0.99, 0.95), rtol=1e-5, atol=1e-6)
