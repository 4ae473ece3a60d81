"""How a structured observation becomes one row of the slots' single ``obs`` array, and back.

The slots hold ``obs`` as one array of one dtype, so a ``gymnasium.spaces.Dict`` is laid out
as one row per step, in ``gymnasium.spaces.flatten``'s order (a Dict iterates its keys sorted
unless it was built from an OrderedDict; nested Dicts and Tuples depth first, a Tuple's parts
keyed by their position "0", "1", ...). The other spaces a first env often has are laid out
the same way as a structure of one part or of several: a ``Discrete`` (FrozenLake, Taxi,
CliffWalking: its one-hot), a ``MultiBinary``, a ``Tuple`` (Blackjack's three Discretes):

- **flat**: every part is a Box that is not an image, a Discrete or a MultiBinary. The row is
  float32 and is exactly ``gymnasium.spaces.flatten(space, obs)`` (each Box part flattened and cast
  to float32, integers not scaled; a Discrete(n) part one-hot in n columns; a MultiBinary part's 0/1
  flattened), so every model for flat observations (``mlp``) takes it unchanged.
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
TAKES = (
    "an observation is a Box, or a Dict or Tuple (nested as deep as needed) of Box parts (float or integer "
    "vectors, flattened to float32, and at most one uint8 image of rank 3: [H, W, C] or [C, H, W]), Discrete "
    "parts (one-hot) and MultiBinary parts; a Discrete or MultiBinary alone is one such part"
)
# how a part's value becomes its float32 columns (gymnasium.spaces.flatten's encodings)
BOX_PART, ONE_HOT, BINARY = "box", "one_hot", "binary"
MASK_KEY = "action_mask"  # the top-level part that masks the policy's actions (fastrl.models.action_mask)


@dataclass(frozen=True)
class ObsPart:
    key: tuple[str, ...]  # the path of keys to this part (a Tuple's positions as "0", "1"...; () for the whole)
    dtype: str  # as stored in the row: "uint8" (the image) or "float32"
    shape: tuple[int, ...]  # the space's own shape
    offset: int  # bytes from the start of the row
    image: bool = False
    encoding: str = BOX_PART  # ONE_HOT: a Discrete's value (shape is (n,)); BINARY: a MultiBinary's 0/1
    start: int = 0  # a Discrete's first value (Discrete(n, start=s)): value s is column 0

    @property
    def name(self) -> str:
        return ".".join(self.key) or "observation"

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
            encode(part, value_at(obs, part.key), self.view(row, part))
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


def encode(part: ObsPart, value, into: np.ndarray) -> None:
    """``value`` into ``part``'s columns ``into``: copied (a Box or MultiBinary part) or one-hot (Discrete);
    a Discrete value outside its range is a ValueError naming the part and the range."""
    if part.encoding != ONE_HOT:
        into[...] = value
        return
    index = int(value) - part.start
    if not 0 <= index < part.size:
        raise ValueError(
            f"observation part {part.name!r}: the value {value} is outside its Discrete's range "
            f"{part.start}..{part.start + part.size - 1}"
        )
    into[...] = 0
    into[index] = 1


def mask_part(layout: ObsLayout | None) -> ObsPart | None:
    """The ``action_mask`` part of a Dict observation's layout, or None."""
    if layout is None:
        return None
    return next((part for part in layout.parts if part.key == (MASK_KEY,)), None)


def value_at(obs, key: tuple[str, ...]):
    """The value at ``key``'s path in a (nested) dict or tuple observation; KeyError names the missing part."""
    for depth, name in enumerate(key):
        if isinstance(obs, dict) and name in obs:
            obs = obs[name]
        elif isinstance(obs, (tuple, list)) and name.isdigit() and int(name) < len(obs):
            obs = obs[int(name)]
        else:
            raise KeyError(".".join(key[: depth + 1]))
    return obs


def is_structured(space) -> bool:
    """A space laid out as parts (``obs_layout_of``) rather than stored as it is (a Box)."""
    import gymnasium as gym

    return isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple, gym.spaces.Discrete, gym.spaces.MultiBinary))


def obs_layout_of(env_id: str, space) -> ObsLayout:
    """The layout of a Dict, Tuple, Discrete or MultiBinary space, or an ``UnsupportedEnvError`` naming the part
    and its space."""
    leaves = list(_leaves(env_id, space, ()))
    images = [key for key, box in leaves if _is_image(box)]
    if len(images) > 1:
        raise _unsupported(
            env_id,
            images[1],
            space_at(space, images[1]),
            f"a second uint8 image (the first is {'.'.join(images[0])!r}); {TAKES}",
        )
    if not images:
        parts, offset = [], 0
        for key, space in leaves:
            part = _vector_part(key, space, offset)
            parts.append(part)
            offset += part.nbytes
        return ObsLayout(tuple(parts), offset, packed=False)
    parts, offset = [], 0
    for key, space in leaves:
        if _is_image(space):
            part = ObsPart(key, "uint8", tuple(space.shape), offset, image=True)
        else:
            part = _vector_part(key, space, offset)
        parts.append(part)
        offset = _aligned(offset + part.nbytes)
    image = next(part for part in parts if part.image)
    return ObsLayout(tuple(parts), max(offset, ALIGN), packed=True, channels_last=_channels_last(image.shape))


def _vector_part(key: tuple[str, ...], space, offset: int) -> ObsPart:
    """A float32 part: a Box's values, a Discrete's one-hot columns or a MultiBinary's 0/1."""
    import gymnasium as gym

    if isinstance(space, gym.spaces.Discrete):
        return ObsPart(key, "float32", (int(space.n),), offset, encoding=ONE_HOT, start=int(space.start))
    if isinstance(space, gym.spaces.MultiBinary):
        return ObsPart(key, "float32", tuple(space.shape), offset, encoding=BINARY)
    return ObsPart(key, "float32", tuple(space.shape), offset)


def space_at(space, key: tuple[str, ...]):
    for name in key:
        space = space.spaces[int(name)] if isinstance(space.spaces, tuple) else space.spaces[name]
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
    if isinstance(space, gym.spaces.Tuple):
        if not space.spaces:
            raise _unsupported(env_id, key, space, "an empty Tuple has nothing to observe")
        for index, sub in enumerate(space.spaces):
            yield from _leaves(env_id, sub, key + (str(index),))
        return
    if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiBinary)):
        yield key, space
        return
    if not isinstance(space, gym.spaces.Box):
        raise _unsupported(env_id, key, space, TAKES)
    if np.dtype(space.dtype).kind not in "fiu":
        raise _unsupported(env_id, key, space, f"a Box of dtype {space.dtype}; {TAKES}")
    if math.prod(space.shape) == 0:
        raise _unsupported(env_id, key, space, "a Box with no elements")
    yield key, space


def _is_image(space) -> bool:
    import gymnasium as gym

    return isinstance(space, gym.spaces.Box) and np.dtype(space.dtype) == np.uint8 and len(space.shape) == 3


def _channels_last(shape: tuple[int, ...]) -> bool:
    """[H, W, C] when the last axis is the smaller of the outer two (84x84x3 is HWC, 3x84x84 CHW);
    a tie reads as [C, H, W], the layout the convolutions take."""
    return shape[2] < shape[0]


def _aligned(offset: int) -> int:
    return -(-offset // ALIGN) * ALIGN


def _unsupported(env_id: str, key: tuple[str, ...], space, why: str) -> UnsupportedEnvError:
    where = f"observation part {'.'.join(key)!r}" if key else "observation space"
    return UnsupportedEnvError(f"env {env_id!r}: {where} {space} is not supported: {why}")
