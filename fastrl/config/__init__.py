"""Typed run configuration: TOML files and ``--set key=value`` overrides into dataclasses.

``schema`` holds the sections (declared with every key's documentation and rules in ``schema_learning``,
``schema_engine`` and ``schema_multiagent``), ``loading`` builds a validated Config from a TOML file, a
dict or overrides (each key read by ``fastrl.tables``), ``validation`` resolves and checks what involves
more than one key, the algorithm registry and the modes, ``reference`` lists every key for
``fastrl config`` and the docs.
"""

from fastrl.config.loading import (
    DEFAULT_JOB,
    SHIPPED_CONFIGS,
    apply_overrides,
    config_from_dict,
    config_path,
    load_config,
    parse_override,
    shipped_configs,
    tomllib,
)
from fastrl.config.reference import field_docs, reference_markdown
from fastrl.config.schema import (
    AUTO,
    AlgoConfig,
    AtariConfig,
    Config,
    DistConfig,
    EngineConfig,
    EnvConfig,
    GalaConfig,
    ModelConfig,
    MultiAgentConfig,
    ReliabilityConfig,
    RunConfig,
    SelfPlayConfig,
    resolved_bool,
    resolved_int,
)
from fastrl.config.validation import LAUNCH_KEYS, launch_size, validate
from fastrl.errors import ConfigError

__all__ = [
    "AUTO",
    "DEFAULT_JOB",
    "LAUNCH_KEYS",
    "SHIPPED_CONFIGS",
    "AlgoConfig",
    "AtariConfig",
    "Config",
    "ConfigError",
    "DistConfig",
    "EngineConfig",
    "EnvConfig",
    "GalaConfig",
    "MultiAgentConfig",
    "SelfPlayConfig",
    "ModelConfig",
    "ReliabilityConfig",
    "RunConfig",
    "apply_overrides",
    "config_from_dict",
    "config_path",
    "field_docs",
    "launch_size",
    "load_config",
    "parse_override",
    "reference_markdown",
    "resolved_bool",
    "resolved_int",
    "shipped_configs",
    "tomllib",
    "validate",
]
