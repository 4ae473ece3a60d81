"""The run configuration's schema: one typed dataclass per section, every field with its
documentation and its validation rules in ``metadata`` (``fastrl config`` and the generated
``docs/config-reference.md`` print them; ``fastrl.tables`` enforces them as a config is read).
``Config`` holds the core's sections, in the order the reference lists them; they are declared in
``learning`` (env, algo, model) and ``engine`` (engine, run, reliability, dist). A layer's own section
(``fastrl.layers.Layer.config``) is read, checked and listed as these are, and held in ``Config.sections``:
``config.<section>`` reads it there.
``"auto"`` (``AUTO``) in engine.executors, actors, inline_actors and the like: chosen for the machine when a run
starts (``fastrl.process.auto_layout``). The ``"auto"`` keys that follow from others (the mode's algorithm, its
network, the normalisation) are filled as a ``Config`` is made, by what ``fastrl.config`` installs with
``install_derived_defaults``: they read the algorithm registry and the modes, which stand above this schema.

This package imports nothing of fastrl above ``fastrl.tables`` and ``fastrl.errors``: every module reads its
types from here; loading, validation and the reference are ``fastrl.config``'s."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastrl.errors import ConfigError
from fastrl.registry import Registry
from fastrl.schema.engine import (
    DistConfig,
    EngineConfig,
    ReliabilityConfig,
    RunConfig,
    resolved_bool,
    resolved_int,
)
from fastrl.schema.learning import AlgoConfig, AtariConfig, EnvConfig, ModelConfig
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
    "ModelConfig",
    "ReliabilityConfig",
    "RunConfig",
    "install_derived_defaults",
    "resolved_bool",
    "resolved_int",
]


# (engine.mode, the algo section, the model section) -> None: fills their "auto" keys that follow from the others
DerivedDefaults = Callable[[str, AlgoConfig, ModelConfig], None]
DERIVED_DEFAULTS: Registry[DerivedDefaults] = Registry(
    "derived default", check=lambda name, resolve: None if callable(resolve) else "not a function"
)


def install_derived_defaults(resolve: DerivedDefaults, name: str = "fastrl") -> None:
    """What every ``Config`` made runs on its mode, algo and model sections, in order (fastrl's own:
    ``fastrl.config.derived``, installed when ``fastrl`` is imported)."""
    DERIVED_DEFAULTS.register(name, resolve)


@dataclass
class Config:
    env: EnvConfig = _f(EnvConfig(), "environment")
    engine: EngineConfig = _f(EngineConfig(), "processes and buffers")
    algo: AlgoConfig = _f(AlgoConfig(), "learning algorithm")
    model: ModelConfig = _f(ModelConfig(), "policy network")
    run: RunConfig = _f(RunConfig(), "seed, budget, logging")
    reliability: ReliabilityConfig = _f(ReliabilityConfig(), "timeouts and the watchdog")
    dist: DistConfig = _f(DistConfig(), "many machines: torch.distributed between ranks launched by torchrun")
    # the layers' own sections by name (fastrl.layers.Layer.config), each one's defaults where it was not given
    sections: dict[str, Any] = dataclasses.field(default_factory=dict, metadata={"layers": True})

    def __post_init__(self) -> None:
        from fastrl.layer import layer_sections  # the layers stand above the schema; read when a Config is made

        given = self.sections
        self.sections = {name: given[name] if name in given else cls() for name, cls in layer_sections().items()}
        unknown = sorted(set(given) - set(self.sections))
        if unknown:
            raise ConfigError(f"no layer declares the config section(s) {unknown}")
        if not DERIVED_DEFAULTS.names():
            raise RuntimeError("a Config was made before fastrl.config installed its derived defaults")
        for resolve in DERIVED_DEFAULTS.values():
            resolve(self.engine.mode, self.algo, self.model)

    def __getattr__(self, name: str) -> Any:
        """A layer's section (``config.<section>``); only names that are no field of the core's get here."""
        sections = self.__dict__.get("sections")
        if sections is None or name not in sections:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute or layer section {name!r}")
        return sections[name]

    def __setattr__(self, name: str, value: Any) -> None:
        sections = self.__dict__.get("sections")
        if sections is not None and name in sections:
            sections[name] = value
        else:
            object.__setattr__(self, name, value)

    def to_dict(self) -> dict:
        """Every section, the layers' among the core's, as a config file holds them."""
        core = {
            f.name: dataclasses.asdict(getattr(self, f.name)) for f in dataclasses.fields(self) if f.name != "sections"
        }
        return {**core, **{name: dataclasses.asdict(section) for name, section in self.sections.items()}}
