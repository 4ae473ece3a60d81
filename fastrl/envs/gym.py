"""Any gymnasium env behind the executor's adapter protocol (see base.py).

A user's env is checked against its declared spaces: fully once at start (``probe``, before
any worker exists), cheaply on every step (shape, a float observation never truncated into an
integer buffer, finite values, a scalar finite reward). A violation is an ``EnvOutputError``;
the executor adds which env, step and action it was. A Dict observation is written part by part
into one row (``fastrl.envs.obs_layout``), each part checked as a Box observation is.
"""

from __future__ import annotations

import logging
import math
import pickle
from collections.abc import Sequence

import gymnasium as gym
import numpy as np

from csrc_free_kernels.step_end import CONTINUES, TERMINATED, TRUNCATED
from fastrl.envs.actions import BOX, DISCRETE, ActionSpec, UnsupportedEnvError, action_spec_of
from fastrl.envs.obs_layout import (
    BINARY,
    MASK_KEY,
    ONE_HOT,
    TAKES,
    ObsLayout,
    encode,
    is_structured,
    mask_part,
    obs_layout_of,
    value_at,
)
from fastrl.errors import FastrlError

log = logging.getLogger(__name__)
__all__ = ["EnvOutputError", "GymEnv", "UnsupportedEnvError", "check_spaces", "observation_spec"]


class EnvOutputError(FastrlError, ValueError):
    """An observation or reward that the env's declared spaces do not allow."""


def check_spaces(env_id: str, env: gym.Env) -> tuple[tuple[int, ...], np.dtype, ActionSpec]:
    """-> (obs_shape, obs_dtype, action spec) or a clear error naming a space fastrl cannot learn on."""
    shape, dtype, _ = observation_spec(env_id, env.observation_space)
    return shape, dtype, action_spec_of(env_id, env.action_space)  # Discrete, MultiDiscrete or a float Box


def observation_spec(env_id: str, obs_space) -> tuple[tuple[int, ...], np.dtype, ObsLayout | None]:
    """-> (the slot row's shape, its dtype, the layout of a Dict, Tuple, Discrete or MultiBinary; None: a Box)."""
    if is_structured(obs_space):
        layout = obs_layout_of(env_id, obs_space)
        return layout.row_shape, layout.row_dtype, layout
    if not isinstance(obs_space, gym.spaces.Box):
        raise UnsupportedEnvError(
            f"env {env_id!r}: observation space {obs_space} is not supported; {TAKES} "
            "(wrap other observations, e.g. with gymnasium.wrappers.FlattenObservation)"
        )
    dtype = np.dtype(obs_space.dtype)
    if dtype not in (np.dtype(np.uint8), np.dtype(np.float32), np.dtype(np.float64)):
        raise UnsupportedEnvError(f"env {env_id!r}: observation dtype {dtype} is not supported (uint8, float32)")
    if dtype == np.float64:
        dtype = np.dtype(np.float32)  # stored and learned in float32
    return tuple(obs_space.shape), dtype, None


