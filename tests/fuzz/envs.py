"""An env that returns what the fuzz tells it to: env id ``tests.fuzz.envs:make``, ``env.kwargs = {spec = JSON}``.

The spec: ``obs`` and ``act``, the spaces it declares (``tests.fuzz.strategies.space_spec``); ``fault``, what goes
wrong; ``at``, the step of each env (counted from its creation: the start-up probe's step is 1) where it does;
``value``, what it returns then, as JSON (``{"array": [...], "dtype": "int64"}`` for an array, ``{"space": ...}``
for a space). Faults: ``obs`` (the observation replaced), ``obs_fill`` (filled with the value), ``obs_dtype``
(cast), ``reward``, ``terminated``, ``truncated``, ``info``, ``reset_return`` (what reset returns), ``obs_space`` /
``act_space`` (the declared space replaced), ``raise_every`` (step raises every ``value`` steps), ``mutate`` (the
returned observation changed in place after it was returned)."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np


def space_of(spec: dict) -> gym.Space:
    kind = spec["kind"]
    if kind == "box":
        shape = tuple(spec["shape"])
        low = np.asarray(spec["low"], np.float64).reshape(shape)
        high = np.asarray(spec["high"], np.float64).reshape(shape)
        return gym.spaces.Box(low, high, shape, np.dtype(spec["dtype"]))
    if kind == "discrete":
        return gym.spaces.Discrete(spec["n"], start=spec["start"])
    if kind == "multidiscrete":
        return gym.spaces.MultiDiscrete(spec["nvec"])
    if kind == "multibinary":
        return gym.spaces.MultiBinary(spec["n"])
    if kind == "dict":
        return gym.spaces.Dict({k: space_of(v) for k, v in spec["parts"].items()})
    raise ValueError(kind)


def value_of(value):
    """JSON -> what the env returns: arrays and spaces from their tagged forms."""
    if isinstance(value, dict) and "array" in value:
        return np.asarray(value["array"], np.dtype(value["dtype"]))
    if isinstance(value, dict) and "space" in value:
        return space_of(value["space"])
    return value


class FuzzEnv(gym.Env):
    def __init__(self, spec: str):
        s = json.loads(spec)
        self.observation_space, self.action_space = space_of(s["obs"]), space_of(s["act"])
        self.fault, self.at, self.value = s.get("fault", "none"), s.get("at", 3), value_of(s.get("value"))
        self.steps = self.resets = 0
        self.last = None

    def _obs(self):
        return self.observation_space.sample()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(seed)
        self.resets += 1
        obs = self._obs()
        if self.fault == "reset_return" and self.resets >= self.at:
            return self.value
        return obs, {}

    def step(self, action):
        self.steps += 1
        if self.fault == "mutate" and isinstance(self.last, np.ndarray):
            self.last += 1  # the array fastrl was given last step, changed after the fact
        if self.fault == "raise_every" and self.value and self.steps % max(int(self.value), 1) == 0:
            raise RuntimeError(f"step {self.steps} failed on purpose")
        obs, reward, terminated, truncated, info = self._obs(), 1.0, self.steps % 17 == 0, False, {}
        if self.steps == self.at:
            fault, value = self.fault, self.value
            if fault == "obs":
                obs = value
            elif fault == "obs_fill":
                obs = np.full_like(np.asarray(obs), value) if not isinstance(obs, dict) else obs
            elif fault == "obs_dtype":
                obs = np.asarray(obs).astype(value) if not isinstance(obs, dict) else obs
            elif fault == "reward":
                reward = value
            elif fault == "terminated":
                terminated = value
            elif fault == "truncated":
                truncated = value
            elif fault == "info":
                info = value
            elif fault == "obs_space":
                self.observation_space = value
            elif fault == "act_space":
                self.action_space = value
        self.last = obs
        return obs, reward, terminated, truncated, info


def make(spec: str) -> gym.Env:
    return FuzzEnv(spec)
