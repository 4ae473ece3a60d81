"""Row roles: who plays each row of the buffers, and whether a loss reads it (docs/extending.md, "A row role").

A multi-agent env's agents are rows of their own (row e: env e // k's agent e mod k). By default the learner's
weights play every row. A row role hands some rows to other players, and the executors and actors ask it only:

- the executors mark the rows no loss reads (``unlearned_rows``): their ``live`` is ``UNLEARNED``
  (``fastrl.envs.base``), whatever the env says;
- the actors forward each requested row with the player ``slots`` names for the rollout acting with a version:
  -1, the learner's weights; ``k`` >= 0, either the model the role built for ``k`` itself (``model``: e.g. a
  scripted player) or, where it built none, the parameters in the players' slot ``k``
  (``fastrl.buffers``), written by the learner's side of the layer.

Every answer must follow from the config, the version and what the requested rows hold (written before they are
requested), never from timing or the process layout, so a run stays bit-identical across layouts.

Row roles are a part of a layer (``fastrl.layers.Layer``: ``row_roles`` and ``plays_rows``);
``register_row_roles(name, applies, factory)`` registers a layer that is one kind of row role alone.
``applies(config)`` says whether it plays a run's rows (at most one layer may), and ``factory(spec, buffers,
device)`` builds it in each executor (``device`` None: it forwards nothing) and each actor (the device it forwards
on). ``row_roles_for`` finds the one that applies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import numpy as np

from fastrl.errors import ConfigError
from fastrl.layer import Layer, layers_with, register_layer
from fastrl.registry import RegistryError

if TYPE_CHECKING:  # annotations only: the executors never import torch for this
    import torch

    from fastrl.config import Config


class RowRoles(Protocol):
    """Who plays a run's rows; built once per executor and per actor."""

    def unlearned_rows(self) -> np.ndarray:
        """[envs] bool, per global row: whether no loss reads it (the executors write its ``live`` as UNLEARNED)."""
        ...

    def slots(self, envs: np.ndarray, rows: np.ndarray, version: int) -> np.ndarray:
        """For requested global rows ``envs`` (their observations in the slots' flat rows ``rows``) of the rollout
        acting with ``version``: each one's player, an int64 array: -1 for the learner's weights, else a slot
        (``model``'s, or a players' parameter slot)."""
        ...

    def model(self, slot: int) -> torch.nn.Module | None:
        """The model the actor forwards ``slot``'s rows with where the role built it (on the factory's device), or
        None: the parameters in the players' slot ``slot``, loaded into a copy of the run's model."""
        ...


Factory = Callable[..., RowRoles]  # (spec, buffers, device) -> RowRoles


def register_row_roles(
    name: str, applies: Callable[[Config], bool], factory: Factory | str, *, replace: bool = False
) -> Layer:
    """A layer that is one kind of row role and nothing else (``fastrl.layers.Layer``): ``applies(config)`` says
    whether it plays a run's rows, ``factory(spec, buffers, device)`` builds it (or its ``"package.module:attr"``,
    imported only when a run it applies to starts)."""
    if not callable(applies):
        raise RegistryError(f"row roles {name!r}: applies must be a function of the config (got {applies!r})")
    return register_layer(Layer(name, row_roles=factory, plays_rows=applies), replace=replace)


def row_roles_kind(config: Config) -> Layer | None:
    """The layer whose row roles play ``config``'s rows, or None: the learner's weights play every row."""
    applying = [
        layer for layer in layers_with("row_roles") if layer.plays_rows is not None and layer.plays_rows(config)
    ]
    if len(applying) > 1:
        raise ConfigError(
            f"more than one kind of row role applies to this run ({', '.join(k.name for k in applying)}): "
            "each row has one player"
        )
    return applying[0] if applying else None


def row_roles_for(spec, buffers, device: torch.device | None = None) -> RowRoles | None:
    """The run's row roles (``device``: where an actor forwards; None in an executor), or None where no layer
    plays its rows."""
    layer = row_roles_kind(spec.config)
    return None if layer is None else layer.part("row_roles")(spec, buffers, device)