class GymEnv:
    frames_per_step = 1
    # gymnasium's reset(seed=...) reseeds the env's generator, so the seed and the actions fix an episode whatever
    # the instance did before: engine.reset_ahead may start one in a spare instance (a user's env that keeps other
    # state across its resets needs engine.reset_ahead = false)
    resets_from_seed = True

    def __init__(self, env_id: str, env: gym.Env):
        self.env_id = env_id
        self.env = env
        self.obs_shape, self.obs_dtype, self.obs_layout = observation_spec(env_id, env.observation_space)
        self.action_spec = action_spec_of(env_id, env.action_space)
        self.n_actions = self.action_spec.head_size
        self._to_env = self._action_converter(env.action_space)
        self.float_obs = self.obs_dtype.kind == "f"
        # small flat observations: a Python loop beats numpy's per-call overhead (0.4 vs 2 us for 4 floats)
        self.small_obs = len(self.obs_shape) == 1 and self.obs_shape[0] <= 64
        self.seen_dtype: np.dtype | None = None
        self.narrowed = False  # integers wider than the uint8 buffer arrive: checked to fit, every step
        # a Dict observation goes part by part into its row, each part checked as a Box one is
        self.dict_writer: _DictWriter | None = None
        if self.obs_layout is None:
            self._write = self._write_box
        else:
            self.dict_writer = _DictWriter(
                self.obs_layout, mask_blocks(env_id, self.obs_layout, self.action_spec), env.observation_space
            )
            self._write = self.dict_writer.write

    def _action_converter(self, space):
        """fastrl's stored action (an int, or a flat row of the slot) -> what ``env.step`` takes."""
        kind = self.action_spec.kind
        if kind == DISCRETE:
            start = int(space.start)  # Discrete(n, start=s): fastrl's action a is s + a
            return lambda action: action + start
        if kind == BOX:  # the env gets the sample clipped to its bounds; the slot keeps it unclipped
            low = np.asarray(space.low, space.dtype).ravel()
            high = np.asarray(space.high, space.dtype).ravel()
            return lambda action: np.clip(np.asarray(action, space.dtype), low, high).reshape(space.shape)
        start = np.asarray(getattr(space, "start", 0), space.dtype).ravel()  # MultiDiscrete(nvec, start)
        return lambda action: (np.asarray(action, space.dtype) + start).reshape(space.shape)

    def write_observation(self, obs, out: np.ndarray, check_mask: bool = True) -> None:
        """``obs`` checked and written into the row ``out``, as a step's is; ``check_mask`` False lets an
        ``action_mask`` allow no action (a turn-based game's waiting player: ``fastrl.envs.pettingzoo``)."""
        if self.dict_writer is not None:
            self.dict_writer.write(obs, out, check_mask)
        else:
            self._write_box(obs, out)

    def env_action(self, action):
        """fastrl's stored action as the env's action space takes it."""
        return self._to_env(action)

    # ---------------------------------------------------------------- checks

    def _write_box(self, obs, out: np.ndarray) -> None:
        """The cheap per-step check, then the copy into the trajectory row."""
        if type(obs) is not np.ndarray:
            obs = np.asarray(obs)
        if obs.shape != out.shape:
            raise EnvOutputError(f"observation of shape {obs.shape}; the observation space declares {out.shape}")
        if obs.dtype is not self.seen_dtype:  # dtypes are singletons: checked once, not every step
            self._check_dtype(obs.dtype)
        out[...] = obs
        if self.float_obs and not self._finite(out):
            raise EnvOutputError(f"a non-finite observation value ({_first_bad(out)})")
        if self.narrowed:
            _check_fits(out, obs, "an observation")

    def _check_dtype(self, dtype: np.dtype) -> None:
        if dtype.kind not in "fiub" or (dtype.kind == "f" and not self.float_obs):
            raise EnvOutputError(f"observation of dtype {dtype}; the observation space declares {self.obs_dtype}")
        self.seen_dtype = dtype
        self.narrowed = not self.float_obs and not np.can_cast(dtype, self.obs_dtype)

    def _finite(self, values: np.ndarray) -> bool:
        if self.small_obs:
            return all(map(math.isfinite, values.tolist()))
        return bool(np.isfinite(values).all())

    @staticmethod
    def _reward(reward) -> float:
        if type(reward) is not float:
            if np.ndim(reward) != 0:
                raise EnvOutputError(f"a reward of shape {np.shape(reward)}; expected a scalar")
            try:
                reward = float(reward)
            except (TypeError, ValueError):  # None, a string: no number
                raise EnvOutputError(
                    f"a reward {_short(reward)} of type {type(reward).__name__}; expected a number"
                ) from None
        if not math.isfinite(reward):
            raise EnvOutputError(f"a non-finite reward ({reward})")
        return reward

    @staticmethod
    def _flag(value, name: str) -> bool:
        """terminated/truncated: a bool (numpy's too); a string, an array or None would be read as true or false
        and end episodes no one ended."""
        if isinstance(value, np.bool_):
            return bool(value)
        raise EnvOutputError(f"{name} = {value!r} of type {type(value).__name__}; expected a bool")

    def _reset_obs(self, seed: int):
        returned = self.env.reset(seed=seed)
        if not isinstance(returned, (tuple, list)) or len(returned) != 2:
            raise EnvOutputError(f"{type(returned).__name__} {_short(returned)}, not a tuple (observation, info)")
        return returned[0]

    def probe(self, seed: int = 0) -> None:
        """The full check at start, on a scratch buffer: reset, one step, declared dtype and bounds."""
        out = np.zeros(self.obs_shape, self.obs_dtype)
        obs = self._reset_obs(seed)
        self._check_declared(obs, "reset")
        self._write(obs, out)
        obs, reward, *_ = self.env.step(self._to_env(self._probe_action(out)))
        self._check_declared(obs, "the first step")
        self._write(obs, out)
        self._reward(reward)

    def _probe_action(self, row: np.ndarray):
        """The probe's one action: the first one the observation's ``action_mask`` allows (an env may raise on
        a masked one, as turn-based games do for an illegal move), else the first category of every
        dimension, or a Box's zero."""
        writer = self.dict_writer
        if writer is not None and writer.mask_blocks:
            assert writer.mask is not None and self.obs_layout is not None, "mask blocks come from a Dict's mask"
            mask = self.obs_layout.view(row, writer.mask).reshape(-1)
            first = [int(np.flatnonzero(mask[block])[0]) for block in writer.mask_blocks]  # each allows one
            return first[0] if self.action_spec.kind == DISCRETE else np.asarray(first, self.action_spec.slot_dtype)
        if self.action_spec.kind == DISCRETE:
            return 0
        return np.zeros(self.action_spec.dims, np.dtype(self.action_spec.slot_dtype))

    def _check_declared(self, obs, where: str) -> None:
        space = self.env.observation_space
        if self.obs_layout is not None:
            if not space.contains(obs):
                log.warning(
                    "env %r: %s returned an observation its space does not contain (parts, dtypes or bounds)",
                    self.env_id,
                    where,
                )
            return
        obs = np.asarray(obs)
        if obs.dtype != space.dtype:
            log.warning(
                "env %r: %s returned dtype %s, its space declares %s", self.env_id, where, obs.dtype, space.dtype
            )
        elif obs.shape == space.shape and not space.contains(obs):
            log.warning("env %r: %s returned an observation outside its declared bounds", self.env_id, where)

    # ---------------------------------------------------------------- adapter protocol

    def reset(self, seed: int, out: np.ndarray) -> None:
        self._write(self._reset_obs(seed), out)

    def step(self, action, prev: np.ndarray, out: np.ndarray) -> tuple[float, float, int, bool]:
        obs, reward, terminated, truncated, _ = self.env.step(self._to_env(action))
        self._write(obs, out)
        reward = self._reward(reward)
        if type(terminated) is not bool:
            terminated = self._flag(terminated, "terminated")
        if type(truncated) is not bool:
            truncated = self._flag(truncated, "truncated")
        if terminated or truncated:  # a terminal state wins over a time limit reached at the same step
            return reward, reward, TERMINATED if terminated else TRUNCATED, True
        return reward, reward, CONTINUES, False

    def get_state(self) -> bytes:
        """The whole env pickled (wrappers, time limit, RNG); raises if the env cannot be pickled."""
        return pickle.dumps(self.env, protocol=pickle.HIGHEST_PROTOCOL)

    def set_state(self, state: bytes) -> None:
        old, self.env = self.env, pickle.loads(state)
        old.close()

    def close(self) -> None:
        self.env.close()


