"""Time limits in every return kernel: a TRUNCATED step bootstraps from V(final observation), a
TERMINATED one does not, and neither carries the trace across the reset (Pardo et al. 2018).

Four hand-computed rows, gamma = 0.5, rewards 1 2 3 4, values V_0..V_3 = 1 2 3 4, V_4 = 10
(the rollout's bootstrap): a truncation in the middle, one at the last step, a termination
then a truncation, and a truncation then a termination.
"""
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from csrc_free_kernels.gae import gae, gae_reference
from csrc_free_kernels.returns import nstep_returns, nstep_returns_reference
from csrc_free_kernels.step_end import TERMINATED as END
from csrc_free_kernels.step_end import TRUNCATED as CUT
from csrc_free_kernels.vtrace import vtrace, vtrace_reference
from fastrl.algos.vtrace_torch import vtrace_torch

pytestmark = pytest.mark.unit  # the fast tier: no engine run

SETTINGS = settings(max_examples=30, deadline=None, database=None)
GAMMA = 0.5
REWARDS = np.tile(np.array([1, 2, 3, 4], np.float32), (4, 1))
VALUES = np.tile(np.array([1, 2, 3, 4, 10], np.float32), (4, 1))
DONES = np.array([[0, CUT, 0, 0], [0, 0, 0, CUT], [0, END, CUT, 0], [0, CUT, END, 0]], np.uint8)
NAN = math.nan  # final values where no truncation is: never read
FINAL = np.array([[NAN, 5, NAN, NAN], [NAN, NAN, NAN, 6], [NAN, NAN, 8, NAN], [NAN, 8, NAN, NAN]], np.float32)

# R_t by hand: a truncated step is r + gamma * final, a terminated one r, the last one r + gamma * 10
RETURNS = [[1 + .5 * (2 + .5 * 5), 2 + .5 * 5, 3 + .5 * (4 + .5 * 10), 4 + .5 * 10],
           [1 + .5 * (2 + .5 * (3 + .5 * (4 + .5 * 6))), 2 + .5 * (3 + .5 * (4 + .5 * 6)), 3 + .5 * (4 + .5 * 6),
            4 + .5 * 6],
           [1 + .5 * 2, 2, 3 + .5 * 8, 4 + .5 * 10],
           [1 + .5 * (2 + .5 * 8), 2 + .5 * 8, 3, 4 + .5 * 10]]
# GAE, lambda = 0.5 (gamma lambda = 0.25): deltas r + gamma next - V, summed until any end
DELTAS = [[1, 2.5, 2, 5], [1, 1.5, 2, 3], [1, 0, 4, 5], [1, 4, 0, 5]]
ADVANTAGES = [[1 + .25 * 2.5, 2.5, 2 + .25 * 5, 5],
              [1 + .25 * (1.5 + .25 * (2 + .25 * 3)), 1.5 + .25 * (2 + .25 * 3), 2 + .25 * 3, 3],
              [1 + .25 * 0, 0, 4, 5],
              [1 + .25 * 4, 4, 0, 5]]
# V-trace with pi/mu = 0.5 everywhere, rho_bar = c_bar = inf, lambda = 1: rho = c = 0.5, so
# v_s - V_s = sum (gamma c)^k rho delta = 0.5 * the GAE advantage above, and
# pg_s = rho (r_s + gamma nv_s - V_s) with nv_s = v_{s+1}, the final value, or 0.
VS = (VALUES[:, :4] + 0.5 * np.array(ADVANTAGES)).tolist()
NEXT = [[VS[0][1], 5, VS[0][3], 10], [VS[1][1], VS[1][2], VS[1][3], 6], [VS[2][1], 0, 8, 10], [VS[3][1], 8, 0, 10]]
PG = [[0.5 * (r + GAMMA * nv - v) for r, nv, v in zip([1, 2, 3, 4], row, [1, 2, 3, 4])] for row in NEXT]


def test_nstep_returns_by_hand():
    for fn in (nstep_returns, nstep_returns_reference):
        got = fn(REWARDS, DONES, VALUES[:, 4], GAMMA, final_values=FINAL)
        np.testing.assert_allclose(got, RETURNS, rtol=1e-6, err_msg=fn.__name__)


def test_gae_by_hand():
    for fn in (gae, gae_reference):
        got = fn(REWARDS, DONES, VALUES, GAMMA, 0.0, final_values=FINAL)  # lambda = 0: the one-step deltas
        np.testing.assert_allclose(got, DELTAS, rtol=1e-6, err_msg=fn.__name__)
        got = fn(REWARDS, DONES, VALUES, GAMMA, 0.5, final_values=FINAL)
        np.testing.assert_allclose(got, ADVANTAGES, rtol=1e-6, err_msg=fn.__name__)
        # lambda = 1: the n-step return minus V, truncations included
        got = fn(REWARDS, DONES, VALUES, GAMMA, 1.0, final_values=FINAL)
        np.testing.assert_allclose(got, np.array(RETURNS) - VALUES[:, :4], rtol=1e-6, err_msg=fn.__name__)


