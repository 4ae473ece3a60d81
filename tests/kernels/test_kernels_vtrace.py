import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from csrc_free_kernels.gae import gae
from csrc_free_kernels.returns import nstep_returns
from csrc_free_kernels.vtrace import vtrace, vtrace_reference
from fastrl.algos.vtrace_torch import vtrace_torch

pytestmark = pytest.mark.unit  # the fast tier: no engine run

SETTINGS = settings(max_examples=30, deadline=None, database=None)
CLIPS = st.sampled_from([0.5, 1.0, 2.0, math.inf])


def random_batch(seed, n_envs, horizon):
    """[N, T] inputs as [:, :T] views of [N, T+1] arrays; values [N, T+1]."""
    rng = np.random.default_rng(seed)

    def view(x):
        return x[:, :horizon]

    behaviour = view(rng.normal(-1.0, 0.5, (n_envs, horizon + 1)).astype(np.float32))
    target = view(rng.normal(-1.0, 0.5, (n_envs, horizon + 1)).astype(np.float32))
    rewards = view(rng.normal(size=(n_envs, horizon + 1)).astype(np.float32))
    dones = view((rng.random((n_envs, horizon + 1)) < 0.2).astype(np.uint8))
    values = rng.normal(size=(n_envs, horizon + 1)).astype(np.float32)
    return behaviour, target, rewards, dones, values


def close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(1, 12),
       st.floats(0.0, 1.0), CLIPS, CLIPS, st.floats(0.0, 1.0))
def test_numba_torch_numpy_agree(seed, n_envs, horizon, gamma, rho_bar, c_bar, lam):
    args = random_batch(seed, n_envs, horizon)
    vs, pg = vtrace(*args, gamma, rho_bar, c_bar, lam)
    vs_ref, pg_ref = vtrace_reference(*args, gamma, rho_bar, c_bar, lam)
    vs_t, pg_t = vtrace_torch(*(torch.from_numpy(a) for a in args), gamma, rho_bar, c_bar, lam)
    assert vs.dtype == pg.dtype == np.float32 and vs.shape == pg.shape == (n_envs, horizon)
    assert vs_t.dtype == pg_t.dtype == torch.float32 and not vs_t.requires_grad
    close(vs, vs_ref)
    close(pg, pg_ref)
    close(vs_t.numpy(), vs_ref)
    close(pg_t.numpy(), pg_ref)


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(1, 12), st.floats(0.0, 1.0))
def test_on_policy_unclipped_is_nstep_return(seed, n_envs, horizon, gamma):
    _, target, rewards, dones, values = random_batch(seed, n_envs, horizon)
    returns = nstep_returns(rewards, dones, values[:, horizon], gamma)
    for vs, pg in (vtrace(target, target, rewards, dones, values, gamma, math.inf, math.inf, 1.0),
                   vtrace_reference(target, target, rewards, dones, values, gamma, math.inf, math.inf, 1.0)):
        close(vs, returns)
        close(pg, returns - values[:, :horizon])


def test_torch_no_grad_through_inputs():
    args = [torch.from_numpy(np.ascontiguousarray(a)) for a in random_batch(0, 2, 4)]
    for i in (1, 4):
        args[i] = args[i].clone().requires_grad_(True)
    vs, pg = vtrace_torch(*args, 0.99, 1.0, 1.0)
    assert not vs.requires_grad and not pg.requires_grad

@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(1, 12), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_on_policy_unclipped_with_lambda_is_the_lambda_return(seed, n_envs, horizon, gamma, lam):
    """On-policy, rho_bar = c_bar = inf: v_s - V(x_s) is GAE(lambda), so v_s is the lambda-return."""
    _, target, rewards, dones, values = random_batch(seed, n_envs, horizon)
    advantages = gae(rewards, dones, values, gamma, lam)
    for vs, _ in (vtrace(target, target, rewards, dones, values, gamma, math.inf, math.inf, lam),
                  vtrace_reference(target, target, rewards, dones, values, gamma, math.inf, math.inf, lam)):
        close(vs, advantages + values[:, :horizon])
