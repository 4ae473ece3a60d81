"""The run configuration's schema: one typed dataclass per section, every field with its
documentation and its validation rules in ``metadata`` (``fastrl config`` and the generated
``docs/config-reference.md`` print them; ``fastrl.tables`` enforces them as a config is read).
``Config`` holds the sections, in the order the reference lists them; they are declared in
``schema_learning`` (env, algo, model), ``schema_engine`` (engine, gala, run, reliability, dist) and
``schema_multiagent`` (selfplay, multiagent).
``"auto"`` (``AUTO``) in engine.executors, actors, inline_actors and the like: chosen for the machine when a run
starts (``fastrl.process.auto_layout``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from fastrl.config.derived import resolve_derived_defaults
from fastrl.config.schema_engine import (
    DistConfig,
    EngineConfig,
    GalaConfig,
    ReliabilityConfig,
    RunConfig,
    resolved_bool,
    resolved_int,
)
from fastrl.config.schema_learning import AlgoConfig, AtariConfig, EnvConfig, ModelConfig
from fastrl.config.schema_multiagent import MultiAgentConfig, SelfPlayConfig
from fastrl.tables import AUTO
from fastrl.tables import documented_field as _f

__all__ = [
    "AUTO",
    "AlgoConfig",
    "AtariConfig",
    "Config",
    "DistConfig",
    "EngineConfig",
    "EnvConfig",
    "GalaConfig",
    "ModelConfig",
    "MultiAgentConfig",
    "ReliabilityConfig",
    "RunConfig",
    "SelfPlayConfig",
    "resolved_bool",
    "resolved_int",
]


@dataclass
class Config:
    env: EnvConfig = _f(EnvConfig(), "environment")
    engine: EngineConfig = _f(EngineConfig(), "processes and buffers")
    algo: AlgoConfig = _f(AlgoConfig(), "learning algorithm")
    gala: GalaConfig = _f(GalaConfig(), "gala mode: gossip between learners")
    selfplay: SelfPlayConfig = _f(SelfPlayConfig(), "multi-agent envs: opponents from a pool of snapshots")
    multiagent: MultiAgentConfig = _f(MultiAgentConfig(), "multi-agent envs: named policies per agent")
    model: ModelConfig = _f(ModelConfig(), "policy network")
    run: RunConfig = _f(RunConfig(), "seed, budget, logging")
    reliability: ReliabilityConfig = _f(ReliabilityConfig(), "timeouts and the watchdog")
    dist: DistConfig = _f(DistConfig(), "many machines: torch.distributed between ranks launched by torchrun")

    def __post_init__(self) -> None:
        resolve_derived_defaults(self.engine.mode, self.algo, self.model)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
