import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from csrc_free_kernels.action_sampling import sample_from_u, sample_from_u_reference, sample_rows_kernel

pytestmark = pytest.mark.unit  # the fast tier: no engine run

SETTINGS = settings(max_examples=30, deadline=None, database=None)


def sample(logits, u):
    batch = logits.shape[0]
    return sample_from_u(logits, u, np.empty(batch, np.int64), np.empty(batch, np.float32))


def random_logits(seed, batch, n_actions, scale=5.0):
    rng = np.random.default_rng(seed)
    logits = (scale * rng.normal(size=(batch, n_actions + 1))).astype(np.float32)[:, :n_actions]
    return logits, rng.random(batch)


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 40), st.integers(1, 18))
def test_matches_reference_and_torch_log_softmax(seed, batch, n_actions):
    logits, u = random_logits(seed, batch, n_actions)
    actions, logp = sample(logits, u)
    ref_actions, ref_logp = sample_from_u_reference(logits, u)
    np.testing.assert_array_equal(actions, ref_actions)
    np.testing.assert_allclose(logp, ref_logp, rtol=1e-5, atol=1e-6)
    torch_logp = torch.log_softmax(torch.from_numpy(np.ascontiguousarray(logits)), dim=1)
    np.testing.assert_allclose(logp, torch_logp[torch.arange(batch), torch.from_numpy(actions)].numpy(),
                               rtol=1e-5, atol=1e-5)


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(2, 40), st.integers(1, 18))
def test_batch_invariance(seed, batch, n_actions):
    logits, u = random_logits(seed, batch, n_actions)
    actions, logp = sample(logits, u)
    perm = np.random.default_rng(seed).permutation(batch)
    p_actions, p_logp = sample(logits[perm], u[perm])
    np.testing.assert_array_equal(p_actions, actions[perm])
    assert p_logp.tobytes() == logp[perm].tobytes()
    for b in range(batch):
        a1, l1 = sample(logits[b:b + 1], u[b:b + 1])
        assert a1[0] == actions[b] and l1.tobytes() == logp[b:b + 1].tobytes()


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 40), st.integers(1, 18))
def test_rows_kernel_writes_what_sample_from_u_returns(seed, batch, n_actions):
    """The actor's fused write-back: scattered rows get the same bits as a plain batch, each
    sampled from its own row's u; rows outside the batch are left alone."""
    logits, _ = random_logits(seed, batch, n_actions)
    rng = np.random.default_rng(seed + 1)
    n_rows = 3 * batch
    rows = np.sort(rng.choice(n_rows, size=batch, replace=False)).astype(np.int64)
    u_col = rng.random(n_rows)
    action, logp = np.full(n_rows, -1, np.int64), np.full(n_rows, 9.0, np.float32)
    value, stamp = np.full(n_rows, 9.0, np.float32), np.full(n_rows, -1, np.int64)
    values = rng.normal(size=batch).astype(np.float32)
    sample_rows_kernel(np.ascontiguousarray(logits), values, 7, rows, u_col, action, logp, value, stamp)
    actions, logps = sample(logits, u_col[rows])
    np.testing.assert_array_equal(action[rows], actions)
    assert logp[rows].tobytes() == logps.tobytes()
    np.testing.assert_array_equal(value[rows], values)
    assert (stamp[rows] == 7).all()
    untouched = np.setdiff1d(np.arange(n_rows), rows)
    assert (action[untouched] == -1).all() and (stamp[untouched] == -1).all() and (value[untouched] == 9.0).all()


def test_frequencies_follow_softmax():
    probs = np.array([0.1, 0.0, 0.25, 0.05, 0.6])
    logits = np.log(np.where(probs > 0, probs, 1e-30)).astype(np.float32)
    n = 20000
    u = np.random.default_rng(1234).random(n)
    actions, _ = sample(np.broadcast_to(logits, (n, 5)), u)
    counts = np.bincount(actions, minlength=5)
    assert counts[1] == 0
    live = probs > 0
    chi2 = (((counts - n * probs)[live]) ** 2 / (n * probs[live])).sum()
    assert chi2 < 20.0  # 3 degrees of freedom: p < 2e-4 by chance


def test_u_near_zero_and_near_one():
    logits = np.array([[-np.inf, -1e9, 0.0, 1.0], [3.0, 0.0, 0.0, -np.inf]], np.float32)
    actions, logp = sample(logits, np.array([0.0, 1e-12]))
    assert actions.tolist() == [2, 0]
    assert np.isfinite(logp).all()
    # u at or beyond the rounded total is clamped to the last index
    actions, _ = sample(np.zeros((1, 3), np.float32), np.array([1.0]))
    assert actions.tolist() == [2]
