"""The multi-agent layer's checks, all in one place, run once before anything starts (``plan_multiagent``, a plan
hook: ``fastrl.layers``): a multi-agent env's rows stay whole in every share of the envs, the algorithm
learns from agent rows, the self-play pool's and the named policies' settings fit the mode and the env; and the
shared memory they need (the pool's weight slots, the opponent tables).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch

from fastrl.algos.registry import learns_agent_rows, names
from fastrl.config import Config, ConfigError
from fastrl.envs import EnvInfo
from fastrl.layers import LayerNeeds
from fastrl.modes import mode_of
from fastrl.multiagent.named_policies import frozen_parameters, policy_map
from fastrl.multiagent.selfplay import OPPONENTS, POOL, SHARED, pool_slots


def plan_multiagent(
    config: Config, info: EnvInfo, policy: torch.nn.Module, resuming: bool
) -> tuple[Config, LayerNeeds]:
    """Every check of this layer; the config with ``multiagent.policies`` in the env's agent order, and the pool
    slots and opponent tables the run needs (none without a pool or named policies)."""
    check_selfplay(config)
    check_agents(config, info)
    check_scripted(config, info)
    # multiagent.policies, in the env's agent order; a resumed run's frozen policies are in its checkpoint
    config = check_policies(config, info.agent_names, policy, resuming)
    if config.selfplay.opponents == POOL:
        games = config.engine.envs // info.agents
        return config, LayerNeeds(
            pool_slots(config.selfplay, mode_of(config).run_ahead), ((OPPONENTS, (2, games), "int64"),)
        )
    named = policy_map(config, info.agent_names)  # the other named policies' parameters are players' slots
    return config, LayerNeeds(named.slots if named else 0)


def check_scripted(config, info) -> None:
    """``selfplay.scripted`` builds for the env's rows (each actor builds its own once the run starts)."""
    from fastrl.models.scripted import build_scripted

    if config.selfplay.scripted_share > 0:
        try:
            build_scripted(config.selfplay.scripted, info)
        except ValueError as exc:
            raise ConfigError(f"selfplay.scripted = {config.selfplay.scripted!r}: {exc}") from None


