"""Generalized advantage estimation (Schulman et al. 2016), env-major [N, T], time limits bootstrapped.

    delta_t = r_t + gamma * next_t - V_t
    A_t     = delta_t + gamma * lam * [d_t = CONTINUES] * A_{t+1},     A_T = 0

with next_t = V_{t+1} where the episode continues (``dones`` code CONTINUES), V(final
observation) = ``final_values[:, t]`` where a time limit cut it (TRUNCATED), and 0 where it
terminated. Any end stops the trace: row t+1 belongs to a new episode. ``values`` is [N, T+1];
``values[:, T]`` is the bootstrap value of the observation after the last step. With lam = 1,
A_t equals the n-step return minus V_t.
"""

import numba
import numpy as np

from .step_end import CONTINUES, TRUNCATED, final_values_for, reference_flags


@numba.njit(cache=True)
def _gae_kernel(rewards, dones, final_values, values, gamma, lam, out):
    # 2-D indexing: strided views are fine. Float64 accumulator, float32 store.
    n_envs, horizon = rewards.shape
    for n in range(n_envs):
        adv = 0.0
        for t in range(horizon - 1, -1, -1):
            code = dones[n, t]
            if code == CONTINUES:
                delta = rewards[n, t] + gamma * np.float64(values[n, t + 1]) - values[n, t]
                adv = delta + gamma * lam * adv
            elif code == TRUNCATED:
                adv = rewards[n, t] + gamma * np.float64(final_values[n, t]) - values[n, t]
            else:
                adv = np.float64(rewards[n, t]) - values[n, t]
            out[n, t] = adv


def gae(rewards, dones, values, gamma, lam, out=None, final_values=None):
    """Advantages float32 [N, T]; written into ``out`` (float32 [N, T]) if given.

    ``final_values`` [N, T]: V(final observation) at TRUNCATED steps; required when there are any."""
    rewards = np.asarray(rewards, dtype=np.float32)
    dones = np.asarray(dones, dtype=np.uint8)
    values = np.asarray(values, dtype=np.float32)
    n_envs, horizon = rewards.shape
    if dones.shape != rewards.shape or values.shape != (n_envs, horizon + 1):
        raise ValueError(f"shapes: rewards {rewards.shape}, dones {dones.shape}, values {values.shape}")
    final_values = final_values_for(dones, final_values)
    if out is None:
        out = np.empty((n_envs, horizon), dtype=np.float32)
    elif out.dtype != np.float32 or out.shape != rewards.shape:
        raise ValueError(f"out must be float32 {rewards.shape}, got {out.dtype} {out.shape}")
    _gae_kernel(rewards, dones, final_values, values, float(gamma), float(lam), out)
    return out


def gae_reference(rewards, dones, values, gamma, lam, final_values=None):
    """Plain numpy, from the closed form rather than the recursion:

    A_t = sum_{k=t}^{T-1} (gamma lam)^(k-t) prod_{j=t}^{k-1} c_j delta_k,
    delta_k = r_k + gamma (c_k V_{k+1} + [d_k truncated] V(final_k)) - V_k

    with c_j = 1 where the episode continues after step j, else 0.
    """
    not_done, truncated, final = reference_flags(dones, final_values)
    r = np.asarray(rewards, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    n_envs, horizon = r.shape
    delta = r + gamma * (not_done * v[:, 1:] + truncated * final) - v[:, :-1]
    out = np.empty((n_envs, horizon), dtype=np.float64)
    for t in range(horizon):
        alive = np.cumprod(not_done[:, t:-1], axis=1)  # prod_{j=t}^{k-1}, k = t+1..T-1
        weight = np.concatenate([np.ones((n_envs, 1)), alive], axis=1) * (gamma * lam) ** np.arange(horizon - t)
        out[:, t] = (weight * delta[:, t:]).sum(axis=1)
    return out.astype(np.float32)
