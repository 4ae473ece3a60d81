"""The multi-agent layer's keys of the metrics lines (``fastrl.telemetry.sections``): the self-play pool's Elo
rating and scores, and each named policy's return and rating."""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from fastrl.buffers.control import layer_columns
from fastrl.config import Config
from fastrl.layers import layer_stats
from fastrl.multiagent.policy_ratings import PolicyRatings
from fastrl.multiagent.selfplay import POOL
from fastrl.telemetry.sections import MetricsSection, finite_or_none


class PoolMetrics(MetricsSection):
    """The learning seat's rating and scores against the pool (``fastrl.multiagent.selfplay``), from the stats row."""

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


class NamedPolicyMetrics(MetricsSection):
    """Each named policy's mean return over its rows' episodes, and the policies' Elo ratings from the games they
    play against each other (``multiagent.policies``, in the env's agent order once planned)."""

    def __init__(self, config: Config):
        named = list(config.multiagent.policies.values())
        self.policy_of_env = [named[e % len(named)] for e in range(config.engine.envs)]
        self.returns: dict[str, deque[float]] = {
            name: deque(maxlen=config.run.return_window) for name in dict.fromkeys(named)
        }
        self.ratings = PolicyRatings(self.policy_of_env, len(named), config.selfplay.elo_k)

    def episode(self, env: int, ret: float, resumed: bool) -> None:
        self.returns[self.policy_of_env[env]].append(ret)
        if not resumed:
            self.ratings.add(env, ret)

    def fields(self, stats: np.ndarray) -> dict[str, Any]:
        return {
            "policy_returns": {
                name: finite_or_none(float(np.mean(returns))) if returns else None
                for name, returns in self.returns.items()
            },
            "policy_elo": {name: round(r, 2) for name, r in self.ratings.ratings.items()},
            "policy_games": self.ratings.games,
        }


def pool_metrics(config: Config) -> PoolMetrics | None:
    return PoolMetrics(config) if config.selfplay.opponents == POOL else None


def named_policy_metrics(config: Config) -> NamedPolicyMetrics | None:
    return NamedPolicyMetrics(config) if config.multiagent.policies else None
