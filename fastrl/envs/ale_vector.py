"""``env.backend = "ale_vector"``: ale-py's ``AtariVectorEnv`` as an executor backend, added through the plug-in
point (``register_env_backend`` with ``make_group``) like any package's.

Each executor's env group (``engine.env_groups`` splits an executor's envs) is one ``AtariVectorEnv`` whose C++
threads step all its envs at once (ALE's own preprocessing: frame skip, max-pool, resize, frame stack, no-op and
FIRE resets); the executor hands it every member's action when the last arrives, and each member copies its
observation into its buffer row. Actions index the same minimal action set as fastrl's ``atari`` backend.

What it gives up against the ``atari`` backend:

- **Exact resume**: AtariVectorEnv cannot clone one env's state, so ``get_state`` refuses and a resumed run
  restarts its envs with seeded resets (training goes on, not bit for bit).
- **The asynchronous modes**: a group steps when all its members have their action, so its envs advance in
  lockstep; ``async`` and ``gala`` (whose envs wait for slots or for their own learner) are refused.
- **Episodic life, game modes and difficulties** (``env.atari.episodic_life``, ``env.kwargs``): refused.
- **fastrl's sticky-action stream**: ALE applies sticky actions itself, seeded by each reset's seed.

Determinism: every env has its own emulator and is reset with the seeds of the env's stream, so its trajectory
does not depend on which group or executor it is in: runs are bit-identical across layouts as with ``atari``.
Its own random resets seed nothing here: every reset is fastrl's (a one-env masked reset with the stream's seed).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np

from csrc_free_kernels.step_end import CONTINUES, TERMINATED, TRUNCATED
from fastrl.envs.actions import ActionSpec
from fastrl.envs.base import EnvAdapter
from fastrl.envs.group_member import GroupMember
from fastrl.envs.registry import EnvBackend, register_env_backend
from fastrl.schema import EnvConfig

if TYPE_CHECKING:
    from fastrl.envs.obs_layout import ObsLayout

NAME = "ale_vector"


class AleVectorGroup:
    """One AtariVectorEnv stepping ``size`` envs together (``fastrl.envs.base.EnvGroup``)."""

    def __init__(self, config: EnvConfig, size: int):
        from ale_py import AtariVectorEnv

        from fastrl.envs.atari import parse_atari_id

        atari = config.atari
        if atari.episodic_life:
            raise ValueError("env.backend = 'ale_vector' does not take env.atari.episodic_life = true; use 'atari'")
        if config.kwargs:
            raise ValueError(f"env.backend = 'ale_vector' takes no env.kwargs (got {sorted(config.kwargs)})")
        rom, default_sticky = parse_atari_id(config.id)
        sticky = default_sticky if atari.repeat_action_probability < 0 else atari.repeat_action_probability
        self.size = size
        self.clip_rewards = atari.clip_rewards
        self.vector = AtariVectorEnv(
            rom,
            size,
            batch_size=size,  # synchronous: a step is every member's, and one-env masked resets are allowed
            num_threads=min(size, len(os.sched_getaffinity(0))),  # the executor's cores, not the machine's
            frameskip=atari.frame_skip,
            img_height=atari.size,
            img_width=atari.size,
            stack_num=atari.stack,
            grayscale=True,
            maxpool=True,
            noop_max=atari.noop_max,
            use_fire_reset=atari.fire_reset,
            repeat_action_probability=float(sticky),
            full_action_space=atari.full_action_space,
            max_num_frames_per_episode=atari.max_episode_frames,
            reward_clipping=False,  # the raw score is reported; the learner's sign is taken here
        )
        self.n_actions = int(self.vector.single_action_space.n)
        self.obs: np.ndarray | None = None  # [size, stack, H, W] after the last step or reset
        self.rewards = np.zeros(size)
        self.ends = np.zeros(size, np.int64)
        self.started = False

    def step(self, actions: list) -> None:
        obs, rewards, terminated, truncated, _ = self.vector.step(np.asarray(actions, np.int64))
        self.obs, self.rewards = obs, rewards
        self.ends = np.where(terminated, TERMINATED, np.where(truncated, TRUNCATED, CONTINUES))

    def reset_member(self, member: int, seed: int) -> np.ndarray:
        if not self.started:  # a partial reset needs a full one first; every member is then reset with its seed
            self.vector.reset(seed=np.zeros(self.size, np.int64))
            self.started = True
        mask = np.zeros(self.size, np.bool_)
        mask[member] = True
        obs, _ = self.vector.reset(seed=np.array([seed], np.int64), options={"reset_mask": mask})
        return obs[member]

    def close(self) -> None:
        if self.vector is not None:
            self.vector.close()
            self.vector = None


class AleVectorEnv(GroupMember):
    """One member of an ``AleVectorGroup`` behind the executor's adapter protocol (``fastrl.envs.base``)."""

    group: AleVectorGroup

    def __init__(self, group: AleVectorGroup, member: int, config: EnvConfig):
        self.group, self.member = group, member
        atari = config.atari
        self.n_actions = group.n_actions
        self.action_spec = ActionSpec.discrete(self.n_actions)
        self.obs_shape: tuple[int, ...] = (atari.stack, atari.size, atari.size)
        self.obs_dtype = np.dtype(np.uint8)
        self.obs_layout: ObsLayout | None = None  # a Box of frames
        self.frames_per_step = atari.frame_skip

    def reset(self, seed: int, out: np.ndarray) -> None:
        out[...] = self.group.reset_member(self.member, seed)

    def get_state(self):
        raise NotImplementedError("AtariVectorEnv cannot save one env's state: a resumed run resets it")

    def set_state(self, state) -> None:
        raise NotImplementedError("AtariVectorEnv cannot restore one env's state")


def make_group(config: EnvConfig, env_indices: list[int]) -> list[EnvAdapter]:
    group = AleVectorGroup(config, len(env_indices))
    return [AleVectorEnv(group, member, config) for member in range(len(env_indices))]


def make_one(config: EnvConfig, env_index: int) -> EnvAdapter:
    return make_group(config, [env_index])[0]


def claims(env_id: str) -> bool:
    from fastrl.envs.atari import is_atari_id  # imported when asked: the frame kernels are not this module's

    return is_atari_id(env_id)


register_env_backend(
    EnvBackend(
        NAME,
        claims,
        make_one,
        "ALE ids through ale-py's AtariVectorEnv, each executor's env group stepped together (sync and hts only)",
        make_group=make_group,
        auto=False,  # asked only by name: it measured slower than 'atari' on 2 cores (docs/extending.md)
    )
)
