"""A PettingZoo ParallelEnv whose agents leave at different times, for the multi-agent engine tests.

``agents`` agents each see a 4-float observation and take Discrete(3); agent i leaves (terminated) after
``(i + 1) * life`` steps, so the episode ends when the last one does. An agent's reward is 1 when its action is
``(t + i) % 3`` and 0 otherwise (something to learn). Every step returns observations for every possible agent,
the departed ones' all NaN: an engine that let a departed agent's row reach the loss would learn NaN.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from pettingzoo.utils.env import ParallelEnv


class LeavingAgents(ParallelEnv):
    metadata = {"name": "leaving_agents_v0"}

    def __init__(self, agents: int = 3, life: int = 4):
        self.possible_agents = [f"agent_{i}" for i in range(agents)]
        self.life = life
        self.rng = np.random.default_rng(0)
        self.t = 0
        self.agents: list[str] = []

    def observation_space(self, agent):
        return spaces.Box(-np.inf, np.inf, (4,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(3)

    def _obs(self, i: int) -> np.ndarray:
        if self.possible_agents[i] not in self.agents:
            return np.full(4, np.nan, np.float32)
        return np.array([i, self.t % 3, (self.t + i) % 3, self.rng.random()], np.float32)

    def reset(self, seed=None, options=None):
        self.rng = np.random.default_rng(seed)
        self.t = 0
        self.agents = list(self.possible_agents)
        return {a: self._obs(i) for i, a in enumerate(self.possible_agents)}, {a: {} for a in self.agents}

    def step(self, actions):
        rewards = {a: float(actions[a] == (self.t + i) % 3) for i, a in enumerate(self.possible_agents) if a in actions}
        self.t += 1
        leaving = {a for i, a in enumerate(self.possible_agents) if a in self.agents and self.t >= (i + 1) * self.life}
        terminations = {a: a in leaving for a in self.agents}
        truncations = {a: False for a in self.agents}
        self.agents = [a for a in self.agents if a not in leaving]
        observations = {a: self._obs(i) for i, a in enumerate(self.possible_agents)}  # NaN for the departed
        return observations, rewards, terminations, truncations, {a: {} for a in terminations}


def leaving_agents(agents: int = 3, life: int = 4) -> LeavingAgents:
    return LeavingAgents(agents, life)
