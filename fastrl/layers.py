"""Layers: features built on the core (self-play, named policies, reward scaling, GALA's gossip), each one
``Layer`` object registered once.

A layer is every part it adds to a run, each optional, each a function or its ``"package.module:attr"`` path
(imported when a run needs it, so registering a layer imports none of its implementation):

- ``plan(config, info, policy, resuming) -> (config, LayerNeeds)``: its checks of the config against the env and
  the model, in the main process before anything starts (bad input: a ``ConfigError`` naming the key), and the
  shared memory it needs beside the core's buffers;
- ``learner_extension(learner) -> LearnerExtension | None``: its part in every learner's barrier
  (``fastrl.learning.extensions``), hooks run in the layers' ``order`` (lower first), its checkpoint state under
  the extension's ``key``;
- ``row_roles(spec, buffers, device) -> RowRoles`` with ``plays_rows(config)``: who plays a run's rows
  (``fastrl.sampling.row_roles``); at most one layer plays a run's rows;
- ``metrics(config) -> MetricsSection | None``: its keys of each metrics line (``fastrl.telemetry.sections``).

The core reads ``LAYERS`` and names no layer. fastrl's own are imported plainly by ``fastrl.builtin_layers``;
another package registers its own with ``register_layer``, or declares it under the ``fastrl.layers`` entry-point
group, found in every process of a run (``fastrl.registry``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fastrl.plugins import resolved
from fastrl.registry import Registry

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
Part = Callable[..., Any] | str  # a function, or its "package.module:attr"


@dataclass(frozen=True)
class Layer:
    """One feature on the core: every part it adds to a run (see the module's doc)."""

    name: str
    summary: str = ""
    order: float = 0.0  # where its learner hooks run among the other layers' (lower first)
    plan: Part | None = None
    learner_extension: Part | None = None
    row_roles: Part | None = None
    plays_rows: Callable[[Config], bool] | None = None  # with row_roles: whether they play this run's rows
    metrics: Part | None = None

    def part(self, which: str) -> Callable[..., Any]:
        """Its ``which`` part, imported where it is named by path."""
        return resolved(getattr(self, which), f"layer {self.name!r}'s {which}")


def _check(name: str, layer: Any) -> str | None:
    if not isinstance(layer, Layer):
        return f"it is {type(layer).__name__} {layer!r}, not a fastrl Layer"
    if layer.name != name:
        return f"it is registered as {name!r} but the Layer is named {layer.name!r}"
    if (layer.row_roles is None) != (layer.plays_rows is None):
        return "row_roles and plays_rows come together: who plays the rows, and in which runs"
    for which in ("plan", "learner_extension", "row_roles", "metrics"):
        part = getattr(layer, which)
        if part is not None and not callable(part) and not (isinstance(part, str) and ":" in part):
            return f"{which} must be a function or its 'package.module:attr' (got {part!r})"
    return None


LAYERS: Registry[Layer] = Registry("layer", check=_check)


def register_layer(layer: Layer, *, replace: bool = False) -> Layer:
    """Make ``layer`` part of every run it applies to; returns it."""
    LAYERS.register(layer.name if isinstance(layer, Layer) else "", layer, order=getattr(layer, "order", 0.0),
                    replace=replace)
    return layer


def layers_with(which: str) -> list[Layer]:
    """The registered layers that have a ``which`` part, in their ``order``."""
    having = (layer for layer in LAYERS.values() if getattr(layer, which) is not None)
    return sorted(having, key=lambda layer: layer.order)


def plan_layers(config: Config, info: EnvInfo, policy: Any, resuming: bool) -> tuple[Config, LayerNeeds]:
    """Every layer's checks, in order; the config they return and their needs, summed."""
    needs = LayerNeeds()
    for layer in layers_with("plan"):
        config, more = layer.part("plan")(config, info, policy, resuming)
        needs = needs + more
    return config, needs
