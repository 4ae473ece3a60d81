"""The α-β (latency-bandwidth) model that projects a measured all-reduce to many nodes.

A ring all-reduce of n bytes on p nodes costs ``T(p, n) = 2(p-1)·α + 2(p-1)/p · n/β``
(reduce-scatter then all-gather: 2(p-1) steps, each one latency α plus an n/p-byte chunk at
bandwidth β). At p = 2 it is ``T = 2α + n/β``; α and β are fitted on a sweep of message sizes at 2
ranks, by least squares on the relative error (weights 1/T) so that the latency-bound small messages
count as much as the bandwidth-bound large ones. ``exposed_allreduce_s``: what of a step's bucketed
all-reduce outlasts its backward pass, each bucket at the model's cost, one at a time, in order.
"""

from __future__ import annotations

from fastrl.bench.rank_group import BackwardProfile, BenchFailed

MODEL = "ring all-reduce, alpha-beta: T(p, n bytes) = 2(p-1)*alpha + 2(p-1)/p * n/beta"


def ring_allreduce_s(nodes: int, nbytes: float, alpha_s: float, beta_bytes_s: float) -> float:
    return 2 * (nodes - 1) * alpha_s + 2 * (nodes - 1) / nodes * nbytes / beta_bytes_s


def fit_alpha_beta(sizes: list[int], times_s: list[float]) -> tuple[float, float]:
    """(α seconds, β bytes/s) of ``T = 2α + n/β`` (the ring model at p = 2), least squares on relative error."""
    import numpy as np

    n = np.asarray(sizes, dtype=np.float64)
    t = np.asarray(times_s, dtype=np.float64)
    # divide each row by T: minimises the relative residual, else the 16 MiB points decide α alone
    design = np.stack([np.ones_like(n), n], axis=1) / t[:, None]
    (intercept, slope), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    if intercept <= 0 or slope <= 0:
        raise BenchFailed(
            f"the sweep did not resolve alpha and beta (2*alpha = {intercept:.3g} s, 1/beta = "
            f"{slope:.3g} s/byte): widen --sizes or raise --repeats"
        )
    return intercept / 2, 1 / slope


def exposed_allreduce_s(profile: BackwardProfile, nodes: int, alpha_s: float, beta: float) -> float:
    """What of the bucketed all-reduces outlasts backward on ``nodes``: each bucket starts once it is ready
    and the one before it is done (one collective at a time, in order), at the α-β model's cost."""
    done = 0.0
    for ready, nbytes in zip(profile.ready_s, profile.bucket_bytes):
        done = max(ready, done) + ring_allreduce_s(nodes, nbytes, alpha_s, beta)
    return max(done - profile.backward_end_s, 0.0)