def check_agents(config, info) -> None:
    """A multi-agent env's k rows stay together: ``engine.envs`` and every rank's and executor's share hold whole
    envs; only the losses that read the rows' ``live`` field learn from them (a waiting agent's row must not)."""
    agents, engine = info.agents, config.engine
    if agents == 1:
        if config.selfplay.opponents == POOL:
            raise ConfigError(
                f"selfplay.opponents = 'pool' needs a multi-agent env (PettingZoo); env {config.env.id!r} has one agent"
            )
        return
    games = engine.envs // agents
    if engine.envs % agents:  # under torchrun: each rank's share
        raise ConfigError(
            f"engine.envs = {engine.envs} counts agent rows: env {config.env.id!r} has {agents} agents, so it must be "
            f"a multiple of {agents} (under torchrun, each rank's share)"
        )
    if config.selfplay.opponents == POOL and (engine.mode not in ("sync", "hts") or engine.learners > 1):
        raise ConfigError(
            f"selfplay.opponents = 'pool' draws each env's opponent for a rollout at a barrier, as the rollout's "
            f"weights are published: engine.mode = 'sync' or 'hts' with one learner (got engine.mode = "
            f"{engine.mode!r}, engine.learners = {engine.learners})"
        )
    if not learns_agent_rows(config.algo.name):
        able = [name for name in names() if learns_agent_rows(name)]
        raise ConfigError(
            f"algo.name = {config.algo.name!r} does not learn from multi-agent envs (env {config.env.id!r}, {agents} "
            f"agents): {' or '.join(map(repr, able))}, whose losses skip waiting and absent agents (an algorithm "
            "says so in its registration: agent_rows = True)"
        )
    if engine.mode == "gala" and (engine.envs // engine.learners) % agents:
        raise ConfigError(
            f"engine.envs = {engine.envs} over engine.learners = {engine.learners}: each gala learner's envs must hold "
            f"whole envs of {agents} agents (env {config.env.id!r}), so engine.envs / engine.learners must be a "
            f"multiple of {agents}"
        )
    executors = engine.executors
    if isinstance(executors, int) and executors > games:
        raise ConfigError(
            f"engine.executors = {executors} is more than the {games} envs of {agents} agents in engine.envs = "
            f"{engine.envs}: an env's agents are stepped by one executor"
        )


def check_policies(
    config: Config, agent_names: Sequence[str], model: torch.nn.Module, resuming: bool = False
) -> Config:
    """Bad ``[multiagent]`` input refused before work starts, naming the key; returns the config with
    ``multiagent.policies`` in the env's agent order (the run's ``config.toml`` and its metrics read it so).
    ``resuming``: the frozen policies play the parameters the run's checkpoint kept, so their files are not read
    (they may be gone)."""
    options, engine = config.multiagent, config.engine
    mapping, frozen = options.policies, options.frozen
    if not mapping:
        if frozen:
            raise ConfigError(
                f"multiagent.frozen names {sorted(frozen)}, but multiagent.policies is empty: map agents to "
                'policies first (multiagent.policies = {agent = "name", ...})'
            )
        return config
    env = config.env.id
    if len(agent_names) < 2:
        raise ConfigError(f"multiagent.policies maps agents to policies; env {env!r} has one agent")
    missing = [agent for agent in agent_names if agent not in mapping]
    unknown = [agent for agent in mapping if agent not in agent_names]
    if missing or unknown:
        raise ConfigError(
            f"multiagent.policies must map every agent of env {env!r} ({', '.join(agent_names)}) to a policy name; "
            + "; ".join(
                part
                for part in (
                    f"missing: {', '.join(missing)}" if missing else "",
                    f"not agents of the env: {', '.join(map(str, unknown))}" if unknown else "",
                )
                if part
            )
        )
    bad = [f"{agent} = {name!r}" for agent, name in mapping.items() if not isinstance(name, str) or not name]
    if bad:
        raise ConfigError(f"multiagent.policies: each agent's policy is a name (a non-empty string); got {bad}")
    strays = [name for name in frozen if name not in mapping.values()]
    if strays:
        raise ConfigError(
            f"multiagent.frozen names {strays}, which no agent plays (multiagent.policies' names: "
            f"{sorted(set(mapping.values()))})"
        )
    if all(name in frozen for name in mapping.values()):
        raise ConfigError("multiagent.frozen freezes every policy of multiagent.policies: nothing would learn")
    if config.selfplay.opponents != SHARED:
        raise ConfigError(
            "multiagent.policies fixes which policy plays each agent; selfplay.opponents = 'pool' draws them: "
            "use one or the other"
        )
    if engine.mode not in ("sync", "hts") or engine.learners > 1:
        raise ConfigError(
            "multiagent.policies: a named policy's parameters are published for a rollout at the barrier of one "
            f"learner: engine.mode = 'sync' or 'hts' with one learner (got engine.mode = {engine.mode!r}, "
            f"engine.learners = {engine.learners})"
        )
    for name in frozen if not resuming else ():
        frozen_parameters(config, name, model)  # found, readable and fitting the run's model, or refused
    ordered = copy.deepcopy(config)
    ordered.multiagent.policies = {agent: mapping[agent] for agent in agent_names}
    return ordered


def check_selfplay(config: Config) -> None:
    """The pool's fixed players: each needs the pool, a scripted one needs its share and its share a player."""
    selfplay = config.selfplay
    shares = {"selfplay.random_share": selfplay.random_share, "selfplay.scripted_share": selfplay.scripted_share}
    for key, share in shares.items():
        if share > 0 and selfplay.opponents != POOL:
            raise ConfigError(
                f"{key} = {share} plays a share of the games against a fixed player instead of a pool snapshot: "
                f"set selfplay.opponents = 'pool' (now {selfplay.opponents!r})"
            )
    if selfplay.random_share + selfplay.scripted_share > 1.0:
        raise ConfigError(
            f"selfplay.random_share + selfplay.scripted_share = {selfplay.random_share + selfplay.scripted_share:g}: "
            "they share one draw per game, so together at most 1"
        )
    if bool(selfplay.scripted) != (selfplay.scripted_share > 0):
        raise ConfigError(
            f"selfplay.scripted = {selfplay.scripted!r} and selfplay.scripted_share = {selfplay.scripted_share}: set "
            "both (a player and the share of the games it plays) or neither"
        )
