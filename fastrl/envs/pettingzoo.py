"""``env.backend = "pettingzoo"``: PettingZoo's multi-agent envs, each agent one row of the buffers.

An env of k agents is k consecutive envs of the engine (``engine.envs`` counts agent rows, a multiple of k), one
``EnvGroup`` whose members are its agents, in ``possible_agents`` order: the executor steps the game once every
member's action is in, and the actors batch the agents' rows like any others. ``env.id`` names the env:
``"pettingzoo.classic:connect_four_v3"`` (a PettingZoo module: its ``parallel_env()`` where it has one, else its
AEC ``env()``), or with ``env.backend = "pettingzoo"`` a ``package.module:factory`` that returns a PettingZoo
``ParallelEnv`` or ``AECEnv``; ``env.kwargs`` go to the constructor.

- **Parallel envs** step every live agent at once.
- **AEC envs** are stepped one agent at a time, as their ``agent_selection`` says: a turn-based game's mover
  is ``ACTING``, the others ``WAITING`` (their rows' actions are ignored, so only the critic learns from them;
  their ``action_mask`` is the env's own, which may allow nothing: the model then samples uniformly and the
  sample is thrown away). An agent's reward at a step is ``env.rewards`` after it: the loser of a game learns
  its -1 at the winner's move.
- **An agent that leaves** before the episode ends (terminated or truncated alone) ends its row's return there
  (``TERMINATED``); until the whole episode ends its row is ``ABSENT``: zeros, never the env's observation, and
  nothing of it reaches the loss (the slots' ``live`` field, ``fastrl.envs.base``).
- **The episode ends** when no agent is left; every member then reports its own return and is reset: the first
  member's reset seeds the game, the others read what it gave them.

Every agent must share one observation space and one action space (the rows are one array); pad them first
(SuperSuit's ``pad_observations_v0`` and ``pad_action_space_v0``) where they differ. Not supported: agents that
join after the reset (a row per possible agent is kept for the episode), and ``env.on_error = "reset"``.
State: the whole env is pickled at checkpoints (exact resume); an env that cannot be pickled (ALE-backed ones)
restarts from a seeded reset.
"""

from __future__ import annotations

import pickle
from typing import Any

import gymnasium as gym
import numpy as np

from csrc_free_kernels.step_end import CONTINUES, TERMINATED, TRUNCATED
from fastrl.envs.actions import UnsupportedEnvError
from fastrl.envs.atari_duel import AtariDuel, is_atari_duel
from fastrl.envs.base import ABSENT, ACTING, WAITING, EnvAdapter
from fastrl.envs.gym import GymEnv
from fastrl.envs.pettingzoo_games import make_pettingzoo
from fastrl.envs.registry import EnvBackend, register_env_backend
from fastrl.schema import EnvConfig

NAME = "pettingzoo"


class _Spaces(gym.Env):
    """One agent's spaces, for the row writer (``GymEnv``'s checks and copies) to be built on."""

    def __init__(self, observation_space, action_space):
        self.observation_space, self.action_space = observation_space, action_space


def _is_parallel(env) -> bool:
    from pettingzoo.utils.env import AECEnv, ParallelEnv

    if isinstance(env, ParallelEnv):
        return True
    if isinstance(env, AECEnv):
        return False
    raise UnsupportedEnvError(f"the factory returned {type(env).__name__}, not a PettingZoo ParallelEnv or AECEnv")


_LINKS = ("env", "aec_env", "par_env")  # how PettingZoo's wrappers and conversions hold the env they wrap


def _wrapper_chain(env) -> list:
    """The env, the env it wraps, and so on to the base env."""
    chain = [env]
    while True:
        inner = next((vars(chain[-1])[k] for k in _LINKS if k in vars(chain[-1])), None)
        if inner is None:
            return chain
        chain.append(inner)


