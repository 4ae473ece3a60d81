"""The self-play pool's keys of the metrics lines (``fastrl.telemetry.sections``): the learning policy's Elo rating
and its scores against the pool, the random and the scripted player."""

from __future__ import annotations

from typing import Any

import numpy as np

from fastrl.buffers.control import layer_columns
from fastrl.config import Config
from fastrl.layer import layer_stats
from fastrl.layers.selfplay.pool import POOL
from fastrl.telemetry.sections import MetricsSection, finite_or_none


class PoolMetrics(MetricsSection):
    """The learning seat's rating and scores against the pool (``fastrl.layers.selfplay.pool``), from the stats row."""

    def __init__(self, config: Config):
        self.random, self.scripted = config.selfplay.random_share > 0, config.selfplay.scripted_share > 0
        self.column = layer_columns(layer_stats())  # as the run's plan placed them (this process planned it)

    def fields(self, stats: np.ndarray) -> dict[str, Any]:
        line: dict[str, Any] = {
            "elo": round(float(stats[self.column["elo"]]), 2),
            "pool_size": int(stats[self.column["pool_size"]]),
            "pool_score": finite_or_none(stats[self.column["pool_score"]]),
            "pool_games": int(stats[self.column["pool_games"]]),
        }
        if self.random:
            line["random_score"] = finite_or_none(stats[self.column["random_score"]])
        if self.scripted:
            line["scripted_score"] = finite_or_none(stats[self.column["scripted_score"]])
        return line


def pool_metrics(config: Config) -> PoolMetrics | None:
    return PoolMetrics(config) if config.selfplay.opponents == POOL else None
