"""One env of a backend's group (``fastrl.envs.base.EnvGroup``: a C++ vector env), as the executor sees it.

The executor steps the group once with every member's action; each member then reads its own row of what the
group returned (``SteppedGroup``). ale_vector's and envpool's members share this reading and differ only in how
they reset.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from csrc_free_kernels.step_end import CONTINUES


class SteppedGroup(Protocol):
    """An ``EnvGroup`` that keeps its last step's results for its members to read."""

    size: int
    obs: np.ndarray | None  # [size, *obs_shape]; None before the first step
    rewards: np.ndarray  # raw, per member
    ends: np.ndarray  # csrc_free_kernels.step_end codes, per member
    clip_rewards: bool  # the learner sees sign(reward)

    def step(self, actions: list) -> None: ...

    def close(self) -> None: ...


class GroupMember:
    """A member's step, probe and close over its group's results; a subclass sets ``group``, ``member``, the
    adapter's spaces, and ``reset``."""

    group: SteppedGroup
    member: int
    obs_shape: tuple[int, ...]
    obs_dtype: np.dtype

    def step(self, action, prev: np.ndarray, out: np.ndarray) -> tuple[float, float, int, bool]:
        """The group's step for this member (the executor stepped the group with every member's action)."""
        group, m = self.group, self.member
        assert group.obs is not None, "the executor steps the group before reading its members"
        out[...] = group.obs[m]
        raw = float(group.rewards[m])
        reward = float((raw > 0) - (raw < 0)) if group.clip_rewards else raw
        done = int(group.ends[m])
        return reward, raw, done, done != CONTINUES

    def reset(self, seed: int, out: np.ndarray) -> None:
        raise NotImplementedError

    def probe_action(self):
        """An action every member can take, for ``probe``."""
        return 0

    def probe(self, seed: int = 0) -> None:
        out = np.zeros(self.obs_shape, self.obs_dtype)
        self.reset(seed, out)
        action = self.probe_action()
        self.group.step([action] * self.group.size)
        self.step(action, out, out.copy())

    def close(self) -> None:
        self.group.close()  # every member closes it; the first does