class PettingZooGame:
    """One PettingZoo env stepping its agents' rows together (``fastrl.envs.base.EnvGroup``)."""

    def __init__(self, env_id: str, kwargs: dict):
        self.env_id = env_id
        self.env = make_pettingzoo(env_id, kwargs)
        self.parallel = _is_parallel(self.env)
        self.agents: list[str] = list(self.env.possible_agents)
        self.size = len(self.agents)
        first = self.agents[0]
        obs_space, act_space = self.env.observation_space(first), self.env.action_space(first)
        for agent in self.agents[1:]:
            if self.env.observation_space(agent) != obs_space or self.env.action_space(agent) != act_space:
                raise UnsupportedEnvError(
                    f"env.id = {env_id!r}: agent {agent!r}'s spaces differ from {first!r}'s; every agent's row is "
                    "one array: pad them first (SuperSuit's pad_observations_v0, pad_action_space_v0)"
                )
        self.writer = GymEnv(env_id, _Spaces(obs_space, act_space))  # the rows' checks and copies
        writer = self.writer
        self.obs_shape, self.obs_dtype, self.obs_layout = writer.obs_shape, writer.obs_dtype, writer.obs_layout
        self.action_spec, self.n_actions = writer.action_spec, writer.n_actions
        shape = (self.size, *self.writer.obs_shape)
        self.step_obs = np.zeros(shape, self.writer.obs_dtype)  # what the last step gave each agent
        self.reset_obs = np.zeros(shape, self.writer.obs_dtype)  # what the last reset gave each agent
        self.rewards = np.zeros(self.size)
        self.raw_rewards = self.rewards  # as scored: the same
        self.ends = np.zeros(self.size, np.int64)
        self.live = np.full(self.size, ACTING, np.int64)
        self.over = False
        self.unread_reset = [False] * self.size  # members yet to take the reset's observation
        self.raw: list[Any] = [None] * self.size  # each agent's last observation as the env gave it (matches)

    # ---------------------------------------------------------------- the group's protocol

    def reset_member(self, member: int, seed: int) -> np.ndarray:
        """The first member to reset after an episode resets the game with its seed; the others read theirs."""
        if not self.unread_reset[member]:
            self._reset(seed)
        self.unread_reset[member] = False
        return self.reset_obs[member]

    def probe_action(self, row: np.ndarray):
        return self.writer._probe_action(row)

    def step(self, actions: list) -> None:
        if self.parallel:
            self._step_parallel(actions)
        else:
            self._step_turn(actions)

    # ---------------------------------------------------------------- stepping

    def _reset(self, seed: int) -> None:
        result = self.env.reset(seed=seed)  # ``over`` stays the last step's: members after the first still read it
        if self.parallel:
            observations = result[0]
            self.live[:] = [ACTING if agent in observations else ABSENT for agent in self.agents]
            self._write(observations, self.reset_obs)
        else:
            self._read_turn(self.reset_obs)
        self.unread_reset = [True] * self.size

    def _step_parallel(self, actions: list) -> None:
        acting = {agent: self.writer.env_action(actions[m]) for m, agent in enumerate(self.agents) if self.live[m]}
        observations, rewards, terminations, truncations, _ = self.env.step(acting)
        self.rewards[:] = [float(rewards.get(agent, 0.0)) for agent in self.agents]
        self.over = not self.env.agents
        for m, agent in enumerate(self.agents):
            if not self.live[m]:
                self.ends[m], self.step_obs[m] = TERMINATED, 0
            elif terminations.get(agent) or truncations.get(agent):
                # a time limit that ends the episode bootstraps from the final observation; an agent cut alone
                # has no next state of its own in the rows: its return ends there
                cut = self.over and truncations.get(agent) and not terminations.get(agent)
                self.ends[m], self.live[m] = (TRUNCATED if cut else TERMINATED), ABSENT
                if cut:
                    self._write_one(m, observations[agent], self.step_obs[m], check_mask=False)
                else:
                    self.step_obs[m] = 0  # never what the env returns for a departed agent
            else:
                self.ends[m] = CONTINUES
                self._write_one(m, observations[agent], self.step_obs[m], check_mask=True)

    def _step_turn(self, actions: list) -> None:
        env = self.env
        mover = self.agents.index(env.agent_selection)
        env.step(self.writer.env_action(actions[mover]))
        self.rewards[:] = [float(env.rewards.get(agent, 0.0)) for agent in self.agents]
        # agents whose episode ended leave through PettingZoo's "dead steps"; the game is over when none is left
        left = {agent for agent in env.agents if env.terminations.get(agent) or env.truncations.get(agent)}
        self.over = set(env.agents) <= left
        for m, agent in enumerate(self.agents):
            if self.live[m] == ABSENT:
                self.ends[m] = TERMINATED
            elif agent in left:
                cut = env.truncations.get(agent) and not env.terminations.get(agent)
                self.ends[m] = TRUNCATED if cut and self.over else TERMINATED
            else:
                self.ends[m] = CONTINUES
        if self.over:
            for m, agent in enumerate(self.agents):  # the final observations, for truncated returns
                if self.live[m] != ABSENT:
                    self._write_one(m, env.observe(agent), self.step_obs[m], check_mask=False)
            self.live[:] = ABSENT
            return
        while env.agents and env.agent_selection in left:
            env.step(None)  # PettingZoo's dead step: removes a finished agent
        self._read_turn(self.step_obs)

    def _read_turn(self, into: np.ndarray) -> None:
        """A turn-based game's observations: the mover ACTING, the other live agents WAITING."""
        env, mover = self.env, self.env.agent_selection
        for m, agent in enumerate(self.agents):
            if agent not in env.agents:
                self.live[m] = ABSENT
                into[m] = 0
                continue
            self.live[m] = ACTING if agent == mover else WAITING
            self._write_one(m, env.observe(agent), into[m], check_mask=agent == mover)

    def _write(self, observations: dict, into: np.ndarray) -> None:
        for m, agent in enumerate(self.agents):
            if self.live[m]:
                self._write_one(m, observations[agent], into[m], check_mask=True)
            else:
                into[m] = 0  # an agent absent from the start

    def _write_one(self, m: int, obs, into: np.ndarray, check_mask: bool) -> None:
        self.raw[m] = obs  # as the env gave it: what a scripted player reads (fastrl.evaluation.matches)
        self.writer.write_observation(obs, into, check_mask)

    # ---------------------------------------------------------------- state

    def state(self) -> bytes:
        """Every object of the env's wrapper chain, attribute by attribute: PettingZoo's envs pickle through
        ``EzPickle`` (a fresh env from the constructor's arguments, not the game in progress)."""
        chain = [{k: v for k, v in vars(obj).items() if k not in _LINKS} for obj in _wrapper_chain(self.env)]
        return pickle.dumps((chain, self.live, self.over), protocol=pickle.HIGHEST_PROTOCOL)

    def restore(self, state: bytes) -> None:
        """Onto this game's env, made from the same id and kwargs as the saved one's."""
        chain, live, self.over = pickle.loads(state)
        objects = _wrapper_chain(self.env)
        if len(objects) != len(chain):
            raise ValueError(f"the saved env had {len(chain)} wrappers, this one {len(objects)}")
        for obj, attributes in zip(objects, chain):
            vars(obj).update(attributes)
        self.live[:] = live

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None


