"""Discounted n-step returns, env-major [N, T].

    R[n, T-1] = r[n, T-1] + gamma * (1 - d[n, T-1]) * bootstrap[n]
    R[n, t]   = r[n, t]   + gamma * (1 - d[n, t])   * R[n, t+1]

``dones[n, t] = 1`` means the episode ended after the action of step t, so nothing
past t is bootstrapped. Sums run in float64 and are stored as float32.
"""
import numba
import numpy as np


@numba.njit(cache=True)
def _nstep_returns_kernel(rewards, dones, bootstrap, gamma, out):
    # Indexes 2-D arrays, so strided views (buffer[:, :T]) need no copy. Each step
    # reads rewards[n, t] before writing out[n, t], so out may alias rewards.
    n_envs, horizon = rewards.shape
    for n in range(n_envs):
        acc = np.float64(bootstrap[n])
        for t in range(horizon - 1, -1, -1):
            not_done = 0.0 if dones[n, t] != 0 else 1.0
            acc = rewards[n, t] + gamma * not_done * acc
            out[n, t] = acc


def nstep_returns(rewards, dones, bootstrap, gamma, out=None):
    """Returns float32 [N, T]; written into ``out`` (float32 [N, T], may be a view) if given."""
    rewards = np.asarray(rewards, dtype=np.float32)
    dones = np.asarray(dones, dtype=np.uint8)
    bootstrap = np.asarray(bootstrap, dtype=np.float32)
    n_envs, horizon = rewards.shape
    if dones.shape != rewards.shape or bootstrap.shape != (n_envs,):
        raise ValueError(f"shapes: rewards {rewards.shape}, dones {dones.shape}, bootstrap {bootstrap.shape}")
    if out is None:
        out = np.empty((n_envs, horizon), dtype=np.float32)
    elif out.dtype != np.float32 or out.shape != rewards.shape:
        raise ValueError(f"out must be float32 {rewards.shape}, got {out.dtype} {out.shape}")
    _nstep_returns_kernel(rewards, dones, bootstrap, float(gamma), out)
    return out


def nstep_returns_reference(rewards, dones, bootstrap, gamma):
    """Plain numpy, from the closed form rather than the recursion:

    R_t = sum_{k=t}^{T-1} gamma^(k-t) prod_{j=t}^{k-1} (1-d_j) r_k
          + gamma^(T-t) prod_{j=t}^{T-1} (1-d_j) bootstrap
    """
    r = np.asarray(rewards, dtype=np.float64)
    not_done = 1.0 - (np.asarray(dones) != 0)
    boot = np.asarray(bootstrap, dtype=np.float64)
    n_envs, horizon = r.shape
    out = np.empty((n_envs, horizon), dtype=np.float64)
    for t in range(horizon):
        # weight[:, k - t] = gamma^(k-t) * prod_{j=t}^{k-1} (1 - d_j), for k = t..T
        alive = np.cumprod(not_done[:, t:], axis=1)
        weight = np.concatenate([np.ones((n_envs, 1)), alive], axis=1) * gamma ** np.arange(horizon - t + 1)
        out[:, t] = (weight[:, :-1] * r[:, t:]).sum(axis=1) + weight[:, -1] * boot
    return out.astype(np.float32)
