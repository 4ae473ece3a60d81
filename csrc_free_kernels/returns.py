"""Discounted n-step returns, env-major [N, T], with time limits bootstrapped.

    R[n, t] = r[n, t] + gamma * R[n, t+1]              dones[n, t] = CONTINUES (R[n, T] = bootstrap[n])
    R[n, t] = r[n, t] + gamma * final_values[n, t]     dones[n, t] = TRUNCATED (a time limit)
    R[n, t] = r[n, t]                                  dones[n, t] = TERMINATED (or any other nonzero)

``dones`` holds the codes of ``step_end``: an episode that ended after the action of step t
bootstraps nothing past t from the next row (a reset), but a truncated one bootstraps from
V of its final observation. Sums run in float64 and are stored as float32.
"""

import numba
import numpy as np

from .step_end import CONTINUES, TRUNCATED, final_values_for, reference_flags


@numba.njit(cache=True)
def _nstep_returns_kernel(rewards, dones, final_values, bootstrap, gamma, out):
    # Indexes 2-D arrays, so strided views (buffer[:, :T]) need no copy. Each step
    # reads rewards[n, t] before writing out[n, t], so out may alias rewards.
    n_envs, horizon = rewards.shape
    for n in range(n_envs):
        acc = np.float64(bootstrap[n])
        for t in range(horizon - 1, -1, -1):
            code = dones[n, t]
            if code == CONTINUES:
                acc = rewards[n, t] + gamma * acc
            elif code == TRUNCATED:
                acc = rewards[n, t] + gamma * np.float64(final_values[n, t])
            else:
                acc = np.float64(rewards[n, t])
            out[n, t] = acc


def nstep_returns(rewards, dones, bootstrap, gamma, out=None, final_values=None):
    """Returns float32 [N, T]; written into ``out`` (float32 [N, T], may be a view) if given.

    ``final_values`` [N, T]: V(final observation) at TRUNCATED steps; required when there are any."""
    rewards = np.asarray(rewards, dtype=np.float32)
    dones = np.asarray(dones, dtype=np.uint8)
    bootstrap = np.asarray(bootstrap, dtype=np.float32)
    n_envs, horizon = rewards.shape
    if dones.shape != rewards.shape or bootstrap.shape != (n_envs,):
        raise ValueError(f"shapes: rewards {rewards.shape}, dones {dones.shape}, bootstrap {bootstrap.shape}")
    final_values = final_values_for(dones, final_values)
    if out is None:
        out = np.empty((n_envs, horizon), dtype=np.float32)
    elif out.dtype != np.float32 or out.shape != rewards.shape:
        raise ValueError(f"out must be float32 {rewards.shape}, got {out.dtype} {out.shape}")
    _nstep_returns_kernel(rewards, dones, final_values, bootstrap, float(gamma), out)
    return out


def nstep_returns_reference(rewards, dones, bootstrap, gamma, final_values=None):
    """Plain numpy, from the closed form rather than the recursion. A truncation's bootstrap is
    folded into its reward, r'_k = r_k + gamma [d_k truncated] V(final_k), and then

    R_t = sum_{k=t}^{T-1} gamma^(k-t) prod_{j=t}^{k-1} c_j r'_k + gamma^(T-t) prod_{j=t}^{T-1} c_j bootstrap

    with c_j = 1 where the episode continues after step j, else 0.
    """
    not_done, truncated, final = reference_flags(dones, final_values)
    r = np.asarray(rewards, dtype=np.float64) + gamma * truncated * final
    boot = np.asarray(bootstrap, dtype=np.float64)
    n_envs, horizon = r.shape
    out = np.empty((n_envs, horizon), dtype=np.float64)
    for t in range(horizon):
        # weight[:, k - t] = gamma^(k-t) * prod_{j=t}^{k-1} c_j, for k = t..T
        alive = np.cumprod(not_done[:, t:], axis=1)
        weight = np.concatenate([np.ones((n_envs, 1)), alive], axis=1) * gamma ** np.arange(horizon - t + 1)
        out[:, t] = (weight[:, :-1] * r[:, t:]).sum(axis=1) + weight[:, -1] * boot
    return out.astype(np.float32)
