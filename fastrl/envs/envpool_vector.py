"""``env.backend = "envpool"``: envpool's C++ vector envs as an executor backend (the optional extra
``pip install 'fastrl-engine[envpool]'``), added through the plug-in point (``register_env_backend`` with
``make_group``) like ``ale_vector``.

Each executor's env group (``engine.env_groups`` splits an executor's envs) is one envpool whose C++ threads step
all its envs at once; the executor hands it every member's action when the last arrives, and each member copies its
observation into its buffer row. Two kinds of id:

- **fastrl's Atari ids** (``PongNoFrameskip-v4``, ``ALE/Pong-v5``) become envpool's ``Pong-v5`` task with
  ``env.atari``'s preprocessing, the same as fastrl's own ``atari`` backend: frame skip with the last two frames
  max-pooled, area-resized gray frames, the stack, no-op starts, FIRE on reset, the id's sticky actions (none for
  NoFrameskip-v4), the minimal action set, ``max_episode_frames``. The learner sees sign(reward) where
  ``clip_rewards``; the score is the raw reward.
- **Every other envpool task** (``HalfCheetah-v5``, ``CartPole-v1``, ``procgen`` games...) with envpool's own
  defaults; ``env.kwargs`` go to ``envpool.make`` (``num_threads``, ``max_episode_steps``...). Box observations
  (float64 stored as float32), Discrete or float Box actions (the env gets the sample clipped to its bounds).

Determinism: envpool fixes an env's seed when it is made and ignores ``reset(seed)``; each env's seed comes from its
own stream (``fastrl.seeding.made_env_seed``: the run's seed, the env's global index, the restart), and its later
episodes follow from that seed and its actions. Its trajectory therefore does not depend on which group or executor
holds it: runs are bit-identical across layouts (``tests/envs/test_envpool_backend.py``).

What it gives up against fastrl's own backends, each refused before a run starts where a config asks for it:

- **Exact resume**: envpool cannot save one env's state, so a resumed run restarts its envs with fresh seeds
  (training goes on, not bit for bit).
- **The asynchronous modes**: a group steps when all its members have their action; ``async`` and ``gala`` are
  refused (as for ``ale_vector``).
- **Episodic life** (``env.atari.episodic_life``): envpool's next step after a lost life ignores its action.
- **Dict observations and MultiDiscrete actions**: refused, naming the space.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING

import numpy as np

from csrc_free_kernels.step_end import CONTINUES, TERMINATED, TRUNCATED
from fastrl.envs.actions import BOX, DISCRETE, UnsupportedEnvError, action_spec_of
from fastrl.envs.base import EnvAdapter
from fastrl.envs.group_member import GroupMember
from fastrl.envs.gym import EnvOutputError
from fastrl.envs.registry import EnvBackend, register_env_backend
from fastrl.errors import install_hint
from fastrl.schema import EnvConfig

if TYPE_CHECKING:
    from fastrl.envs.obs_layout import ObsLayout

NAME = "envpool"
INSTALL = install_hint("envpool")


def _envpool():
    try:
        import envpool
    except ImportError:
        raise UnsupportedEnvError(f"env.backend = 'envpool' needs the envpool package: {INSTALL}") from None
    return envpool


@functools.cache
def _tasks() -> frozenset[str]:
    return frozenset(_envpool().list_all_envs())


def _atari_task(env_id: str) -> str | None:
    """envpool's task for one of fastrl's Atari ids ('PongNoFrameskip-v4' -> 'Pong-v5'); None: not an Atari id."""
    from fastrl.envs.atari import is_atari_id, parse_atari_id

    if not is_atari_id(env_id):
        return None
    rom, _ = parse_atari_id(env_id)
    return "".join(part.capitalize() for part in rom.split("_")) + "-v5"


def claims(env_id: str) -> bool:
    """fastrl's Atari ids, and every task envpool registers."""
    try:
        task = _atari_task(env_id) or env_id
    except ValueError as exc:  # an ALE id of a game ale-py does not ship: say which come close
        raise UnsupportedEnvError(str(exc)) from None
    return task in _tasks()


