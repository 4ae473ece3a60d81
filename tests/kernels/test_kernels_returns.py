import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from csrc_free_kernels.returns import nstep_returns, nstep_returns_reference

pytestmark = pytest.mark.unit  # the fast tier: no engine run

SETTINGS = settings(max_examples=30, deadline=None, database=None)


def random_batch(seed, n_envs, horizon):
    """Inputs as strided views: rewards/dones are [:, :T] slices of [N, T+1] arrays."""
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(n_envs, horizon + 1)).astype(np.float32)[:, :horizon]
    dones = (rng.random((n_envs, horizon + 1)) < 0.2).astype(np.uint8)[:, :horizon]
    bootstrap = rng.normal(size=(2, n_envs)).astype(np.float32)[0]
    return rewards, dones, bootstrap


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(1, 12), st.floats(0.0, 1.0))
def test_matches_reference(seed, n_envs, horizon, gamma):
    rewards, dones, bootstrap = random_batch(seed, n_envs, horizon)
    assert n_envs == 1 or not rewards.flags.c_contiguous  # really a strided view
    got = nstep_returns(rewards, dones, bootstrap, gamma)
    want = nstep_returns_reference(rewards, dones, bootstrap, gamma)
    assert got.dtype == np.float32 and got.shape == (n_envs, horizon)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_hand_example():
    rewards = np.array([[1.0, 2.0, 3.0]], np.float32)
    dones = np.array([[0, 1, 0]], np.uint8)
    got = nstep_returns(rewards, dones, np.array([10.0], np.float32), 0.5)
    np.testing.assert_allclose(got, [[1.0 + 0.5 * 2.0, 2.0, 3.0 + 0.5 * 10.0]])


def test_out_in_place_and_transposed_views():
    rewards, dones, bootstrap = random_batch(1, 4, 9)
    want = nstep_returns_reference(rewards, dones, bootstrap, 0.9)
    # inputs with arbitrary strides (time-major storage seen env-major)
    got_t = nstep_returns(np.ascontiguousarray(rewards.T).T, np.ascontiguousarray(dones.T).T, bootstrap, 0.9)
    np.testing.assert_allclose(got_t, want, rtol=1e-5, atol=1e-6)
    # out= a view of a bigger buffer; only that view is written
    buf = np.full((4, 10), -7.0, np.float32)
    result = nstep_returns(rewards, dones, bootstrap, 0.9, out=buf[:, 1:])
    assert result.base is buf
    np.testing.assert_allclose(buf[:, 1:], want, rtol=1e-5, atol=1e-6)
    assert (buf[:, 0] == -7.0).all()
    # out may alias rewards
    r = rewards.copy()
    nstep_returns(r, dones, bootstrap, 0.9, out=r)
    np.testing.assert_allclose(r, want, rtol=1e-5, atol=1e-6)
