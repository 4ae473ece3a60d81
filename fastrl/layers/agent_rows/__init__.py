"""The agent rows of a multi-agent env (PettingZoo, docs/multi-agent.md) as a layer: whole in every share of the
envs, learned by an algorithm that reads them. The self-play pool and named policies build on it
(``fastrl.layers.selfplay``, ``fastrl.layers.named_policies``); the Elo ratings they share are ``elo``."""

from __future__ import annotations

from fastrl.layer import Layer, register_layer

RATINGS = "Elo rating (against the self-play pool, or between named policies)"  # the panel of fastrl plot they share

LAYER = register_layer(
    Layer(
        "multiagent",
        "a multi-agent env's agent rows: whole in every share of the envs, learned by an algorithm that reads them",
        plan="fastrl.layers.agent_rows.checks:plan_agent_rows",
    )
)