def _atari_options(config: EnvConfig) -> dict:
    """``env.atari`` as envpool's Atari options: the same preprocessing as fastrl's own ``atari`` backend."""
    from fastrl.envs.atari import parse_atari_id

    atari = config.atari
    if atari.episodic_life:
        raise ValueError(
            "env.backend = 'envpool' does not take env.atari.episodic_life = true (its next step after a lost life "
            "ignores the action); use the 'atari' backend"
        )
    if atari.noop_max < 1:
        raise ValueError("env.backend = 'envpool' takes env.atari.noop_max >= 1 (envpool cannot start without no-ops)")
    _, default_sticky = parse_atari_id(config.id)
    sticky = default_sticky if atari.repeat_action_probability < 0 else atari.repeat_action_probability
    return {
        "frame_skip": atari.frame_skip,
        "img_height": atari.size,
        "img_width": atari.size,
        "stack_num": atari.stack,
        "gray_scale": True,
        "use_inter_area_resize": True,
        "noop_max": atari.noop_max,
        "use_fire_reset": atari.fire_reset,
        "repeat_action_probability": float(sticky),
        "full_action_space": atari.full_action_space,
        "max_episode_steps": max(1, atari.max_episode_frames // atari.frame_skip),
        "episodic_life": False,
        "reward_clip": False,  # the raw score is reported; the learner's sign is taken here
        **config.kwargs,  # envpool's own Atari options (mode, difficulty, num_threads...)
    }


class EnvpoolGroup:
    """One envpool stepping ``size`` envs together (``fastrl.envs.base.EnvGroup``)."""

    def __init__(self, config: EnvConfig, seeds: list[int]):
        envpool = _envpool()
        atari_task = _atari_task(config.id)
        self.task = atari_task or config.id
        self.is_atari = atari_task is not None
        options = _atari_options(config) if self.is_atari else dict(config.kwargs)
        self.size = len(seeds)
        options.setdefault("num_threads", min(self.size, len(os.sched_getaffinity(0))))  # the executor's cores
        self.pool = envpool.make(
            self.task,
            env_type="gymnasium",
            num_envs=self.size,
            batch_size=self.size,  # synchronous: a step is every member's, and one-env resets are allowed
            env_seed=[int(seed) for seed in seeds],
            **options,
        )
        self.clip_rewards = self.is_atari and config.atari.clip_rewards
        self.frames_per_step = config.atari.frame_skip if self.is_atari else 1
        self._spaces(config.id)
        self.member_ids = np.arange(self.size, dtype=np.int32)
        self.obs: np.ndarray | None = None  # [size, *obs] after the last step
        self.rewards = np.zeros(self.size)
        self.ends = np.zeros(self.size, np.int64)
        self.first_obs: np.ndarray | None = None  # the first reset's observations, until each member takes its own
        self.fresh = set(range(self.size))

    def _spaces(self, env_id: str) -> None:
        import gymnasium as gym

        space = self.pool.observation_space
        if not isinstance(space, gym.spaces.Box) or np.dtype(space.dtype).kind not in "uf":
            raise UnsupportedEnvError(
                f"env.backend = 'envpool': env {env_id!r} observes {space}; this backend takes Box observations of "
                "unsigned integers or floats"
            )
        self.obs_shape: tuple[int, ...] = tuple(space.shape)
        self.obs_dtype = np.dtype(np.uint8) if space.dtype == np.uint8 else np.dtype(np.float32)
        self.float_obs = self.obs_dtype.kind == "f"
        self.action_spec = action_spec_of(env_id, self.pool.action_space)
        if self.action_spec.kind not in (DISCRETE, BOX):
            raise UnsupportedEnvError(
                f"env.backend = 'envpool': env {env_id!r} acts in {self.pool.action_space}; this backend takes "
                "Discrete and Box actions"
            )
        space = self.pool.action_space
        self.action_dtype = np.dtype(space.dtype)
        if self.action_spec.kind == BOX:
            self.low = np.asarray(space.low, self.action_dtype).ravel()
            self.high = np.asarray(space.high, self.action_dtype).ravel()
            self.action_shape = (self.size, *space.shape)

    def _actions(self, actions: list) -> np.ndarray:
        if self.action_spec.kind == DISCRETE:
            return np.asarray(actions, self.action_dtype)
        stacked = np.clip(np.asarray(actions, self.action_dtype), self.low, self.high)  # the slot keeps the sample
        return stacked.reshape(self.action_shape)

    def step(self, actions: list) -> None:
        obs, rewards, terminated, truncated, info = self.pool.step(self._actions(actions), self.member_ids)
        self._check(obs, info["env_id"])
        self.obs, self.rewards = obs, rewards
        self.ends = np.where(terminated, TERMINATED, np.where(truncated, TRUNCATED, CONTINUES))

    def _check(self, obs: np.ndarray, order: np.ndarray) -> None:
        if not np.array_equal(order, self.member_ids):  # sync envpool answers in member order; say so if not
            raise EnvOutputError(f"envpool answered envs {order.tolist()}, expected {self.member_ids.tolist()}")
        if self.float_obs and not np.isfinite(obs).all():
            bad = sorted({int(m) for m in np.argwhere(~np.isfinite(obs))[:, 0]})
            raise EnvOutputError(f"a non-finite observation value from member(s) {bad}")

    def reset_member(self, member: int) -> np.ndarray:
        """The member's new episode's first observation: envpool resets it with its own generator (seeded when the
        env was made); the first reset of all is one call."""
        if self.first_obs is None:
            self.first_obs, _ = self.pool.reset()
        if member in self.fresh:
            self.fresh.discard(member)
            return self.first_obs[member]
        obs, _ = self.pool.reset(self.member_ids[member : member + 1])
        return obs[0]

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None


class EnvpoolEnv(GroupMember):
    """One member of an ``EnvpoolGroup`` behind the executor's adapter protocol (``fastrl.envs.base``)."""

    group: EnvpoolGroup

    def __init__(self, group: EnvpoolGroup, member: int):
        self.group, self.member = group, member
        self.obs_shape = group.obs_shape
        self.obs_dtype = group.obs_dtype
        self.obs_layout: ObsLayout | None = None  # a Box
        self.action_spec = group.action_spec
        self.n_actions = self.action_spec.head_size
        self.frames_per_step = group.frames_per_step

    def reset(self, seed: int, out: np.ndarray) -> None:
        """``seed`` is not used: envpool seeds each env once, when it is made (the module's docstring)."""
        out[...] = self.group.reset_member(self.member)

    def probe_action(self):
        return 0 if self.action_spec.kind == DISCRETE else np.zeros(self.action_spec.dims, np.float32)

    def get_state(self):
        raise NotImplementedError("envpool cannot save one env's state: a resumed run restarts it with a new seed")

    def set_state(self, state) -> None:
        raise NotImplementedError("envpool cannot restore one env's state")


def make_group(config: EnvConfig, env_indices: list[int], seeds: list[int] | None = None) -> list[EnvAdapter]:
    """One envpool for the envs ``env_indices``, each seeded with its ``seeds`` entry (default: its index)."""
    group = EnvpoolGroup(config, list(env_indices) if seeds is None else seeds)
    return [EnvpoolEnv(group, member) for member in range(group.size)]


def make_one(config: EnvConfig, env_index: int) -> EnvAdapter:
    return make_group(config, [env_index])[0]


register_env_backend(
    EnvBackend(
        NAME,
        claims,
        make_one,
        f"envpool's tasks and fastrl's Atari ids through envpool's C++ vector envs, each executor's env group "
        f"stepped together (sync and hts only; {INSTALL})",
        make_group=make_group,
        seeded_when_made=True,
        auto=False,  # asked only by name (docs/extending.md: what it measured against 'atari')
    )
)
