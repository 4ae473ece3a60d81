"""GALA gossip mathematics: who mixes with whom, and how far agents can drift from their average.

Agents i = 0..n-1 on a directed ring (i sends to i+1); under torchrun the n agents are every rank's
learners, learner i of rank r being agent r·(learners per rank) + i. After its local update δ_i^k an agent
holds the half-step h_i^k = x_i^k - δ_i^k, sends it, and mixes what it received:
x_i^{k+1} = (h_i^k + m_{i-1}) / 2 (GALA's x_i ← (x_i + Σ_j m_j) / (1 + |N_in|) with one in-peer).

The ε-ball (GALA's Proposition 1: agents stay within ε of their average x̄ when every update
is bounded, ‖δ_i^k‖ ≤ L). The two bounds below are derived for exactly this mixing rule, one
for each gossip schedule fastrl runs; docs/design-notes.md gives the derivations in full.

- Fixed schedule (``gala.deterministic``: update k mixes the in-peer's message of update k).
  X^{k+1} = W (X^k - Δ^k) with W = (I + S)/2, S the cyclic shift: W is doubly stochastic, so the
  deviations Y = (I - J)X obey Y^{k+1} = W (Y^k - (I - J)Δ^k) and, from identical starts,
  ‖Y^k‖_F ≤ Σ_{m≥1} λ^m ‖Δ‖_F ≤ √n L λ / (1 - λ), with λ = σ_2(W) = cos(π/n).
  Every agent's ‖x_i - x̄‖ is at most ‖Y‖_F.
- Bounded delays (non-blocking gossip: a message is at most τ updates old and an agent mixes
  at least once in every τ+1 of its updates). Stack the last τ+1 half-steps of every agent into
  Z; each step maps Z by a row-stochastic matrix plus the new updates. Within B = (n-1)(2τ+1) + τ
  steps every row reaches agent 0's newest half-step along a path of weight ≥ 2^-B (at most τ
  waits for a mixing update, one hop of at most τ+1 back in time, per agent on the ring), so
  the product's Dobrushin coefficient is ≤ q = 1 - 2^-B and diam(Z) ≤ 2BL/(1-q) at window
  starts, ≤ 2BL (2^B + 1) anywhere. A worst case over every delay pattern, hence loose.
"""

from __future__ import annotations

import math

import numpy as np


def in_peers(mixing: str, learners: int, learner: int) -> list[int]:
    """Whose messages ``learner`` mixes: its ring predecessor, or nobody (allreduce shares gradients)."""
    if mixing == "ring" and learners > 1:
        return [(learner - 1) % learners]
    return []


def ring_matrix(learners: int) -> np.ndarray:
    """W = (I + S)/2: row i averages agent i with its in-peer i-1."""
    w = np.eye(learners) / 2
    for i in range(learners):
        w[i, (i - 1) % learners] += 0.5
    return w


def second_singular_value(w: np.ndarray) -> float:
    """σ_2 of a doubly stochastic W: how fast (I - J) W^k shrinks."""
    n = w.shape[0]
    deviation = w - np.ones((n, n)) / n
    return float(np.linalg.svd(deviation, compute_uv=False)[0])


def fixed_schedule_factor(learners: int) -> float:
    """ε / L for the fixed schedule: √n λ / (1 - λ)."""
    lam = second_singular_value(ring_matrix(learners))
    return math.sqrt(learners) * lam / (1.0 - lam)


def delayed_window(learners: int, staleness: int) -> int:
    """B: steps after which every stacked half-step depends on agent 0's with weight ≥ 2^-B."""
    return (learners - 1) * (2 * staleness + 1) + staleness


def delayed_factor(learners: int, staleness: int) -> float:
    """ε / L with delays of at most ``staleness`` updates: 2B (2^B + 1) (inf beyond float range)."""
    window = delayed_window(learners, staleness)
    if window > 1000:
        return math.inf
    return 2.0 * window * (2.0**window + 1.0)


def consensus_bound(
    mixing: str, learners: int, max_update_norm: float, deterministic: bool, staleness: int = 0
) -> float:
    """The radius every agent stays within, given the largest update norm so far."""
    if mixing == "allreduce" or learners == 1:
        return 0.0  # every agent applies the same averaged gradient to the same parameters
    if mixing == "none":
        return math.inf  # independent agents: nothing holds them together
    if max_update_norm == 0.0:
        return 0.0
    factor = fixed_schedule_factor(learners) if deterministic else delayed_factor(learners, staleness)
    return factor * max_update_norm
