"""The agent rows' checks, run once before anything starts (``plan_agent_rows``, a plan hook: ``fastrl.layers``): a
multi-agent env's rows stay whole in every share of the envs, and the algorithm learns from agent rows."""

from __future__ import annotations

import torch

from fastrl.algos.registry import learns_agent_rows, names
from fastrl.config import Config, ConfigError
from fastrl.envs import EnvInfo
from fastrl.layer import LayerNeeds


def plan_agent_rows(
    config: Config, info: EnvInfo, policy: torch.nn.Module, resuming: bool
) -> tuple[Config, LayerNeeds]:
    """The agent rows' checks; they need no shared memory of their own."""
    check_agents(config, info)
    return config, LayerNeeds()


def check_agents(config, info) -> None:
    """A multi-agent env's k rows stay together: ``engine.envs`` and every rank's and executor's share hold whole
    envs; only the losses that read the rows' ``live`` field learn from them (a waiting agent's row must not)."""
    agents, engine = info.agents, config.engine
    if agents == 1:
        return
    games = engine.envs // agents
    if engine.envs % agents:  # under torchrun: each rank's share
        raise ConfigError(
            f"engine.envs = {engine.envs} counts agent rows: env {config.env.id!r} has {agents} agents, so it must be "
            f"a multiple of {agents} (under torchrun, each rank's share)"
        )
    if not learns_agent_rows(config.algo.name):
        able = [name for name in names() if learns_agent_rows(name)]
        raise ConfigError(
            f"algo.name = {config.algo.name!r} does not learn from multi-agent envs (env {config.env.id!r}, {agents} "
            f"agents): {' or '.join(map(repr, able))}, whose losses skip waiting and absent agents (an algorithm "
            "says so in its registration: agent_rows = True)"
        )
    if engine.learners > 1 and (engine.envs // engine.learners) % agents:
        raise ConfigError(
            f"engine.envs = {engine.envs} over engine.learners = {engine.learners}: each learner's envs must hold "
            f"whole envs of {agents} agents (env {config.env.id!r}), so engine.envs / engine.learners must be a "
            f"multiple of {agents}"
        )
    executors = engine.executors
    if isinstance(executors, int) and executors > games:
        raise ConfigError(
            f"engine.executors = {executors} is more than the {games} envs of {agents} agents in engine.envs = "
            f"{engine.envs}: an env's agents are stepped by one executor"
        )
