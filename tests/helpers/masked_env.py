"""An env with an action mask that raises when a masked action is taken (the action-mask tests).

Observation ``{"obs": Box(2), "action_mask": MultiBinary(n)}``: each step allows a random non-empty
subset of the actions (``zero_at``: the mask at that step of an episode allows none, to check the
error). The reward is 1 for the first allowed action, else 0 (``obs`` is noise): learnable from
the mask alone, and a uniform choice among the allowed earns ~0.5 a step. ``multi``: a
MultiDiscrete([3, 2]) action space with a mask of 3 + 2 columns, each dimension masked on its own.
``first_masked``: action 0 is never allowed (an illegal move from the start, as in a turn-based game).
Env ids ``tests.helpers.masked_env:masked``, ``...:masked_box`` and ``...:first_masked``.
"""

import gymnasium as gym
import numpy as np


class MaskedEnv(gym.Env):
    def __init__(
        self,
        n: int = 4,
        multi: bool = False,
        zero_at: int = -1,
        length: int = 10,
        box_mask: bool = False,
        extra_columns: int = 0,
        first_masked: bool = False,
    ):
        self.nvec = [3, 2] if multi else [n]
        self.extra = extra_columns  # a mask wider than the action space (refused)
        columns = sum(self.nvec) + extra_columns
        self.action_space = gym.spaces.MultiDiscrete(self.nvec) if multi else gym.spaces.Discrete(n)
        mask_space = gym.spaces.Box(0, 1, (columns,), np.float32) if box_mask else gym.spaces.MultiBinary(columns)
        self.observation_space = gym.spaces.Dict(
            {"obs": gym.spaces.Box(0.0, 1.0, (2,), np.float32), "action_mask": mask_space}
        )
        self.multi, self.zero_at, self.length, self.box_mask = multi, zero_at, length, box_mask
        self.first_masked = first_masked
        self.t, self.mask, self.target = 0, None, None

    def _observe(self) -> dict:
        blocks = []
        for n in self.nvec:
            block = self.np_random.integers(0, 2, n).astype(np.int8)
            block[self.np_random.integers(n)] = 1  # at least one allowed per dimension
            if self.first_masked:
                block[0], block[-1] = 0, 1
            blocks.append(block)
        self.mask = np.concatenate(blocks + [np.ones(self.extra, np.int8)])
        if self.t == self.zero_at:
            self.mask[:] = 0
        self.target = int(np.flatnonzero(blocks[0])[0])
        obs = self.np_random.uniform(0.0, 1.0, 2).astype(np.float32)
        mask = self.mask.astype(np.float32) if self.box_mask else self.mask.copy()
        return {"obs": obs, "action_mask": mask}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._observe(), {}

    def step(self, action):
        chosen = np.atleast_1d(np.asarray(action))
        start = 0
        for d, n in enumerate(self.nvec):
            if not self.mask[start + int(chosen[d])]:
                raise RuntimeError(f"masked action {int(chosen[d])} taken in dimension {d} (mask {self.mask.tolist()})")
            start += n
        reward = float(int(chosen[0]) == self.target)
        self.t += 1
        return self._observe(), reward, self.t >= self.length, False, {}


def masked(
    n: int = 4, multi: bool = False, zero_at: int = -1, box_mask: bool = False, extra_columns: int = 0
) -> MaskedEnv:
    return MaskedEnv(n, multi, zero_at, box_mask=box_mask, extra_columns=extra_columns)


def first_masked(multi: bool = False) -> MaskedEnv:
    return MaskedEnv(multi=multi, first_masked=True)


class MaskedBox(gym.Env):
    """Box actions beside an action_mask: refused."""

    def __init__(self):
        self.action_space = gym.spaces.Box(-1, 1, (2,), np.float32)
        self.observation_space = gym.spaces.Dict(
            {"obs": gym.spaces.Box(0, 1, (2,), np.float32), "action_mask": gym.spaces.MultiBinary(2)}
        )

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, True, False, {}


def masked_box() -> MaskedBox:
    return MaskedBox()


class MaskedBandit(gym.Env):
    """A contextual bandit behind an action mask: ``obs`` is the one-hot of the rewarded action, ``action_mask``
    allows it and one other of ``n`` actions, a masked action raises, 1 for the rewarded action, ``length`` steps
    an episode. A policy that reads ``obs`` earns ``length`` an episode; a uniform choice within the mask half.
    ``masked=False``: its unmasked twin, every action allowed (the same rows)."""

    def __init__(self, n: int = 5, length: int = 20, masked: bool = True):
        self.n, self.length, self.masked = n, length, masked
        self.action_space = gym.spaces.Discrete(n)
        self.observation_space = gym.spaces.Dict(
            {"obs": gym.spaces.Box(0.0, 1.0, (n,), np.float32), "action_mask": gym.spaces.MultiBinary(n)}
        )
        self.t, self.target, self.mask = 0, 0, None

    def _observe(self) -> dict:
        self.target, other = self.np_random.choice(self.n, 2, replace=False)
        self.mask = np.zeros(self.n, np.int8)
        self.mask[[self.target, other] if self.masked else slice(None)] = 1
        obs = np.zeros(self.n, np.float32)
        obs[self.target] = 1.0
        return {"obs": obs, "action_mask": self.mask.copy()}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._observe(), {}

    def step(self, action):
        action = int(action)
        if not self.mask[action]:
            raise RuntimeError(f"masked action {action} taken (mask {self.mask.tolist()})")
        reward = float(action == self.target)
        self.t += 1
        return self._observe(), reward, self.t >= self.length, False, {}


def bandit(n: int = 5, length: int = 20, masked: bool = True) -> MaskedBandit:
    return MaskedBandit(n, length, masked)
