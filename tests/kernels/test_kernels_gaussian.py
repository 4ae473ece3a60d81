"""Sampling MultiDiscrete and Box actions from the executor's uniforms: the numba kernels against
their references, row by row and batch-invariant, and the torch distributions the losses use."""
import math
from statistics import NormalDist

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from csrc_free_kernels.action_sampling import (
    U_EPS,
    ndtri,
    sample_gaussian,
    sample_gaussian_reference,
    sample_gaussian_rows_kernel,
    sample_multi,
    sample_multi_reference,
    sample_multi_rows_kernel,
)
from fastrl.envs.actions import ActionSpec
from fastrl.models.distributions import distribution_for

pytestmark = pytest.mark.unit  # the fast tier: no engine run

SETTINGS = settings(max_examples=25, deadline=None, database=None)


def gaussian_head(seed, batch, dims):
    rng = np.random.default_rng(seed)
    head = np.concatenate([rng.normal(0, 2, (batch, dims)), rng.normal(-0.5, 1, (batch, dims))], axis=1)
    return head.astype(np.float32), rng.random((batch, dims))


def gaussian(head, u):
    batch, dims = u.shape
    return sample_gaussian(head, u, np.empty((batch, dims), np.float32), np.empty(batch, np.float32))


def test_ndtri_is_pythons_inverse_normal_cdf_bit_for_bit():
    rng = np.random.default_rng(0)
    ps = np.concatenate([rng.random(20_000), 10.0 ** -rng.uniform(1, 15, 2000), [U_EPS, 0.5, 1 - U_EPS, 0.075, 0.925]])
    reference = NormalDist()
    for p in ps:
        assert ndtri(p) == reference.inv_cdf(p), p


def test_the_ends_of_u_are_guarded():
    """numpy's uniforms are in [0, 1): u = 0 gives a finite action (z = ndtri(2^-53) ~ -8.2), not -inf."""
    head = np.zeros((2, 2), np.float32)
    actions, logp = gaussian(head, np.array([[0.0], [np.nextafter(1.0, 0.0)]]))
    assert np.isfinite(actions).all() and np.isfinite(logp).all()
    assert -8.3 < actions[0, 0] < -8.0 and 8.0 < actions[1, 0] < 8.3


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 30), st.integers(1, 6))
def test_gaussian_matches_reference_and_torch(seed, batch, dims):
    head, u = gaussian_head(seed, batch, dims)
    actions, logp = gaussian(head, u)
    ref_actions, ref_logp = sample_gaussian_reference(head, u)
    np.testing.assert_array_equal(actions, ref_actions)
    np.testing.assert_allclose(logp, ref_logp, rtol=1e-6, atol=1e-5)
    mean, std = torch.from_numpy(head[:, :dims]).double(), torch.from_numpy(head[:, dims:]).double().exp()
    torch_logp = torch.distributions.Normal(mean, std).log_prob(torch.from_numpy(actions).double()).sum(-1)
    np.testing.assert_allclose(logp, torch_logp.numpy(), rtol=1e-5, atol=1e-4)


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(2, 30), st.integers(1, 5))
def test_gaussian_rows_are_batch_invariant_and_written_where_asked(seed, batch, dims):
    head, _ = gaussian_head(seed, batch, dims)
    rng = np.random.default_rng(seed + 1)
    n_rows = 3 * batch
    rows = np.sort(rng.choice(n_rows, size=batch, replace=False)).astype(np.int64)
    u = rng.random((n_rows, dims))
    action, logp = np.full((n_rows, dims), 9.0, np.float32), np.full(n_rows, 9.0, np.float32)
    value, stamp = np.zeros(n_rows, np.float32), np.full(n_rows, -1, np.int64)
    sample_gaussian_rows_kernel(head, np.ones(batch, np.float32), 5, rows, u, action, logp, value, stamp)
    for b, row in enumerate(rows):  # each row alone gives the same bits
        one_action, one_logp = gaussian(head[b:b + 1], u[row:row + 1])
        assert one_action.tobytes() == action[row].tobytes() and one_logp.tobytes() == logp[row:row + 1].tobytes()
    untouched = np.setdiff1d(np.arange(n_rows), rows)
    assert (action[untouched] == 9.0).all() and (stamp[untouched] == -1).all() and (stamp[rows] == 5).all()


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 30), st.lists(st.integers(1, 6), min_size=1, max_size=4))
def test_multi_discrete_matches_reference_and_rows_kernel(seed, batch, nvec):
    rng = np.random.default_rng(seed)
    logits = (3 * rng.normal(size=(batch, sum(nvec)))).astype(np.float32)
    u = rng.random((batch, len(nvec)))
    actions, logp = sample_multi(logits, nvec, u, np.empty((batch, len(nvec)), np.int64), np.empty(batch, np.float32))
    ref_actions, ref_logp = sample_multi_reference(logits, nvec, u)
    np.testing.assert_array_equal(actions, ref_actions)
    np.testing.assert_allclose(logp, ref_logp, rtol=1e-5, atol=1e-5)
    action, logp_col = np.zeros((batch, len(nvec)), np.int64), np.zeros(batch, np.float32)
    sample_multi_rows_kernel(logits, np.asarray(nvec, np.int64), np.zeros(batch, np.float32), 1,
                             np.arange(batch, dtype=np.int64), u, action, logp_col, np.zeros(batch, np.float32),
                             np.zeros(batch, np.int64))
    np.testing.assert_array_equal(action, actions)
    assert logp_col.tobytes() == logp.tobytes()


def test_torch_distributions_score_what_the_kernels_sampled():
    """The losses' log-probs of the stored actions are the actor's (float32 rounding apart), and the
    entropies are the closed forms."""
    rng = np.random.default_rng(3)
    box = distribution_for(ActionSpec("box", low=(-1.0,) * 3, high=(1.0,) * 3, shape=(3,)))
    head, u = gaussian_head(3, 64, 3)
    actions, logp = box.sample(head, u)
    torch_logp, entropy = box.log_prob_entropy(torch.from_numpy(head), torch.from_numpy(actions))
    np.testing.assert_allclose(torch_logp.numpy(), logp, rtol=1e-5, atol=1e-4)
    std = torch.from_numpy(head[:, 3:]).exp()
    expected = torch.distributions.Normal(torch.from_numpy(head[:, :3]), std).entropy().sum(-1)
    np.testing.assert_allclose(entropy.numpy(), expected.numpy(), rtol=1e-6)
    assert torch.equal(box.greedy(torch.from_numpy(head)), torch.from_numpy(head[:, :3]))

    multi = distribution_for(ActionSpec("multi_discrete", nvec=(3, 2)))
    logits = rng.normal(size=(64, 5)).astype(np.float32)
    actions, logp = multi.sample(logits, rng.random((64, 2)))
    torch_logp, entropy = multi.log_prob_entropy(torch.from_numpy(logits), torch.from_numpy(actions))
    np.testing.assert_allclose(torch_logp.numpy(), logp, rtol=1e-5, atol=1e-5)
    parts = [torch.distributions.Categorical(logits=torch.from_numpy(logits[:, a:b])) for a, b in ((0, 3), (3, 5))]
    np.testing.assert_allclose(entropy.numpy(), sum(p.entropy() for p in parts).numpy(), rtol=1e-5)


def test_gaussian_samples_have_the_heads_mean_and_std():
    head = np.tile(np.array([[1.5, math.log(0.3)]], np.float32), (200_000, 1))
    actions, _ = gaussian(head, np.random.default_rng(0).random((200_000, 1)))
    assert abs(actions.mean() - 1.5) < 0.005 and abs(actions.std() - 0.3) < 0.005
