"""Metrics sections: the one way a layer adds its own keys to each metrics line.

The telemetry (``fastrl.telemetry.metrics``) writes what every run has (frames, returns, losses, timing); a
layer with figures of its own names a factory as its
``metrics`` part (``fastrl.layers.Layer``), by path. ``factory(config)`` builds its section for a run, or
returns None where the run does not use it. The telemetry hands every finished episode to each section and
merges each section's ``fields`` into every line, in the layers' order.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fastrl.layer import Layer, layers_with, register_layer

if TYPE_CHECKING:
    import numpy as np

    from fastrl.config import Config


def finite_or_none(x: float) -> float | None:
    """JSON has no NaN: a figure with nothing behind it yet (a mean of no episodes) is null."""
    return float(x) if math.isfinite(x) else None


class MetricsSection:
    """A layer's keys of the metrics lines; both hooks do nothing unless overridden."""

    def episode(self, env: int, ret: float, resumed: bool) -> None:
        """Env ``env``'s episode ended with return ``ret`` (``resumed``: one of the stopped run's last episodes,
        which a resumed run's windows start with)."""

    def fields(self, stats: np.ndarray) -> dict[str, Any]:
        """Its keys of the next line; ``stats``: the first learner's stats row (``fastrl.buffers.control.Stat``)."""
        return {}

    def learner_fields(self, row: np.ndarray) -> dict[str, Any]:
        """With several learners (gala): its keys of learner ``row``'s entry in each line's ``learners``."""
        return {}

    def learners_fields(self, stats: np.ndarray) -> dict[str, Any]:
        """With several learners: its keys of the line from every learner's row (``stats``: [learners, columns])."""
        return {}


def register_metrics_section(
    name: str, factory: str | Callable[[Any], MetricsSection | None], *, replace: bool = False
) -> None:
    """A layer that is one metrics section and nothing else (``fastrl.layers.Layer``'s ``metrics``)."""
    register_layer(Layer(name, metrics=factory), replace=replace)


def sections_for(config: Config) -> list[MetricsSection]:
    """The sections a run's metrics carry, in their layers' order."""
    built = (layer.part("metrics")(config) for layer in layers_with("metrics"))
    return [section for section in built if section is not None]