def test_vtrace_by_hand():
    behaviour = np.zeros((4, 4), np.float32)
    target = np.full((4, 4), math.log(0.5), np.float32)
    args = (behaviour, target, REWARDS, DONES, VALUES, GAMMA, math.inf, math.inf, 1.0)
    results = {
        "numba": vtrace(*args, final_values=FINAL),
        "reference": vtrace_reference(*args, final_values=FINAL),
        "torch": [t.numpy() for t in vtrace_torch(*(torch.from_numpy(a) for a in args[:5]), *args[5:],
                                                  final_values=torch.from_numpy(FINAL))],
    }
    for name, (vs, pg) in results.items():
        np.testing.assert_allclose(vs, VS, rtol=1e-6, err_msg=name)
        np.testing.assert_allclose(pg, PG, rtol=1e-6, atol=1e-7, err_msg=name)


def test_truncation_needs_final_values():
    with pytest.raises(ValueError, match="final_values"):
        nstep_returns(REWARDS, DONES, VALUES[:, 4], GAMMA)
    with pytest.raises(ValueError, match="final_values"):
        gae(REWARDS, DONES, VALUES, GAMMA, 0.5)
    with pytest.raises(ValueError, match="final_values"):
        vtrace(np.zeros((4, 4), np.float32), np.zeros((4, 4), np.float32), REWARDS, DONES, VALUES, GAMMA, 1.0, 1.0)
    with pytest.raises(ValueError, match="final_values"):
        vtrace_torch(*(torch.zeros(4, 4) for _ in range(2)), torch.from_numpy(REWARDS), torch.from_numpy(DONES),
                     torch.from_numpy(VALUES), GAMMA, 1.0, 1.0)


def random_batch(seed, n_envs, horizon):
    """[N, T] inputs as [:, :T] views of [N, T+1] arrays, codes 0 / TERMINATED / TRUNCATED mixed."""
    rng = np.random.default_rng(seed)
    view = lambda x: x[:, :horizon]  # noqa: E731
    behaviour = view(rng.normal(-1.0, 0.5, (n_envs, horizon + 1)).astype(np.float32))
    target = view(rng.normal(-1.0, 0.5, (n_envs, horizon + 1)).astype(np.float32))
    rewards = view(rng.normal(size=(n_envs, horizon + 1)).astype(np.float32))
    dones = view(rng.choice(np.array([0, END, CUT], np.uint8), size=(n_envs, horizon + 1), p=[0.6, 0.2, 0.2]))
    values = rng.normal(size=(n_envs, horizon + 1)).astype(np.float32)
    final = rng.normal(size=(n_envs, horizon)).astype(np.float32)
    return behaviour, target, rewards, dones, values, final


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(1, 12), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_returns_and_gae_match_references(seed, n_envs, horizon, gamma, lam):
    _, _, rewards, dones, values, final = random_batch(seed, n_envs, horizon)
    got = nstep_returns(rewards, dones, values[:, horizon], gamma, final_values=final)
    want = nstep_returns_reference(rewards, dones, values[:, horizon], gamma, final_values=final)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    got = gae(rewards, dones, values, gamma, lam, final_values=final)
    np.testing.assert_allclose(got, gae_reference(rewards, dones, values, gamma, lam, final_values=final),
                               rtol=1e-5, atol=1e-5)


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(1, 12), st.floats(0.0, 1.0),
       st.sampled_from([0.5, 1.0, math.inf]), st.sampled_from([0.5, 1.0, math.inf]), st.floats(0.0, 1.0))
def test_vtrace_numba_torch_reference_agree(seed, n_envs, horizon, gamma, rho_bar, c_bar, lam):
    behaviour, target, rewards, dones, values, final = random_batch(seed, n_envs, horizon)
    args = (behaviour, target, rewards, dones, values)
    want = vtrace_reference(*args, gamma, rho_bar, c_bar, lam, final_values=final)
    got = vtrace(*args, gamma, rho_bar, c_bar, lam, final_values=final)
    got_t = vtrace_torch(*(torch.from_numpy(a) for a in args), gamma, rho_bar, c_bar, lam,
                         final_values=torch.from_numpy(final))
    for g, g_t, w in zip(got, got_t, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(g_t.numpy(), w, rtol=1e-5, atol=1e-5)
    # on-policy, unclipped, lambda 1: the n-step return, truncations bootstrapped alike
    vs, _ = vtrace(target, target, rewards, dones, values, gamma, math.inf, math.inf, 1.0, final_values=final)
    returns = nstep_returns(rewards, dones, values[:, horizon], gamma, final_values=final)
    np.testing.assert_allclose(vs, returns, rtol=1e-5, atol=1e-5)
