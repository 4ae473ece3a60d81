"""Generalized advantage estimation (Schulman et al. 2016), env-major [N, T].

    delta_t = r_t + gamma * (1 - d_t) * V_{t+1} - V_t
    A_t     = delta_t + gamma * lam * (1 - d_t) * A_{t+1},     A_T = 0

``values`` is [N, T+1]; ``values[:, T]`` is the bootstrap value of the observation after
the last step. With lam = 1, A_t equals the n-step return minus V_t.
"""
import numba
import numpy as np


@numba.njit(cache=True)
def _gae_kernel(rewards, dones, values, gamma, lam, out):
    # 2-D indexing: strided views are fine. Float64 accumulator, float32 store.
    n_envs, horizon = rewards.shape
    for n in range(n_envs):
        adv = 0.0
        for t in range(horizon - 1, -1, -1):
            not_done = 0.0 if dones[n, t] != 0 else 1.0
            delta = rewards[n, t] + gamma * not_done * np.float64(values[n, t + 1]) - values[n, t]
            adv = delta + gamma * lam * not_done * adv
            out[n, t] = adv


def gae(rewards, dones, values, gamma, lam, out=None):
    """Advantages float32 [N, T]; written into ``out`` (float32 [N, T]) if given."""
    rewards = np.asarray(rewards, dtype=np.float32)
    dones = np.asarray(dones, dtype=np.uint8)
    values = np.asarray(values, dtype=np.float32)
    n_envs, horizon = rewards.shape
    if dones.shape != rewards.shape or values.shape != (n_envs, horizon + 1):
        raise ValueError(f"shapes: rewards {rewards.shape}, dones {dones.shape}, values {values.shape}")
    if out is None:
        out = np.empty((n_envs, horizon), dtype=np.float32)
    elif out.dtype != np.float32 or out.shape != rewards.shape:
        raise ValueError(f"out must be float32 {rewards.shape}, got {out.dtype} {out.shape}")
    _gae_kernel(rewards, dones, values, float(gamma), float(lam), out)
    return out


def gae_reference(rewards, dones, values, gamma, lam):
    """Plain numpy, from the closed form rather than the recursion:

    A_t = sum_{k=t}^{T-1} (gamma lam)^(k-t) prod_{j=t}^{k-1} (1-d_j) delta_k
    """
    r = np.asarray(rewards, dtype=np.float64)
    not_done = 1.0 - (np.asarray(dones) != 0)
    v = np.asarray(values, dtype=np.float64)
    n_envs, horizon = r.shape
    delta = r + gamma * not_done * v[:, 1:] - v[:, :-1]
    out = np.empty((n_envs, horizon), dtype=np.float64)
    for t in range(horizon):
        alive = np.cumprod(not_done[:, t:-1], axis=1)  # prod_{j=t}^{k-1}, k = t+1..T-1
        weight = np.concatenate([np.ones((n_envs, 1)), alive], axis=1) * (gamma * lam) ** np.arange(horizon - t)
        out[:, t] = (weight * delta[:, t:]).sum(axis=1)
    return out.astype(np.float32)
