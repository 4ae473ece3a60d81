"""Reward scaling by the running std of a discounted return (``algo.normalize_rewards``), env-major [N, T].

What gymnasium's ``NormalizeReward`` (CleanRL's ppo_continuous_action) and stable-baselines3's
``VecNormalize(norm_reward=True)`` do, over a whole rollout at once, in three passes:

    G_e      <- gamma * G_e + r[e, t]              (G_e = 0 again after a step that ended an episode)
    (c, m, v) <- Chan merge of (c, m, v) with the moments of G[:, t] over the rows (one update per step)
    out[e, t] = clip(r[e, t] / sqrt(v + eps), -clip, clip)

The variant, and why (it is SB3's): G restarts after *any* end, termination or truncation, since
the env resets and G is meant to be the discounted return of the episode under way (gymnasium's
wrapper instead zeroes G on the terminating step itself and carries it across truncations; with
MuJoCo's 1000-step limits gamma^1000 makes the two differ by 4e-5 of G). The statistics are
updated with step t's returns *before* step t's rewards are scaled, as both wrappers do; the mean
is tracked but never subtracted (openai/baselines#538). Row n's accumulator is
``carry[env_ids[n]]``, read and written in row order, so a batch may hold two consecutive slots
of one env (async). The returns do not depend on the statistics, so the per-step moments of
several learners' rows (torchrun ranks) can be merged between the second pass and the third.
Everything runs in float64; the scaled rewards are stored as float32.
"""

import numba
import numpy as np

from .step_end import CONTINUES

COUNT_PRIOR = 1e-4  # the running count starts here, with mean 0 and variance 1 (gymnasium's RunningMeanStd)
EPS = 1e-8  # under the square root, as gymnasium's and SB3's wrappers


@numba.njit(cache=True)
def _returns_kernel(rewards, dones, env_ids, carry, gamma, out):
    rows, horizon = rewards.shape
    for n in range(rows):
        g = carry[env_ids[n]]
        for t in range(horizon):
            g = gamma * g + np.float64(rewards[n, t])
            out[n, t] = g
            if dones[n, t] != CONTINUES:
                g = 0.0  # the next row begins a new episode
        carry[env_ids[n]] = g


@numba.njit(cache=True)
def _step_moments_kernel(returns, mean, var):
    # two passes per step, rows in order: the same bits whatever the caller's layout
    rows, horizon = returns.shape
    for t in range(horizon):
        total = 0.0
        for n in range(rows):
            total += returns[n, t]
        m = total / rows
        square = 0.0
        for n in range(rows):
            d = returns[n, t] - m
            square += d * d
        mean[t] = m
        var[t] = square / rows


@numba.njit(cache=True)
def _scale_kernel(rewards, batch, step_mean, step_var, stats, clip, eps, out):
    rows, horizon = rewards.shape
    count, mean, var = stats[0], stats[1], stats[2]
    for t in range(horizon):
        # Chan et al.'s merge, written as gymnasium's update_mean_var_count_from_moments
        delta = step_mean[t] - mean
        total = count + batch
        mean = mean + delta * batch / total
        var = (var * count + step_var[t] * batch + delta * delta * count * batch / total) / total
        count = total
        std = np.sqrt(var + eps)
        for n in range(rows):
            x = np.float64(rewards[n, t]) / std
            out[n, t] = min(max(x, -clip), clip)
    stats[0], stats[1], stats[2] = count, mean, var


def new_stats() -> np.ndarray:
    """The running (count, mean, var) before any step: float64 [3]."""
    return np.array([COUNT_PRIOR, 0.0, 1.0])


