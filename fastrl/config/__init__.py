"""Typed run configuration: TOML files and ``--set key=value`` overrides into dataclasses.

The sections are the schema's (``fastrl.schema``, with every key's documentation and rules), handed on here
with what reads them: ``loading`` builds a validated Config from a TOML file, a dict or overrides (each key
read by ``fastrl.tables``), ``validation`` checks what involves more than one key, the algorithm registry and
the modes, ``derived`` fills the "auto" keys that follow from others as a Config is made, ``reference`` lists
every key for ``fastrl config`` and the docs. This package stands above the algorithms and the modes; the
modules below them import their types from ``fastrl.schema``.
"""

from fastrl.config import derived  # noqa: F401  (installs the derived defaults every Config made runs)
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
from fastrl.config.validation import LAUNCH_KEYS, launch_size, validate
from fastrl.errors import ConfigError
from fastrl.schema import (
    AUTO,
    AlgoConfig,
    AtariConfig,
    Config,
    DistConfig,
    EngineConfig,
    EnvConfig,
    ModelConfig,
    ReliabilityConfig,
    RunConfig,
    resolved_bool,
    resolved_int,
)

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