class PettingZooAgent:
    """One agent of a ``PettingZooGame`` behind the executor's adapter protocol (``fastrl.envs.base``)."""

    def __init__(self, game: PettingZooGame | AtariDuel, member: int):
        self.group, self.member = game, member
        self.obs_shape, self.obs_dtype, self.obs_layout = game.obs_shape, game.obs_dtype, game.obs_layout
        self.action_spec, self.n_actions = game.action_spec, game.n_actions
        self.frames_per_step = getattr(game, "frames_per_step", 1)
        self.agents = game.size
        self.agent = game.agents[member]

    @property
    def live(self) -> int:
        return int(self.group.live[self.member])

    def reset(self, seed: int, out: np.ndarray) -> None:
        out[...] = self.group.reset_member(self.member, seed)

    def step(self, action, prev: np.ndarray, out: np.ndarray) -> tuple[float, float, int, bool]:
        """This agent's part of the step the executor took with every member's action."""
        game, m = self.group, self.member
        out[...] = game.step_obs[m]
        return float(game.rewards[m]), float(game.raw_rewards[m]), int(game.ends[m]), game.over

    def probe(self, seed: int = 0) -> None:
        """A reset and one step of the whole game with each acting agent's first allowed action."""
        game = self.group
        rows = np.zeros((game.size, *self.obs_shape), self.obs_dtype)
        for m in range(game.size):
            game.reset_member(m, seed)
            rows[m] = game.reset_obs[m]
        actions = [game.probe_action(rows[m]) if game.live[m] == ACTING else 0 for m in range(game.size)]
        game.step(actions)
        game.unread_reset = [False] * game.size

    def get_state(self):
        """The first member saves the game; the others only say they are its members."""
        return self.group.state() if self.member == 0 else {"member": self.member}

    def set_state(self, state) -> None:
        if self.member == 0:
            self.group.restore(state)

    def close(self) -> None:
        self.group.close()  # every member closes it; the first does


def make_game(config: EnvConfig) -> PettingZooGame | AtariDuel:
    """The game ``config`` names: PettingZoo's Atari games through fastrl's Atari protocol
    (``fastrl.envs.atari_duel``), every other env as PettingZoo steps it."""
    if is_atari_duel(config.id):
        return AtariDuel(config.id, dict(config.kwargs), config.atari)
    return PettingZooGame(config.id, dict(config.kwargs))


def make_games(config: EnvConfig, env_indices: list[int]) -> list[EnvAdapter]:
    """One game per k consecutive envs (the executor's group sizes are multiples of k)."""
    adapters: list[EnvAdapter] = []
    while len(adapters) < len(env_indices):
        game = make_game(config)
        if len(env_indices) % game.size:
            raise ValueError(f"{len(env_indices)} envs cannot hold whole games of {game.size} agents")
        adapters += [PettingZooAgent(game, m) for m in range(game.size)]
    return adapters


def make_one(config: EnvConfig, env_index: int) -> EnvAdapter:
    """A game's first agent (the probe's): it sizes the rows and counts the agents."""
    return PettingZooAgent(make_game(config), 0)


def claims(env_id: str) -> bool:
    """PettingZoo's modules ('pettingzoo.classic:connect_four_v3'); any 'package.module:factory' where
    ``env.backend = "pettingzoo"`` names this backend (with "auto" the ``factory`` backend claims those first)."""
    return ":" in env_id


register_env_backend(
    EnvBackend(
        NAME,
        claims,
        make_one,
        "PettingZoo envs ('pettingzoo.<family>:<env>', or a module:factory by name), each agent a row",
        make_group=make_games,
        group_is_one_env=True,
    )
)
