"""The gossip layer's keys of the metrics lines (``fastrl.telemetry.sections``): each gala learner's consensus
distance, its bound, messages mixed, time waiting on peers and staleness, and the radius over every learner."""

from __future__ import annotations

from typing import Any

import numpy as np

from fastrl.buffers.control import layer_columns
from fastrl.config import Config
from fastrl.layer import layer_stats
from fastrl.telemetry.sections import MetricsSection, finite_or_none


class GossipMetrics(MetricsSection):
    def __init__(self) -> None:
        self.column = layer_columns(layer_stats())  # as the run's plan placed them (this process planned it)

    def learner_fields(self, row: np.ndarray) -> dict[str, Any]:
        column = self.column
        return {
            "consensus_distance": float(row[column["consensus"]]),
            "consensus_bound": finite_or_none(row[column["bound"]]),
            "mixes": int(row[column["mixes"]]),
            "gossip_wait_s": round(float(row[column["gossip_wait_s"]]), 3),
            "staleness": int(row[column["staleness"]]),
        }

    def learners_fields(self, stats: np.ndarray) -> dict[str, Any]:
        column = self.column
        return {
            # ranks: the radius every rank's learners had at the previous consensus round
            "consensus_radius": float(max(stats[:, column["consensus"]].max(), stats[:, column["radius"]].max())),
            "consensus_bound": finite_or_none(float(stats[:, column["bound"]].max())),
        }


def gossip_metrics(config: Config) -> GossipMetrics | None:
    """The section of a gala run (several learners, or one learner per torchrun rank); None otherwise."""
    return GossipMetrics() if config.engine.mode == "gala" else None
