"""What a layer is: a feature built on the core (self-play, named policies, reward scaling, GALA's gossip), each one
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
- ``metrics(config) -> MetricsSection | None``: its keys of each metrics line (``fastrl.telemetry.sections``);
- ``config`` (a dataclass) and ``section``: its config section; ``check(config) -> str | None``: its checks across
  keys as the config is read (the error, or None); ``moved_keys``: core keys that were its own before it had a
  section, still read there with a warning (``fastrl.config.moved_keys``).

The core reads ``LAYERS`` and names no layer. fastrl's own are imported plainly by ``fastrl.layers.builtin``;
another package registers its own with ``register_layer``, or declares it under the ``fastrl.layers`` entry-point
group, found in every process of a run (``fastrl.registry``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from fastrl.errors import ConfigError
from fastrl.plugins import resolved
from fastrl.registry import Registry, RegistryError


@dataclass(frozen=True)
class LayerNeeds:
    """Shared memory a layer needs beside the core's buffers (``fastrl.buffers.BufferPlan``)."""

    # parameter slots of weights other than the learner's (past or other policies') that the actors play rows
    # with: a row role's slot k (``fastrl.sampling.row_roles``), ``RunBuffers.player_params(k)``
    player_slots: int = 0
    # arrays of its own, each (name, shape, dtype), read in every process as ``RunBuffers.layer_array(name)``
    arrays: tuple[tuple[str, tuple[int, ...], str], ...] = ()

    def __add__(self, other: LayerNeeds) -> LayerNeeds:
        return LayerNeeds(self.player_slots + other.player_slots, self.arrays + other.arrays)


# (config, env info, the built policy, resuming) -> (config, needs)
# the config and the env's info are typed Any here: the schema reads this module as a Config is made, so this
# module names neither (fastrl.schema.Config, fastrl.envs.EnvInfo)
PlanHook = Callable[[Any, Any, Any, bool], "tuple[Any, LayerNeeds]"]
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
    plays_rows: Callable[[Any], bool] | None = None  # with row_roles: whether they play this run's rows
    metrics: Part | None = None
    stats: tuple[str, ...] = ()  # its columns of each learner's stats row (``Control.stat_column(name)``)
    config: type | str | None = None  # its config section's dataclass (fields as the schema's: ``documented_field``)
    section: str = ""  # that section's name in a config ("": the layer's name); ``config.<section>`` reads it
    check: Part | None = None  # (config) -> the error, or None: its checks across keys, as a config is read
    # ("section.key" of the core, its key in this layer's section): keys that moved here, still read with a warning
    moved_keys: tuple[tuple[str, str], ...] = ()
    warm_up: Part | None = None  # () -> None: compiles its numba kernels once, before any run's workers start
    # its panels of ``fastrl plot``: (title, metrics key) pairs; a key's value is a number or a table of numbers
    # (a curve per name); layers giving one title share its panel
    curves: tuple[tuple[str, str], ...] = ()

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
    if layer.moved_keys and layer.config is None:
        return "moved_keys move old keys into the layer's config section: declare its config"
    for which in ("plan", "learner_extension", "row_roles", "metrics", "warm_up", "check"):
        part = getattr(layer, which)
        if part is not None and not callable(part) and not (isinstance(part, str) and ":" in part):
            return f"{which} must be a function or its 'package.module:attr' (got {part!r})"
    return None


LAYERS: Registry[Layer] = Registry("layer", check=_check)


def register_layer(layer: Layer, *, replace: bool = False) -> Layer:
    """Make ``layer`` part of every run it applies to; returns it."""
    if not isinstance(layer, Layer):
        raise RegistryError(f"register_layer takes a fastrl Layer, got {type(layer).__name__}")
    LAYERS.register(layer.name, layer, order=layer.order, replace=replace)
    return layer


def _in_order() -> list[Layer]:
    """Every registered layer by its own ``order`` (an entry point's layer too, which the registry places at 0)."""
    return sorted(LAYERS.values(), key=lambda layer: layer.order)


def layer_curves() -> dict[str, list[str]]:
    """Each panel the layers draw in ``fastrl plot``: its title and the metrics keys it holds, in the layers' order."""
    panels: dict[str, list[str]] = {}
    for layer in _in_order():
        for title, key in layer.curves:
            panels.setdefault(title, []).append(key)
    return panels


def layer_sections() -> dict[str, type]:
    """Each layer's config section: its name and dataclass, in the layers' order."""
    sections: dict[str, type] = {}
    for layer in layers_with("config"):
        name = layer.section or layer.name
        if name in sections:
            raise ConfigError(f"two layers declare the config section [{name}]")
        sections[name] = cast(type, layer.part("config"))
    return sections


def layer_section_docs() -> dict[str, str]:
    """Each layer section's one line for the config reference: its layer's summary."""
    return {layer.section or layer.name: layer.summary for layer in layers_with("config")}


def check_layers(config: Any) -> None:
    """Every layer's ``check`` of a config, in order: the first error, as a ``ConfigError``."""
    for layer in layers_with("check"):
        problem = layer.part("check")(config)
        if problem:
            raise ConfigError(problem)


def layer_moved_keys() -> dict[tuple[str, str], tuple[str, str]]:
    """Each layer's moved keys: (old section, key) -> (its section, its key)."""
    moved = {}
    for layer in _in_order():
        for old, new in layer.moved_keys:
            section, _, key = old.partition(".")
            moved[(section, key)] = (layer.section or layer.name, new)
    return moved


def layers_with(which: str) -> list[Layer]:
    """The registered layers that have a ``which`` part, in their ``order``."""
    return [layer for layer in _in_order() if getattr(layer, which) is not None]


def plan_layers(config: Any, info: Any, policy: Any, resuming: bool) -> tuple[Any, LayerNeeds]:
    """Every layer's checks, in order; the config they return and their needs, summed."""
    needs = LayerNeeds()
    for layer in layers_with("plan"):
        config, more = layer.part("plan")(config, info, policy, resuming)
        needs = needs + more
    names = [name for name, _, _ in needs.arrays]
    if len(set(names)) != len(names):
        raise ConfigError(f"two layers asked for shared arrays of one name: {sorted(names)}")
    return config, needs


def layer_stats() -> tuple[str, ...]:
    """Every registered layer's stats columns, in the layers' order: each learner's stats row holds them after
    the core's (a few numbers each, so a run has every layer's, used or not)."""
    names = [name for layer in _in_order() for name in layer.stats]
    if len(set(names)) != len(names):
        raise ConfigError(f"two layers declare a stats column of one name: {sorted(names)}")
    return tuple(names)


def warm_up_layers() -> None:
    """Every layer's ``warm_up``: their numba kernels compiled into the cache before a run starts."""
    for layer in layers_with("warm_up"):
        layer.part("warm_up")()
