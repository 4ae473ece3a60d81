"""Scores over several games and seeds, aggregated as Agarwal et al. 2021 ("Deep RL at the edge of the
statistical precipice", the ``rliable`` library) recommend: point estimates and stratified-bootstrap
confidence intervals.

``scores`` is ``[runs, games]`` (seed i of every game in row i), normalised scores. The aggregates,
as ``rliable.metrics`` defines them:

- **IQM**, the interquartile mean: the mean of the middle 50% of all ``runs x games`` scores (the
  lowest and highest ``floor(n / 4)`` of the n dropped, as ``scipy.stats.trim_mean(x, 0.25)``);
- **median**: the median over games of each game's mean over runs;
- **mean**: the mean over games of each game's mean over runs.

The interval resamples the runs of each game with replacement, independently per game (stratified:
every game keeps its count), recomputes the aggregate, and takes the central ``confidence`` of the
resampled values (percentile bootstrap). With one run per game every resample is the run itself and the
interval is the point: several seeds are what makes an interval. The bootstrap is seeded: the same
scores give the same interval.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

REPS = 2000  # bootstrap resamples: the 95% interval's ends move by < 1% of its width between seeds
CONFIDENCE = 0.95


def iqm(scores: np.ndarray) -> float:
    """The mean of the middle half of every score (``floor(n / 4)`` cut from each end)."""
    flat = np.sort(np.asarray(scores, np.float64).ravel())
    cut = flat.size // 4
    return float(flat[cut : flat.size - cut].mean())


def median(scores: np.ndarray) -> float:
    return float(np.median(np.asarray(scores, np.float64).mean(axis=0)))


def mean(scores: np.ndarray) -> float:
    return float(np.asarray(scores, np.float64).mean(axis=0).mean())


AGGREGATES: dict[str, Callable[[np.ndarray], float]] = {"iqm": iqm, "median": median, "mean": mean}


@dataclass(frozen=True)
class Estimate:
    point: float
    low: float
    high: float

    def as_dict(self) -> dict:
        return {"point": self.point, "ci": [self.low, self.high]}


def stratified_bootstrap(
    scores: np.ndarray,
    aggregate: Callable[[np.ndarray], float],
    reps: int = REPS,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> Estimate:
    """The aggregate's point estimate and its percentile interval over ``reps`` stratified resamples."""
    scores = _check(scores)
    runs, games = scores.shape
    rng = np.random.default_rng(seed)
    columns = np.arange(games)
    values = np.empty(reps)
    for r in range(reps):
        picked = rng.integers(0, runs, size=(runs, games))  # each game's runs drawn from its own
        values[r] = aggregate(scores[picked, columns])
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(values, [tail, 100.0 - tail])
    return Estimate(aggregate(scores), float(low), float(high))


def summarize(scores: np.ndarray, reps: int = REPS, confidence: float = CONFIDENCE, seed: int = 0) -> dict:
    """Every aggregate of ``scores`` ``[runs, games]`` with its interval: ``{name: {"point", "ci"}}``."""
    return {name: stratified_bootstrap(scores, fn, reps, confidence, seed).as_dict() for name, fn in AGGREGATES.items()}


def _check(scores: np.ndarray) -> np.ndarray:
    scores = np.asarray(scores, np.float64)
    if scores.ndim != 2 or 0 in scores.shape:
        raise ValueError(f"scores must be [runs, games] with at least one of each, got shape {scores.shape}")
    if not np.isfinite(scores).all():
        raise ValueError("scores must be finite (a run without a finished episode has no score)")
    return scores
