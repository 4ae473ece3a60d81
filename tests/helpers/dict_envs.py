"""Dict-observation envs for the tests: ids "tests.helpers.dict_envs:<factory>".

- ``cartpole``: CartPole-v1 whose 4 numbers are split across keys (nested if ``nested``), so the
  flattened row must equal CartPole's own observation reordered by gymnasium's flatten order.
- ``image_vector``: a one-step bandit whose reward needs both parts: the image shows a bright
  column on the left or the right, the vector holds a sign; the rewarded action is
  (side XOR sign). Either part alone gives no better than chance (an expected reward of 0.5).
- ``with_space``: a tiny env whose Dict holds any space (the refusal tests); ``with_observation_space``:
  one whose whole observation is of any space.
"""
from collections import OrderedDict

import gymnasium as gym
import numpy as np


class DictCartPole(gym.Wrapper):
    """CartPole's (x, x_dot, theta, theta_dot) as {"pole": {"angle", "velocity"}, "cart": [x, x_dot]}."""

    def __init__(self, nested: bool = True):
        super().__init__(gym.make("CartPole-v1"))
        box = self.env.observation_space
        pole = {"velocity": gym.spaces.Box(box.low[3:], box.high[3:], dtype=np.float32),
                "angle": gym.spaces.Box(box.low[2:3], box.high[2:3], dtype=np.float32)}
        self.nested = nested
        spaces = {"cart": gym.spaces.Box(box.low[:2], box.high[:2], dtype=np.float32)}
        if nested:
            spaces["pole"] = gym.spaces.Dict(pole)
        else:
            spaces.update({f"pole_{key}": space for key, space in pole.items()})
        self.observation_space = gym.spaces.Dict(spaces)

    def _split(self, obs: np.ndarray) -> dict:
        pole = {"velocity": obs[3:].copy(), "angle": obs[2:3].copy()}
        if self.nested:
            return {"cart": obs[:2].copy(), "pole": pole}
        return {"cart": obs[:2].copy(), **{f"pole_{key}": value for key, value in pole.items()}}

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return self._split(obs), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._split(obs), reward, terminated, truncated, info


def cartpole(nested: bool = True) -> gym.Env:
    return DictCartPole(nested)


class ImageVectorEnv(gym.Env):
    """One step per episode; reward 1 for action (side XOR sign), else 0."""

    def __init__(self, size: int = 12, channels_last: bool = True, steps: int = 1):
        shape = (size, size, 3) if channels_last else (3, size, size)
        self.observation_space = gym.spaces.Dict({
            "screen": gym.spaces.Box(0, 255, shape, np.uint8),
            "sign": gym.spaces.Box(-1.0, 1.0, (1,), np.float32),
            "noise": gym.spaces.Box(-1.0, 1.0, (3,), np.float64),  # float64: stored as float32
        })
        self.action_space = gym.spaces.Discrete(2)
        self.size, self.channels_last, self.steps = size, channels_last, steps
        self.t, self.answer = 0, 0

    def _obs(self) -> dict:
        side, sign = (int(b) for b in self.np_random.integers(0, 2, 2))
        self.answer = side ^ sign
        image = np.zeros((self.size, self.size, 3), np.uint8)
        columns = slice(0, self.size // 2) if side == 0 else slice(self.size // 2, self.size)
        image[:, columns, :] = 200
        if not self.channels_last:
            image = np.ascontiguousarray(image.transpose(2, 0, 1))
        return {"screen": image, "sign": np.array([1.0 if sign else -1.0], np.float32),
                "noise": self.np_random.uniform(-1.0, 1.0, 3)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        reward = float(int(action) == self.answer)
        self.t += 1
        return self._obs(), reward, self.t >= self.steps, False, {}


def image_vector(size: int = 12, channels_last: bool = True, steps: int = 1) -> gym.Env:
    return ImageVectorEnv(size, channels_last, steps)


class WithSpace(gym.Env):
    """A Dict of a vector Box and ``kind``: the space fastrl is asked to take."""

    SPACES = {
        "discrete": gym.spaces.Discrete(3),
        "text": gym.spaces.Text(5),
        "multi_discrete": gym.spaces.MultiDiscrete([2, 3]),
        "second_image": gym.spaces.Box(0, 255, (8, 8, 3), np.uint8),
        "nested_discrete": gym.spaces.Dict({"inner": gym.spaces.Discrete(2)}),
        "bool_box": gym.spaces.Box(0, 1, (2,), np.bool_),
    }

    def __init__(self, kind: str = "discrete"):
        spaces = OrderedDict([("vec", gym.spaces.Box(-1, 1, (2,), np.float32)),
                              ("image", gym.spaces.Box(0, 255, (8, 8, 3), np.uint8)),
                              ("extra", self.SPACES[kind])])
        self.observation_space = gym.spaces.Dict(spaces)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, True, False, {}


def with_space(kind: str = "text") -> gym.Env:
    return WithSpace(kind)


class _Fixed(gym.Env):
    """An env of any observation space: each observation a sample of it (or ``returns``; a Dict's sample with the
    parts of ``bad`` replaced), any action."""

    def __init__(self, space, returns=None, bad: dict | None = None):
        self.observation_space, self.action_space = space, gym.spaces.Discrete(2)
        self.returns, self.bad = returns, bad or {}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(seed)
        return self._obs(), {}

    def step(self, action):
        return self._obs(), 0.0, False, False, {}

    def _obs(self):
        if self.returns is not None:
            return self.returns
        sample = self.observation_space.sample()
        return {**sample, **self.bad} if self.bad else sample


def discrete_parts(bad: dict | None = None) -> gym.Env:
    """A Dict of a vector, a Discrete(4, start=1) direction and MultiBinary(3) flags, random each step (``bad``
    replaces parts' values: the per-step checks)."""
    return _Fixed(gym.spaces.Dict({
        "vec": gym.spaces.Box(-1, 1, (2,), np.float32),
        "direction": gym.spaces.Discrete(4, start=1),
        "flags": gym.spaces.MultiBinary(3),
    }), bad=bad)


def with_observation_space(space, returns=None) -> gym.Env:
    """A tiny env whose observations are of ``space`` (``returns``: what it returns instead, a wrong one)."""
    return _Fixed(space, returns)
