"""V-trace targets and policy-gradient advantages (Espeholt et al. 2018, IMPALA), [N, T].

With ratio_t = pi(a_t|x_t) / mu(a_t|x_t), rho_t = min(rho_bar, ratio_t) and
c_t = lam * min(c_bar, ratio_t), eq. 1 reads

    v_s = V(x_s) + sum_{t=s}^{T-1} (prod_{i=s}^{t-1} gamma k_i c_i) delta_t,
    delta_t = rho_t (r_t + gamma next_t - V(x_t)),

with k_i = 1 where the episode continues after step i (``dones`` code CONTINUES), else 0, and
next_t = V(x_{t+1}) where it continues, V(final observation) = ``final_values[:, t]`` where a
time limit cut it (TRUNCATED; x_{t+1} is then a reset), 0 where it terminated. Computed by its
recursion v_s - V_s = delta_s + gamma k_s c_s (v_{s+1} - V_{s+1}), v_T = V_T. The
policy-gradient advantage is rho_s (r_s + gamma nv_s - V(x_s)), nv_s being v_{s+1}, the final
observation's value, or 0 in the same three cases. ``values`` is [N, T+1] (values[:, T]
bootstraps). rho_bar / c_bar may be inf. With pi == mu, rho_bar = c_bar = inf and lam = 1,
v_s is the n-step return.
"""

import math

import numba
import numpy as np

from .step_end import CONTINUES, TRUNCATED, final_values_for, reference_flags


@numba.njit(cache=True)
def _vtrace_kernel(
    behaviour_logp, target_logp, rewards, dones, final_values, values, gamma, rho_bar, c_bar, lam, vs_out, pg_out
):
    n_envs, horizon = rewards.shape
    for n in range(n_envs):
        acc = 0.0  # v_{t+1} - V_{t+1}; zero at t + 1 = T
        for t in range(horizon - 1, -1, -1):
            ratio = math.exp(np.float64(target_logp[n, t]) - behaviour_logp[n, t])
            rho = min(rho_bar, ratio)
            c = lam * min(c_bar, ratio)
            v_t = np.float64(values[n, t])
            code = dones[n, t]
            if code == CONTINUES:
                v_next = np.float64(values[n, t + 1])
                vs_next = v_next + acc
                acc = rho * (rewards[n, t] + gamma * v_next - v_t) + gamma * c * acc
            else:  # the trace stops: row t+1 is a new episode
                v_next = np.float64(final_values[n, t]) if code == TRUNCATED else 0.0
                vs_next = v_next  # no data past the end: the final observation's target is its value
                acc = rho * (rewards[n, t] + gamma * v_next - v_t)
            vs_out[n, t] = v_t + acc
            pg_out[n, t] = rho * (rewards[n, t] + gamma * vs_next - v_t)


def vtrace(behaviour_logp, target_logp, rewards, dones, values, gamma, rho_bar, c_bar, lam=1.0, final_values=None):
    """Returns (vs, pg_advantages), both float32 [N, T].

    ``final_values`` [N, T]: V(final observation) at TRUNCATED steps; required when there are any."""
    behaviour_logp = np.asarray(behaviour_logp, dtype=np.float32)
    target_logp = np.asarray(target_logp, dtype=np.float32)
    rewards = np.asarray(rewards, dtype=np.float32)
    dones = np.asarray(dones, dtype=np.uint8)
    values = np.asarray(values, dtype=np.float32)
    n_envs, horizon = rewards.shape
    if not (
        behaviour_logp.shape == target_logp.shape == dones.shape == rewards.shape
        and values.shape == (n_envs, horizon + 1)
    ):
        raise ValueError("vtrace expects [N, T] inputs and values [N, T+1]")
    final_values = final_values_for(dones, final_values)
    vs = np.empty((n_envs, horizon), dtype=np.float32)
    pg = np.empty((n_envs, horizon), dtype=np.float32)
    _vtrace_kernel(
        behaviour_logp,
        target_logp,
        rewards,
        dones,
        final_values,
        values,
        float(gamma),
        float(rho_bar),
        float(c_bar),
        float(lam),
        vs,
        pg,
    )
    return vs, pg


def vtrace_reference(
    behaviour_logp, target_logp, rewards, dones, values, gamma, rho_bar, c_bar, lam=1.0, final_values=None
):
    """Plain numpy, the direct sum of eq. 1 (no recursion)."""
    ratio = np.exp(np.asarray(target_logp, np.float64) - np.asarray(behaviour_logp, np.float64))
    rho = np.minimum(rho_bar, ratio)
    c = lam * np.minimum(c_bar, ratio)
    r = np.asarray(rewards, np.float64)
    not_done, truncated, final = reference_flags(dones, final_values)
    v = np.asarray(values, np.float64)
    n_envs, horizon = r.shape
    delta = rho * (r + gamma * (not_done * v[:, 1:] + truncated * final) - v[:, :-1])
    vs = np.empty((n_envs, horizon + 1))
    vs[:, horizon] = v[:, horizon]
    for s in range(horizon):
        # weight[:, t - s] = prod_{i=s}^{t-1} gamma k_i c_i, for t = s..T-1
        trace = np.cumprod(gamma * not_done[:, s:-1] * c[:, s:-1], axis=1)
        weight = np.concatenate([np.ones((n_envs, 1)), trace], axis=1)
        vs[:, s] = v[:, s] + (weight * delta[:, s:]).sum(axis=1)
    pg = rho * (r + gamma * (not_done * vs[:, 1:] + truncated * final) - v[:, :-1])
    return vs[:, :horizon].astype(np.float32), pg.astype(np.float32)
