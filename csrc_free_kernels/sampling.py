"""Sample actions from logits given one uniform number per row (inverse CDF).

Per row b: p_a = exp(l_a - max l) / sum_a' exp(l_a' - max l), in float64;
action = the first a with p_0 + ... + p_a > u_b (A-1 if rounding leaves u_b above the
total); logp = l_action - logsumexp(l).

Each row is computed with plain scalar loops in a fixed order, so a row's action and
logp depend only on that row's logits and u, bit for bit, whatever batch it sits in.
The engine's determinism rests on this (DESIGN.md, "Determinism"): do not vectorise it
across rows or reorder its sums.
"""
import math

import numba
import numpy as np


@numba.njit(cache=True, inline="always")
def _sample_row(logits, b, u):
    """(action, logp) of row ``b``; the one place the sampling arithmetic lives."""
    n_actions = logits.shape[1]
    peak = -math.inf
    for a in range(n_actions):
        peak = max(peak, np.float64(logits[b, a]))
    total = 0.0
    for a in range(n_actions):
        total += math.exp(logits[b, a] - peak)
    chosen = n_actions - 1
    cumulative = 0.0
    for a in range(n_actions):
        cumulative += math.exp(logits[b, a] - peak) / total
        if cumulative > u:
            chosen = a
            break
    return chosen, logits[b, chosen] - peak - math.log(total)


@numba.njit(cache=True)
def _sample_kernel(logits, u, actions_out, logp_out):
    for b in range(logits.shape[0]):
        actions_out[b], logp_out[b] = _sample_row(logits, b, u[b])


@numba.njit(cache=True)
def sample_rows_kernel(logits, values, version, rows, u, action, logp, value, stamp):
    """The actor's whole write-back in one call: for each b, sample row ``rows[b]`` of the
    trajectory columns from ``logits[b]`` and its own ``u``, and store its action, logp,
    ``values[b]`` and the weights' ``version`` there (same arithmetic as ``_sample_kernel``)."""
    for b in range(rows.shape[0]):
        row = rows[b]
        action[row], logp[row] = _sample_row(logits, b, u[row])
        value[row] = values[b]
        stamp[row] = version


def sample_from_u(logits, u, actions_out, logp_out):
    """Fill actions_out (int64 [B]) and logp_out (float32 [B]); returns them.

    logits float32 [B, A] (views fine), u float64 [B] in [0, 1).
    """
    logits = np.asarray(logits, dtype=np.float32)
    u = np.asarray(u, dtype=np.float64)
    batch, n_actions = logits.shape
    if n_actions < 1 or u.shape != (batch,):
        raise ValueError(f"shapes: logits {logits.shape}, u {u.shape}")
    if actions_out.dtype != np.int64 or actions_out.shape != (batch,):
        raise ValueError(f"actions_out must be int64 [{batch}], got {actions_out.dtype} {actions_out.shape}")
    if logp_out.dtype != np.float32 or logp_out.shape != (batch,):
        raise ValueError(f"logp_out must be float32 [{batch}], got {logp_out.dtype} {logp_out.shape}")
    _sample_kernel(logits, u, actions_out, logp_out)
    return actions_out, logp_out


def sample_from_u_reference(logits, u):
    """Plain numpy: returns (actions int64 [B], logp float32 [B])."""
    l = np.asarray(logits, dtype=np.float64)
    shifted = l - l.max(axis=1, keepdims=True)
    log_z = np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    logp_all = shifted - log_z
    cdf = np.cumsum(np.exp(logp_all), axis=1)
    above = cdf > np.asarray(u, dtype=np.float64)[:, None]
    actions = np.where(above.any(axis=1), above.argmax(axis=1), l.shape[1] - 1).astype(np.int64)
    logp = logp_all[np.arange(len(actions)), actions]
    return actions, logp.astype(np.float32)
