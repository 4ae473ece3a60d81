"""What a layer adds to a run's plan before anything starts: its checks of the config against the env and the
model, and the shared memory it needs beside the core's buffers.

``plan_run`` (``fastrl.process.run_plan``) calls every registered hook once, in the main process, after the
process layout is resolved; a hook returns the config (possibly normalised: it is what the run records) and its
``LayerNeeds``. Bad input is a ``ConfigError`` naming the key. A layer registers its hook from its own package
(``register_plan_hook``), by path, so this registry imports nothing of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fastrl.plugins import resolved

if TYPE_CHECKING:
    from fastrl.envs import EnvInfo
    from fastrl.schema import Config


@dataclass(frozen=True)
class LayerNeeds:
    """Shared memory a layer needs beside the core's buffers (``fastrl.buffers.BufferPlan``)."""

    pool: int = 0  # parameter slots of the pool segment (past or other policies' weights the actors load)
    opponents: int = 0  # entries of each rollout parity's opponent table (one per env)

    def __add__(self, other: LayerNeeds) -> LayerNeeds:
        return LayerNeeds(self.pool + other.pool, self.opponents + other.opponents)


# (config, env info, the built policy, resuming) -> (config, needs)
PlanHook = Callable[["Config", "EnvInfo", Any, bool], "tuple[Config, LayerNeeds]"]

_HOOKS: dict[str, str | PlanHook] = {}


def register_plan_hook(name: str, hook: str | PlanHook) -> None:
    """Make a layer's plan hook known (``hook``: the function, or its ``"package.module:attr"`` path)."""
    _HOOKS[name] = hook


def plan_layers(config: Config, info: EnvInfo, policy: Any, resuming: bool) -> tuple[Config, LayerNeeds]:
    """Every registered layer's checks, in registration order; the config they return and their needs, summed."""
    needs = LayerNeeds()
    for name, hook in _HOOKS.items():
        config, more = resolved(hook, f"plan hook {name!r}")(config, info, policy, resuming)
        needs = needs + more
    return config, needs
