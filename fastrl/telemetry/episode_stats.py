"""An env's own per-episode figures (``episode_stats()`` of an adapter, ``fastrl.envs.base``: Crafter's
achievements), summed between two metrics lines.

Each line carries ``episode_stats`` (each figure's mean over the episodes that ended since the line before) and
``episode_stats_episodes`` (how many): the means times the counts, summed over a run's lines, are the run's totals,
from which a benchmark's score over every episode of the run is computed (``fastrl.bench.crafter``). TensorBoard
shows each mean as ``episode_stats/<name>``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

STATS, EPISODES = "episode_stats", "episode_stats_episodes"


class EpisodeStats:
    """Sums of each figure over the episodes added."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.episodes = 0

    def add(self, stats: Mapping[str, float]) -> None:
        for name, value in stats.items():
            self.sums[name] = self.sums.get(name, 0.0) + float(value)
        self.episodes += 1

    def fields(self) -> dict:
        """The metrics line's keys: nothing when no episode with figures ended."""
        if not self.episodes:
            return {}
        return {STATS: {name: total / self.episodes for name, total in self.sums.items()}, EPISODES: self.episodes}


def run_totals(lines: Iterable[Mapping]) -> EpisodeStats:
    """The figures summed over every episode of a run's metrics lines (each line's means times its count). A run
    killed and resumed goes on from its checkpoint's frames: the killed session's lines past the resumed session's
    first line are dropped, its episodes replayed by the resumed session."""
    totals = EpisodeStats()
    for line in _superseded_dropped(list(lines)):
        count = int(line.get(EPISODES) or 0)
        for name, mean in (line.get(STATS) or {}).items():
            totals.sums[name] = totals.sums.get(name, 0.0) + float(mean) * count
        totals.episodes += count
    return totals


def _superseded_dropped(lines: list[Mapping]) -> list[Mapping]:
    kept: list[Mapping] = []
    for line in lines:
        frames = line.get("frames")
        while frames is not None and kept and (kept[-1].get("frames") or 0) > frames:
            kept.pop()
        kept.append(line)
    return kept
