"""The named policies' keys of the metrics lines (``fastrl.telemetry.sections``): each policy's return and the
policies' Elo ratings between them."""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from fastrl.config import Config
from fastrl.layers.agent_rows.elo import PolicyRatings
from fastrl.telemetry.sections import MetricsSection, finite_or_none


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


def named_policy_metrics(config: Config) -> NamedPolicyMetrics | None:
    return NamedPolicyMetrics(config) if config.multiagent.policies else None