def discounted_returns(rewards, dones, carry, gamma, env_ids=None) -> np.ndarray:
    """G float64 [N, T]; ``carry`` (float64, one per env) holds each env's G going in and is updated in place.
    ``env_ids`` [N]: the env of each row (default: row n is env n)."""
    rewards = np.asarray(rewards, dtype=np.float32)
    dones = np.asarray(dones, dtype=np.uint8)
    if dones.shape != rewards.shape:
        raise ValueError(f"shapes: rewards {rewards.shape}, dones {dones.shape}")
    env_ids = np.arange(rewards.shape[0]) if env_ids is None else np.asarray(env_ids, np.int64)
    if (
        env_ids.shape != rewards.shape[:1]
        or carry.dtype != np.float64
        or (len(env_ids) and not 0 <= env_ids.min() <= env_ids.max() < len(carry))
    ):
        raise ValueError(f"env_ids {env_ids.tolist()} must index carry (float64 [{len(carry)}]), one per row")
    out = np.empty(rewards.shape, np.float64)
    _returns_kernel(rewards, dones, env_ids, carry, float(gamma), out)
    return out


def step_moments(returns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, population variance) of each step's returns over the rows: float64 [T] each."""
    returns = np.ascontiguousarray(returns, np.float64)
    mean, var = np.empty(returns.shape[1]), np.empty(returns.shape[1])
    if returns.shape[0]:
        _step_moments_kernel(returns, mean, var)
    return mean, var


def scale_rewards(rewards, batch, step_mean, step_var, stats, clip, eps=EPS) -> np.ndarray:
    """Step by step: merge step t's moments (``batch`` returns, ``step_mean[t]``, ``step_var[t]``) into the
    running ``stats`` (float64 [3], updated in place), then scale step t's rewards: float32 [N, T]."""
    rewards = np.asarray(rewards, dtype=np.float32)
    step_mean, step_var = np.asarray(step_mean, np.float64), np.asarray(step_var, np.float64)
    if step_mean.shape != rewards.shape[1:] or step_var.shape != step_mean.shape or stats.shape != (3,):
        raise ValueError(
            f"shapes: rewards {rewards.shape}, moments {step_mean.shape} {step_var.shape}, stats {stats.shape}"
        )
    out = np.empty(rewards.shape, np.float32)
    _scale_kernel(rewards, float(batch), step_mean, step_var, stats, float(clip), float(eps), out)
    return out


def normalize_rewards(rewards, dones, carry, stats, gamma, clip, env_ids=None) -> np.ndarray:
    """The three passes for one learner's rows; ``carry`` and ``stats`` are updated in place."""
    returns = discounted_returns(rewards, dones, carry, gamma, env_ids)
    mean, var = step_moments(returns)
    return scale_rewards(rewards, returns.shape[0], mean, var, stats, clip)


def normalize_rewards_reference(rewards, dones, carry, stats, gamma, clip, env_ids=None) -> np.ndarray:
    """Plain numpy, one step at a time as a vector wrapper steps (rows of one env taken in turn):
    returns float32 [N, T] and updates ``carry`` and ``stats`` in place."""
    rewards = np.asarray(rewards, np.float64)
    ended = np.asarray(dones) != CONTINUES
    rows, horizon = rewards.shape
    env_ids = np.arange(rows) if env_ids is None else np.asarray(env_ids)
    returns = np.empty((rows, horizon))
    for n in range(rows):  # G first: it never reads the statistics
        for t in range(horizon):
            carry[env_ids[n]] = gamma * carry[env_ids[n]] + rewards[n, t]
            returns[n, t] = carry[env_ids[n]]
            if ended[n, t]:
                carry[env_ids[n]] = 0.0
    out = np.empty((rows, horizon))
    for t in range(horizon):
        count, mean, var = stats
        batch_mean, batch_var = returns[:, t].mean(), returns[:, t].var()
        total = count + rows
        delta = batch_mean - mean
        m2 = var * count + batch_var * rows + delta**2 * count * rows / total
        stats[:] = total, mean + delta * rows / total, m2 / total
        out[:, t] = np.clip(rewards[:, t] / np.sqrt(stats[2] + EPS), -clip, clip)
    return out.astype(np.float32)
