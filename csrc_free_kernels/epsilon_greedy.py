"""ε-greedy actions from Q-values and the executor's uniform number: one uniform per row decides both whether
to explore and which action to take, so the action depends only on the row's Q-values, its u and ε.

Per row b with Q-values q (A actions) and u in [0, 1):

- the allowed actions: those whose q is above ``MASKED_BELOW``, i.e. all but the ones an ``action_mask`` set to
  ``fastrl.models.action_mask.MASKED_LOGIT`` (-1e9); every action where the mask allows none. K of them;
- greedy = the first a of the largest q_a (a scalar loop in action order: ties go to the lowest action);
- if u < ε: action = the k-th allowed, k = min(floor(u / ε · K), K - 1) (u / ε is uniform on [0, 1) given
  u < ε), else greedy; with no mask the k-th allowed action is action k;
- logp = log(ε / K + (1 - ε) · [action = greedy]), the ε-greedy policy's probability of the action;
- value = max_a q_a (what PQN's Q(λ) targets bootstrap from).

Exploring among the allowed actions only is what makes PQN usable on a masked env: a masked action is
illegal there (the env may raise), and its Q-value is never learned.

Each row is computed with plain scalar loops, so a row's action depends only on that row, whatever batch it
sits in: the engine's determinism rests on it (DESIGN.md, "Determinism").
"""

import math

import numba
import numpy as np

MASKED_BELOW = -5e8  # a q below it was masked (MASKED_LOGIT = -1e9); a learned Q-value never gets near it


@numba.njit(cache=True, inline="always")
def _row(q, b, u, epsilon):
    """(action, logp, max q) of row ``b``."""
    n_actions = q.shape[1]
    greedy, top, allowed = 0, q[b, 0], 0
    for a in range(n_actions):
        if a > 0 and q[b, a] > top:
            greedy, top = a, q[b, a]
        if q[b, a] > MASKED_BELOW:
            allowed += 1
    choices = allowed if allowed > 0 else n_actions
    chosen = greedy
    if u < epsilon:
        chosen = _kth_allowed(q, b, min(int(u / epsilon * choices), choices - 1), allowed)
    p = epsilon / choices + (1.0 - epsilon if chosen == greedy else 0.0)
    return chosen, math.log(p), top


@numba.njit(cache=True, inline="always")
def _kth_allowed(q, b, k, allowed):
    """The ``k``-th action of row ``b`` whose q is not masked (action ``k`` when none is allowed)."""
    if allowed == 0:
        return k
    seen = 0
    for a in range(q.shape[1]):
        if q[b, a] > MASKED_BELOW:
            if seen == k:
                return a
            seen += 1
    return q.shape[1] - 1


@numba.njit(cache=True)
def epsilon_greedy_rows_kernel(q, epsilon, version, rows, u, action, logp, value, stamp):
    """The actor's write-back: for each b, row ``rows[b]`` of the slot columns from ``q[b]`` and its own ``u``:
    action, logp, the greedy value max q and the weights' ``version``."""
    for b in range(rows.shape[0]):
        row = rows[b]
        action[row], logp[row], value[row] = _row(q, b, u[row], epsilon)
        stamp[row] = version


@numba.njit(cache=True)
def _kernel(q, u, epsilon, actions_out, logp_out):
    for b in range(q.shape[0]):
        actions_out[b], logp_out[b], _ = _row(q, b, u[b], epsilon)


def epsilon_greedy(q, u, epsilon: float, actions_out=None, logp_out=None):
    """(actions int64 [B], logp float32 [B]) of Q-values float32 [B, A] with uniforms float64 [B] at ``epsilon``."""
    q = np.ascontiguousarray(q, dtype=np.float32)
    u = np.ascontiguousarray(u, dtype=np.float64)
    if q.ndim != 2 or q.shape[1] < 1 or u.shape != (q.shape[0],):
        raise ValueError(f"shapes: q {q.shape}, u {u.shape}")
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError(f"epsilon must be in [0, 1], got {epsilon}")
    batch = q.shape[0]
    actions_out = np.empty(batch, np.int64) if actions_out is None else actions_out
    logp_out = np.empty(batch, np.float32) if logp_out is None else logp_out
    _kernel(q, u, float(epsilon), actions_out, logp_out)
    return actions_out, logp_out


def epsilon_greedy_reference(q, u, epsilon: float):
    """Plain numpy: (actions int64 [B], logp float32 [B])."""
    q = np.asarray(q, np.float32)
    allowed = q > MASKED_BELOW
    allowed[~allowed.any(axis=1)] = True  # a mask that allows nothing: every action
    choices = allowed.sum(axis=1)
    greedy = q.argmax(axis=1)  # the first of the largest, as the kernel's loop
    explore = np.asarray(u, np.float64) < epsilon
    scaled = np.floor(np.asarray(u, np.float64) / max(epsilon, 1e-300) * choices)
    k = np.minimum(scaled, choices - 1).astype(np.int64)  # only read where u < ε
    random_action = np.array([np.flatnonzero(row)[i] for row, i in zip(allowed, k)], np.int64)
    actions = np.where(explore, random_action, greedy).astype(np.int64)
    p = epsilon / choices + np.where(actions == greedy, 1.0 - epsilon, 0.0)
    return actions, np.log(p).astype(np.float32)