def mask_blocks(env_id: str, layout: ObsLayout, action: ActionSpec) -> list[slice]:
    """The ``action_mask`` part's column ranges, one per action dimension (each must allow an action), or []
    without a mask; an ``UnsupportedEnvError`` for a mask that does not fit the action space."""
    part = mask_part(layout)
    if part is None:
        return []
    where = f"env {env_id!r}: observation part {MASK_KEY!r}"
    if action.kind == BOX:
        raise UnsupportedEnvError(
            f"{where} masks actions, and Box (continuous) actions cannot be masked: "
            "only Discrete and MultiDiscrete ones"
        )
    if part.image or part.encoding == ONE_HOT:
        raise UnsupportedEnvError(f"{where} must be a MultiBinary or a Box of 0/1 with one column per action")
    if part.size != action.head_size:
        raise UnsupportedEnvError(
            f"{where} has {part.size} columns; the action space has {action.head_size} actions "
            "(MultiDiscrete: every dimension's side by side): one column per action"
        )
    ends = np.cumsum((0, *action.nvec))
    return [slice(int(a), int(b)) for a, b in zip(ends[:-1], ends[1:])]


class _DictWriter:
    """The per-step check and copy of a Dict observation: each part's shape, a float never truncated
    into the uint8 image, finite vector values, an action mask that allows an action; an error names
    the part."""

    def __init__(self, layout: ObsLayout, mask_blocks: Sequence[slice] = (), space=None):
        self.layout = layout
        self.seen_dtypes: dict[tuple[str, ...], np.dtype] = {}  # part -> the dtype already checked
        self.mask, self.mask_blocks = mask_part(layout), list(mask_blocks)
        # the container the env must return: a dict for a Dict, a tuple for a Tuple; a Discrete's value is the part
        containers: dict[type, type | tuple[type, ...]] = {gym.spaces.Dict: dict, gym.spaces.Tuple: (tuple, list)}
        self.container = containers.get(type(space))
        self.kind = type(space).__name__ if space is not None else "Dict"

    def write(self, obs, out: np.ndarray, check_mask: bool = True) -> None:
        if self.container is not None and not isinstance(obs, self.container):
            raise EnvOutputError(f"an observation of type {type(obs).__name__}; the observation space is a {self.kind}")
        for part in self.layout.parts:
            self._write_part(part, obs, self.layout.view(out, part))
        if self.mask_blocks and check_mask:
            assert self.mask is not None, "mask blocks come from the layout's mask part"
            self._check_mask(self.layout.view(out, self.mask))

    def _check_mask(self, mask: np.ndarray) -> None:
        flat = mask.reshape(-1)
        if not ((flat == 0) | (flat == 1)).all():
            raise EnvOutputError(f"an {MASK_KEY!r} with a value other than 0 and 1")
        for d, block in enumerate(self.mask_blocks):
            if not flat[block].any():
                which = "" if len(self.mask_blocks) == 1 else f" in action dimension {d}"
                raise EnvOutputError(f"an all-zero {MASK_KEY!r}{which}: no action is allowed")

    def _write_part(self, part, obs: dict, into: np.ndarray) -> None:
        try:
            value = value_at(obs, part.key)
        except KeyError as missing:
            raise EnvOutputError(
                f"an observation without the part {missing.args[0]!r} its {self.kind} space declares"
            ) from None
        if type(value) is not np.ndarray:
            value = np.asarray(value)
        if part.encoding == ONE_HOT:
            self._write_one_hot(part, value, into)
            return
        if value.shape != into.shape:
            raise EnvOutputError(
                f"observation part {part.name!r} of shape {value.shape}; the space declares {into.shape}"
            )
        if self.seen_dtypes.get(part.key) is not value.dtype:
            kind = value.dtype.kind
            if kind not in "fiub" or (kind == "f" and part.image):
                raise EnvOutputError(
                    f"observation part {part.name!r} of dtype {value.dtype}; the space declares "
                    f"{'uint8' if part.image else 'a number'}"
                )
            self.seen_dtypes[part.key] = value.dtype
        into[...] = value
        if part.image and not np.can_cast(value.dtype, into.dtype):
            _check_fits(into, value, f"observation part {part.name!r}")
        if not part.image and value.dtype.kind == "f" and not np.isfinite(into).all():
            raise EnvOutputError(f"a non-finite value in observation part {part.name!r} ({_first_bad(into)})")
        if part.encoding == BINARY and not ((into == 0) | (into == 1)).all():
            raise EnvOutputError(f"observation part {part.name!r} (MultiBinary) holds a value other than 0 and 1")

    @staticmethod
    def _write_one_hot(part, value: np.ndarray, into: np.ndarray) -> None:
        """A Discrete part: one integer, written as its one-hot columns."""
        if value.shape not in ((), (1,)) or value.dtype.kind not in "iub":
            raise EnvOutputError(
                f"observation part {part.name!r} (Discrete) of shape {value.shape} and dtype "
                f"{value.dtype}; expected one integer"
            )
        try:
            encode(part, value.reshape(()), into)
        except ValueError as exc:
            raise EnvOutputError(str(exc)) from None


def _check_fits(stored: np.ndarray, given: np.ndarray, what: str) -> None:
    """Integers wider than the uint8 buffer were written into it: each must have kept its value (300 would
    silently become 44)."""
    if not np.array_equal(stored, given):
        index = tuple(int(i) for i in np.argwhere(stored != given)[0])
        raise EnvOutputError(
            f"{what} value {given[index]} at index {index} does not fit the {stored.dtype} the observation space "
            "declares (0..255); declare a wider Box (e.g. float32) or scale the values into it"
        )


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _first_bad(values: np.ndarray) -> str:
    index = np.argwhere(~np.isfinite(values))[0]
    return f"{values[tuple(index)]} at index {tuple(int(i) for i in index)}"
