"""Sample actions from the policy head given the executor's uniform numbers (inverse CDF).

Categorical (Discrete), one uniform number per row:

Per row b: p_a = exp(l_a - max l) / sum_a' exp(l_a' - max l), in float64;
action = the first a with p_0 + ... + p_a > u_b (if rounding leaves u_b above the total: the
last a with p_a > 0, which is A-1 unless its probability is exactly 0, as a masked action's is:
``fastrl.models.action_mask``); logp = l_action - logsumexp(l). An action of probability 0 is
never chosen: the cumulative sum does not grow at it.

Each row is computed with plain scalar loops in a fixed order, so a row's action and
logp depend only on that row's logits and u, bit for bit, whatever batch it sits in.
The engine's determinism rests on this (DESIGN.md, "Determinism"): do not vectorise it
across rows or reorder its sums.

MultiDiscrete, one uniform number per dimension: each dimension is the categorical above on
its own block of logits (side by side in the head, in dimension order) with its own u; the
logp is the sum over dimensions, in dimension order.

Diagonal Gaussian (Box), one uniform number per dimension: the head row is D means then D
log-stds; action_d = float32(mean_d + exp(log_std_d) * ndtri(u_d)), with ndtri the inverse
normal CDF (Wichura's AS241, as Python's ``statistics.NormalDist.inv_cdf``: ~1e-16 relative)
and u clamped into [2^-53, 1 - 2^-53] (numpy's uniforms can be exactly 0, whose ndtri is
-inf; the clamp caps |z| at 8.2). logp is that of the stored float32 action (the one the
learner scores), sum_d -z_d^2/2 - log_std_d - log(2 pi)/2 with z_d = (action_d - mean_d) / std_d.
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
    last = 0  # the last action of non-zero probability: what rounding that leaves u above the total falls to
    for a in range(n_actions):
        weight = math.exp(logits[b, a] - peak)
        total += weight
        if weight > 0.0:
            last = a
    chosen = last
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


@numba.njit(cache=True)
def sample_multi_rows_kernel(logits, nvec, values, version, rows, u, action, logp, value, stamp):
    """MultiDiscrete: as ``sample_rows_kernel``, dimension d sampled from its own logits block
    ``nvec[d]`` wide and ``u[row, d]`` by the categorical's own arithmetic; logp summed over d."""
    for b in range(rows.shape[0]):
        row = rows[b]
        logp[row] = _multi_row(logits, nvec, b, u[row], action[row])
        value[row] = values[b]
        stamp[row] = version


@numba.njit(cache=True, inline="always")
def _multi_row(logits, nvec, b, u_row, action_row):
    start, total = 0, 0.0
    for d in range(nvec.shape[0]):
        stop = start + nvec[d]
        action_row[d], chosen_logp = _sample_row(logits[:, start:stop], b, u_row[d])
        total += chosen_logp
        start = stop
    return total


# ---------------------------------------------------------------- diagonal Gaussian (Box actions)

U_EPS = 2.0**-53  # u is clamped into [U_EPS, 1 - U_EPS]: the open interval ndtri needs
HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


