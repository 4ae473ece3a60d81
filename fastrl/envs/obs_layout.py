"""How a Dict observation becomes one row of the slots' single ``obs`` array, and back.

The slots hold ``obs`` as one array of one dtype, so a ``gymnasium.spaces.Dict`` is laid out
as one row per step, in ``gymnasium.spaces.flatten``'s order (a Dict iterates its keys sorted
unless it was built from an OrderedDict; nested Dicts depth first):

- **flat**: every part is a Box that is not an image. The row is float32 and is exactly
  ``gymnasium.spaces.flatten(space, obs)`` (each part flattened and cast to float32, integers
  not scaled), so every model for flat observations (``mlp``) takes it unchanged.
- **packed**: one part is a uint8 image (a rank-3 Box, ``[H, W, C]`` or ``[C, H, W]``) beside
  vector parts. Stored as float32 the image would take four times the memory, so the row is
  bytes: the image as uint8, each vector part as float32, every part at a byte offset aligned to
  8 so a float32 part can be viewed in place (``numpy.view``/``torch.Tensor.view(torch.float32)``).
  The ``multi`` model (``fastrl.models.multi``) unpacks it.

Pure data and numpy (no torch): executors import it, and it is pickled to every worker with
the env's ``EnvInfo``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fastrl.envs.actions import UnsupportedEnvError

ALIGN = 8  # byte alignment of every part of a packed row (float64-safe; float32 needs 4)
_TAKES = ("a Dict observation takes Box parts: float or integer vectors (flattened to float32) "
          "and at most one uint8 image of rank 3 ([H, W, C] or [C, H, W])")


@dataclass(frozen=True)
class ObsPart:
    key: tuple[str, ...]  # the path of keys to this Box (one key unless Dicts are nested)
    dtype: str  # as stored in the row: "uint8" (the image) or "float32"
    shape: tuple[int, ...]  # the space's own shape
    offset: int  # bytes from the start of the row
    image: bool = False

    @property
    def name(self) -> str:
        return ".".join(self.key)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class ObsLayout:
    """Where each part of a Dict observation sits in its row (see the module's docstring)."""

    parts: tuple[ObsPart, ...]  # in gymnasium.spaces.flatten order, offsets increasing
    row_bytes: int
    packed: bool  # True: a uint8 byte row holding an image; False: a float32 row (flatten's)
    channels_last: bool = False  # the image part is [H, W, C] (else [C, H, W])

    @property
    def row_dtype(self) -> np.dtype:
        return np.dtype(np.uint8) if self.packed else np.dtype(np.float32)

    @property
    def row_shape(self) -> tuple[int, ...]:
        return (self.row_bytes // self.row_dtype.itemsize,)

    @property
    def image(self) -> ObsPart | None:
        return next((part for part in self.parts if part.image), None)

    @property
    def vectors(self) -> tuple[ObsPart, ...]:
        return tuple(part for part in self.parts if not part.image)

    @property
    def vector_size(self) -> int:
        return sum(part.size for part in self.vectors)

    def view(self, row: np.ndarray, part: ObsPart) -> np.ndarray:
        """``part`` of one row as an array of its shape and stored dtype, a view into ``row``."""
        raw = row.view(np.uint8)[part.offset : part.offset + part.nbytes]
        return raw.view(part.dtype).reshape(part.shape)

    def pack(self, obs: dict, row: np.ndarray | None = None) -> np.ndarray:
        """A Dict observation -> its row (unchecked: the env adapter checks what envs return)."""
        row = np.zeros(self.row_shape, self.row_dtype) if row is None else row
        for part in self.parts:
            self.view(row, part)[...] = value_at(obs, part.key)
        return row

    def unpack(self, row: np.ndarray) -> dict:
        """A row -> the nested dict of its parts (copies, in their stored dtypes)."""
        out: dict = {}
        for part in self.parts:
            *outer, last = part.key
            node = out
            for key in outer:
                node = node.setdefault(key, {})
            node[last] = self.view(row, part).copy()
        return out


def value_at(obs, key: tuple[str, ...]):
    """The value at ``key``'s path in a (nested) dict observation; KeyError names the missing part."""
    for depth, name in enumerate(key):
        if not isinstance(obs, dict) or name not in obs:
            raise KeyError(".".join(key[: depth + 1]))
        obs = obs[name]
    return obs


def obs_layout_of(env_id: str, space) -> ObsLayout:
    """The layout of a ``gymnasium.spaces.Dict``, or an ``UnsupportedEnvError`` naming the key and space."""
    leaves = list(_leaves(env_id, space, ()))
    images = [key for key, box in leaves if _is_image(box)]
    if len(images) > 1:
        raise _unsupported(env_id, images[1], space_at(space, images[1]),
                           f"a second uint8 image (the first is {'.'.join(images[0])!r}); {_TAKES}")
    if not images:
        parts, offset = [], 0
        for key, box in leaves:
            part = ObsPart(key, "float32", tuple(box.shape), offset)
            parts.append(part)
            offset += part.nbytes
        return ObsLayout(tuple(parts), offset, packed=False)
    parts, offset = [], 0
    for key, box in leaves:
        image = _is_image(box)
        part = ObsPart(key, "uint8" if image else "float32", tuple(box.shape), offset, image)
        parts.append(part)
        offset = _aligned(offset + part.nbytes)
    image = next(part for part in parts if part.image)
    return ObsLayout(tuple(parts), max(offset, ALIGN), packed=True, channels_last=_channels_last(image.shape))


def space_at(space, key: tuple[str, ...]):
    for name in key:
        space = space.spaces[name]
    return space


def _leaves(env_id: str, space, key: tuple[str, ...]):
    """(key path, Box) of every part, in flatten's order (the Dict's own key order, depth first)."""
    import gymnasium as gym

    if isinstance(space, gym.spaces.Dict):
        if not space.spaces:
            raise _unsupported(env_id, key, space, "an empty Dict has nothing to observe")
        for name, sub in space.spaces.items():
            if not isinstance(name, str):
                raise _unsupported(env_id, key + (repr(name),), sub, "Dict keys must be strings")
            yield from _leaves(env_id, sub, key + (name,))
        return
    if not isinstance(space, gym.spaces.Box):
        raise _unsupported(env_id, key, space, _TAKES)
    if np.dtype(space.dtype).kind not in "fiu":
        raise _unsupported(env_id, key, space, f"a Box of dtype {space.dtype}; {_TAKES}")
    if math.prod(space.shape) == 0:
        raise _unsupported(env_id, key, space, "a Box with no elements")
    yield key, space


def _is_image(box) -> bool:
    return np.dtype(box.dtype) == np.uint8 and len(box.shape) == 3


def _channels_last(shape: tuple[int, ...]) -> bool:
    """[H, W, C] when the last axis is the smaller of the outer two (84x84x3 is HWC, 3x84x84 CHW);
    a tie reads as [C, H, W], the layout the convolutions take."""
    return shape[2] < shape[0]


def _aligned(offset: int) -> int:
    return -(-offset // ALIGN) * ALIGN


def _unsupported(env_id: str, key: tuple[str, ...], space, why: str) -> UnsupportedEnvError:
    where = f"observation part {'.'.join(key)!r}" if key else "observation space"
    return UnsupportedEnvError(f"env {env_id!r}: {where} {space} is not supported: {why}")
