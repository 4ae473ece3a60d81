"""The named policies' checks, run once before anything starts (``plan_named_policies``, a plan hook:
``fastrl.layers``): ``[multiagent]`` fits the env, the mode and the self-play settings; and the players' slots the
other named policies' parameters take."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch

from fastrl.config import Config, ConfigError
from fastrl.envs import EnvInfo
from fastrl.layer import LayerNeeds
from fastrl.layers.named_policies.policies import frozen_parameters, policy_map
from fastrl.layers.selfplay.pool import SHARED


def plan_named_policies(
    config: Config, info: EnvInfo, policy: torch.nn.Module, resuming: bool
) -> tuple[Config, LayerNeeds]:
    """The config with ``multiagent.policies`` in the env's agent order (a resumed run's frozen policies are in its
    checkpoint), and the players' slots of the other named policies' parameters."""
    config = check_policies(config, info.agent_names, policy, resuming)
    named = policy_map(config, info.agent_names)
    return config, LayerNeeds(named.slots if named else 0)


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