@numba.njit(cache=True)
def ndtri(p):
    """The inverse standard normal CDF at p in (0, 1): Wichura (1988), AS241 PPND16, written as
    CPython's ``statistics._normal_dist_inv_cdf`` (the pure-Python reference the tests compare with)."""
    q = p - 0.5
    if math.fabs(q) <= 0.425:
        r = 0.180625 - q * q
        num = (
            (
                (
                    (
                        (
                            ((2.5090809287301226727e3 * r + 3.3430575583588128105e4) * r + 6.7265770927008700853e4) * r
                            + 4.5921953931549871457e4
                        )
                        * r
                        + 1.3731693765509461125e4
                    )
                    * r
                    + 1.9715909503065514427e3
                )
                * r
                + 1.3314166789178437745e2
            )
            * r
            + 3.3871328727963666080e0
        ) * q
        den = (
            (
                (
                    (
                        ((5.2264952788528545610e3 * r + 2.8729085735721942674e4) * r + 3.9307895800092710610e4) * r
                        + 2.1213794301586595867e4
                    )
                    * r
                    + 5.3941960214247511077e3
                )
                * r
                + 6.8718700749205790830e2
            )
            * r
            + 4.2313330701600911252e1
        ) * r + 1.0
        return num / den
    r = p if q <= 0.0 else 1.0 - p
    r = math.sqrt(-math.log(r))
    if r <= 5.0:
        r = r - 1.6
        num = (
            (
                (
                    (
                        ((7.74545014278341407640e-4 * r + 2.27238449892691845833e-2) * r + 2.41780725177450611770e-1)
                        * r
                        + 1.27045825245236838258e0
                    )
                    * r
                    + 3.64784832476320460504e0
                )
                * r
                + 5.76949722146069140550e0
            )
            * r
            + 4.63033784615654529590e0
        ) * r + 1.42343711074968357734e0
        den = (
            (
                (
                    (
                        ((1.05075007164441684324e-9 * r + 5.47593808499534494600e-4) * r + 1.51986665636164571966e-2)
                        * r
                        + 1.48103976427480074590e-1
                    )
                    * r
                    + 6.89767334985100004550e-1
                )
                * r
                + 1.67638483018380384940e0
            )
            * r
            + 2.05319162663775882187e0
        ) * r + 1.0
    else:
        r = r - 5.0
        num = (
            (
                (
                    (
                        ((2.01033439929228813265e-7 * r + 2.71155556874348757815e-5) * r + 1.24266094738807843860e-3)
                        * r
                        + 2.65321895265761230930e-2
                    )
                    * r
                    + 2.96560571828504891230e-1
                )
                * r
                + 1.78482653991729133580e0
            )
            * r
            + 5.46378491116411436990e0
        ) * r + 6.65790464350110377720e0
        den = (
            (
                (
                    (
                        ((2.04426310338993978564e-15 * r + 1.42151175831644588870e-7) * r + 1.84631831751005468180e-5)
                        * r
                        + 7.86869131145613259100e-4
                    )
                    * r
                    + 1.48753612908506148525e-2
                )
                * r
                + 1.36929880922735805310e-1
            )
            * r
            + 5.99832206555887937690e-1
        ) * r + 1.0
    x = num / den
    return -x if q < 0.0 else x


@numba.njit(cache=True, inline="always")
def _gaussian_row(head, b, u_row, action_row):
    """Write row ``b``'s action into ``action_row``; returns its logp. The one place this arithmetic lives."""
    dims = action_row.shape[0]
    total = 0.0
    for d in range(dims):
        mean = np.float64(head[b, d])
        log_std = np.float64(head[b, dims + d])
        std = math.exp(log_std)
        p = min(max(u_row[d], U_EPS), 1.0 - U_EPS)
        chosen = np.float32(mean + std * ndtri(p))
        action_row[d] = chosen
        z = (np.float64(chosen) - mean) / std
        total += -0.5 * z * z - log_std - HALF_LOG_2PI
    return total


@numba.njit(cache=True)
def sample_gaussian_rows_kernel(head, values, version, rows, u, action, logp, value, stamp):
    """Box: as ``sample_rows_kernel`` for a diagonal Gaussian head ``[B, 2 D]`` (means, log-stds),
    ``u`` and ``action`` ``[rows, D]``."""
    for b in range(rows.shape[0]):
        row = rows[b]
        logp[row] = _gaussian_row(head, b, u[row], action[row])
        value[row] = values[b]
        stamp[row] = version


@numba.njit(cache=True)
def _gaussian_kernel(head, u, actions_out, logp_out):
    for b in range(head.shape[0]):
        logp_out[b] = _gaussian_row(head, b, u[b], actions_out[b])


@numba.njit(cache=True)
def _multi_kernel(logits, nvec, u, actions_out, logp_out):
    for b in range(logits.shape[0]):
        logp_out[b] = _multi_row(logits, nvec, b, u[b], actions_out[b])


