"""Learner extensions: the one way a layer takes part in a learner's barrier.

The learner (``fastrl.learning.learner``) runs the barrier loop of every mode: learn from the storage, step θ,
publish it, release the envs, checkpoint. A layer that must act in that loop (GALA's gossip, reward scaling, the
self-play pool, named policies) is a ``LearnerExtension``: it overrides the hooks it needs, each a no-op here,
and the learner calls every extension's hook at its point of the loop, in the order of their registrations'
``order``. The learner never names an extension: it is a part of a layer (``fastrl.layers.Layer``), and
``register_learner_extension`` registers a layer that is one extension alone.

The points of the loop, in the order one barrier reaches them:

- ``start``: before the envs are released into the first rollout (gossip: wait for the peer learners).
- ``rows_learned``: once, when built: how many of the storage's rows θ's rule learns from (its warm-up's shape).
- ``before_learning``: the storage the rule will learn from, in ``order``; each may read it (the pool rates its
  games from the raw rewards), replace it by a copy (reward scaling) or by some of its rows (named policies learn
  their own rows and hand θ's on).
- ``learned``: θ's rule has learned from it without a fault (reward scaling keeps its new statistics).
- ``reduce_gradients``: before every optimizer step of θ (gossip's allreduce of the gradients).
- ``advanced``: θ moved on by its pending update (named policies move on with it).
- ``updated``: after a barrier's update, before θ is published (gossip's ring mixes θ).
- ``publishing``: before θ of ``version`` is published (the pool draws its opponents, named policies publish).
- ``published``: after θ is published (gossip measures the consensus over every learner's published θ).
- ``state`` / ``load``: its part of the checkpoint, under its ``key`` (None: it keeps nothing).
- ``finish``: the learner sends no more (its final checkpoint is written, or the run stops).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from fastrl.layer import Layer, layers_with, register_layer

if TYPE_CHECKING:
    import torch

Storage = dict[str, np.ndarray]


class PeerFinished(Exception):
    """A peer an extension waits on (an allreduce partner) ended the run before this update: the learner ends
    here too, without it."""


class LearnerExtension:
    """A layer's part in a learner's barrier; every hook does nothing unless overridden (see the module's doc)."""

    key: str | None = None  # its entry in the checkpoint's learner state; None: it keeps nothing

    def start(self) -> None:
        """Before the envs are released into the first rollout."""

    def rows_learned(self, rows: int) -> int:
        """Of ``rows`` storage rows, how many θ's rule learns from."""
        return rows

    def before_learning(self, storage: Storage, rollout: int, env_ids: np.ndarray | None) -> Storage:
        """The storage θ's rule learns from next (``env_ids``: each slot's env, for async batches)."""
        return storage

    def learned(self) -> None:
        """θ's rule learned from the storage ``before_learning`` returned."""

    def reduce_gradients(self, grads: list[torch.Tensor], update: int) -> None:
        """θ's gradients of ``update``, before the optimizer steps them."""

    def advanced(self) -> None:
        """θ moved on by its pending update (or stayed, with none pending)."""

    def updated(self, model: torch.nn.Module, version: int) -> None:
        """A barrier's update is done: θ is ``version``, not yet published."""

    def publishing(self, model: torch.nn.Module, version: int) -> None:
        """θ of ``version`` is about to be published for the rollout that acts with it."""

    def published(self, model: torch.nn.Module, last: bool) -> None:
        """θ is published (``last``: after the run's final update, which is not published)."""

    def state(self) -> Any:
        """What a resumed run needs of it, saved under ``key``."""
        return None

    def load(self, state: Any) -> None:
        """A resumed run: its ``state`` as saved (None where the checkpoint holds none)."""

    def finish(self) -> None:
        """The learner sends no more."""


def register_learner_extension(
    name: str, factory: str | Callable[[Any], LearnerExtension | None], order: float, *, replace: bool = False
) -> None:
    """A layer that is one learner extension and nothing else (``fastrl.layers.Layer``): ``factory(learner)``
    builds it for a learner, or returns None where the run does not use it; ``order`` places its hooks."""
    register_layer(Layer(name, order=order, learner_extension=factory), replace=replace)


def extensions_for(learner: Any) -> list[LearnerExtension]:
    """The extensions a learner's run uses, in their layers' order."""
    built = (layer.part("learner_extension")(learner) for layer in layers_with("learner_extension"))
    return [extension for extension in built if extension is not None]
