"""What an env's action space is, as fastrl stores, samples and steps it.

Three kinds, one path (``fastrl.models.distributions`` samples and scores each):

- ``discrete``: ``Discrete(n)``; one int64 per step, one uniform ``u`` per step (the slot layout
  every discrete run always had: ``action`` and ``u`` are scalars per row).
- ``multi_discrete``: ``MultiDiscrete(nvec)``; D = ``nvec.size`` int64 per step, one ``u`` per
  dimension; independent categoricals whose logits sit side by side in the policy head.
- ``box``: a float ``Box``; D = ``prod(shape)`` float32 per step (flattened), one ``u`` per
  dimension; a diagonal Gaussian whose head is D means then D log-stds. The env is stepped with
  the action clipped to the bounds; the slot keeps the unclipped sample its log-prob is of.

Pure data (no torch, no numba): executors import it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fastrl.errors import FastrlError

DISCRETE, MULTI_DISCRETE, BOX = "discrete", "multi_discrete", "box"


class UnsupportedEnvError(FastrlError, ValueError):
    """An env fastrl cannot take (its id, its factory, its spaces); the message names what and why."""


@dataclass(frozen=True)
class ActionSpec:
    kind: str
    nvec: tuple[int, ...] = ()  # categories per dimension (discrete: (n,))
    low: tuple[float, ...] = ()  # box bounds, flattened (may be +-inf)
    high: tuple[float, ...] = ()
    shape: tuple[int, ...] = ()  # the env's own action shape (box and multi_discrete are stored flat)

    @classmethod
    def discrete(cls, n: int) -> ActionSpec:
        return cls(DISCRETE, nvec=(int(n),))

    @property
    def dims(self) -> int:
        """Uniform numbers the executor draws per step (and action components stored)."""
        return 1 if self.kind == DISCRETE else (len(self.low) if self.kind == BOX else len(self.nvec))

    @property
    def head_size(self) -> int:
        """Columns of the policy head: logits (per dimension, side by side) or means then log-stds."""
        return 2 * self.dims if self.kind == BOX else sum(self.nvec)

    @property
    def slot_shape(self) -> tuple[int, ...]:
        """The per-row shape of the slot's ``action`` and ``u`` fields: () keeps discrete runs' layout."""
        return () if self.kind == DISCRETE else (self.dims,)

    @property
    def slot_dtype(self) -> str:
        return "float32" if self.kind == BOX else "int64"


def action_spec_of(env_id: str, space) -> ActionSpec:
    """The ``ActionSpec`` of a gymnasium action space, or an ``UnsupportedEnvError`` naming it."""
    import gymnasium as gym

    if isinstance(space, gym.spaces.Discrete):
        return ActionSpec.discrete(int(space.n))
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = tuple(int(n) for n in np.asarray(space.nvec).ravel())
        if not nvec or min(nvec) < 1:
            raise _unsupported(env_id, space, "every dimension needs at least one category")
        return ActionSpec(MULTI_DISCRETE, nvec=nvec, shape=tuple(space.shape))
    if isinstance(space, gym.spaces.Box):
        if np.dtype(space.dtype).kind != "f":
            raise _unsupported(
                env_id, space, "a Box of actions must be floating point (integer actions: MultiDiscrete)"
            )
        low = tuple(float(x) for x in np.asarray(space.low, np.float64).ravel())
        high = tuple(float(x) for x in np.asarray(space.high, np.float64).ravel())
        if not low:
            raise _unsupported(env_id, space, "a Box of actions needs at least one dimension")
        if any(math.isnan(x) for x in low + high) or any(lo > hi for lo, hi in zip(low, high)):
            raise _unsupported(env_id, space, "its bounds are NaN or low > high")
        return ActionSpec(BOX, low=low, high=high, shape=tuple(space.shape))
    raise _unsupported(env_id, space, "fastrl takes Discrete, MultiDiscrete and float Box action spaces")


def _unsupported(env_id: str, space, why: str) -> UnsupportedEnvError:
    return UnsupportedEnvError(f"env {env_id!r}: action space {space} is not supported: {why}")