def sample_gaussian(head, u, actions_out, logp_out):
    """Box: fill actions_out (float32 [B, D]) and logp_out (float32 [B]) from head float32 [B, 2 D]
    and u float64 [B, D]; returns them."""
    head = np.ascontiguousarray(head, dtype=np.float32)
    u = np.ascontiguousarray(u, dtype=np.float64)
    batch, dims = u.shape
    if head.shape != (batch, 2 * dims) or actions_out.shape != (batch, dims) or actions_out.dtype != np.float32:
        raise ValueError(f"shapes: head {head.shape}, u {u.shape}, actions_out {actions_out.dtype} {actions_out.shape}")
    _gaussian_kernel(head, u, actions_out, logp_out)
    return actions_out, logp_out


def sample_multi(logits, nvec, u, actions_out, logp_out):
    """MultiDiscrete: fill actions_out (int64 [B, D]) and logp_out (float32 [B]) from logits float32
    [B, sum(nvec)] and u float64 [B, D]; returns them."""
    logits = np.ascontiguousarray(logits, dtype=np.float32)
    nvec = np.asarray(nvec, dtype=np.int64)
    u = np.ascontiguousarray(u, dtype=np.float64)
    if logits.shape != (u.shape[0], int(nvec.sum())) or u.shape[1] != len(nvec) or actions_out.shape != u.shape:
        raise ValueError(
            f"shapes: logits {logits.shape}, nvec {tuple(nvec)}, u {u.shape}, actions_out {actions_out.shape}"
        )
    _multi_kernel(logits, nvec, u, actions_out, logp_out)
    return actions_out, logp_out


def sample_gaussian_reference(head, u):
    """Plain Python (``statistics.NormalDist``, no numpy maths, no scipy): (actions float32 [B, D], logp
    float32 [B])."""
    from statistics import NormalDist

    normal = NormalDist()
    head, u = np.asarray(head, np.float32), np.asarray(u, np.float64)
    batch, dims = u.shape
    actions, logps = np.zeros((batch, dims), np.float32), np.zeros(batch, np.float32)
    for b in range(batch):
        total = 0.0
        for d in range(dims):
            mean, log_std = float(head[b, d]), float(head[b, dims + d])
            p = min(max(float(u[b, d]), U_EPS), 1.0 - U_EPS)
            actions[b, d] = mean + math.exp(log_std) * normal.inv_cdf(p)
            z = (float(actions[b, d]) - mean) / math.exp(log_std)
            total += -0.5 * z * z - log_std - HALF_LOG_2PI
        logps[b] = total
    return actions, logps


def sample_multi_reference(logits, nvec, u):
    """Plain numpy: each dimension by ``sample_from_u_reference`` on its block; logp summed."""
    logits, u = np.asarray(logits, np.float32), np.asarray(u, np.float64)
    bounds = np.cumsum([0, *nvec])
    parts = [sample_from_u_reference(logits[:, bounds[d] : bounds[d + 1]], u[:, d]) for d in range(len(nvec))]
    actions = np.stack([a for a, _ in parts], axis=1)
    logp = np.sum([lp.astype(np.float64) for _, lp in parts], axis=0)
    return actions, logp.astype(np.float32)


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
    logits64 = np.asarray(logits, dtype=np.float64)
    shifted = logits64 - logits64.max(axis=1, keepdims=True)
    log_z = np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    logp_all = shifted - log_z
    probs = np.exp(logp_all)
    cdf = np.cumsum(probs, axis=1)
    above = cdf > np.asarray(u, dtype=np.float64)[:, None]
    last = probs.shape[1] - 1 - np.argmax(probs[:, ::-1] > 0, axis=1)  # the last action of probability > 0
    actions = np.where(above.any(axis=1), above.argmax(axis=1), last).astype(np.int64)
    logp = logp_all[np.arange(len(actions)), actions]
    return actions, logp.astype(np.float32)
