"""PettingZoo's Atari games (``pettingzoo.atari:pong_v3``, ...) through fastrl's own Atari protocol.

PettingZoo's Atari envs (on ``multi-agent-ale-py``) step one emulator frame at a time and give every player
the raw 210x160 RGB screen; preprocessing is left to SuperSuit wrappers that copy and resize frames in
Python. Here the game's emulator is driven the way ``fastrl.envs.atari.AtariEnv`` drives a one-player game,
with the same kernels: ``env.atari.frame_skip`` frames per agent step with every player's action, the last two
screens max-pooled in gray, area-resized to ``size`` x ``size``, a stack of ``stack`` frames, 1..``noop_max``
no-ops after each reset drawn from its seed, rewards clipped to their sign for learning (the score keeps
them raw), the episode truncated after ``max_episode_frames`` frames. So a player's rows are what the
one-player game's rows would be where the screens agree (Pong: the first player is the right-hand green
paddle, with the one-player game's palette and layout), and one emulator step serves every player.

``env.atari.mirror_players``: every player after the first sees the screen flipped left-right, so in a
two-sided game (Pong, Boxing) each player sees itself on the first player's side and one shared policy
serves every seat. The ROM comes from ale-py's package (which ships them): nothing is downloaded.

Not supported (refused before the run starts): sticky actions (``env.atari.repeat_action_probability`` > 0;
PettingZoo's envs have none either), ``episodic_life`` and ``fire_reset`` (the serve is the players' own move
here: Pong's classic mode has a serve timer).
"""

from __future__ import annotations

import os
import pickle

import numpy as np

from csrc_free_kernels.frames import make_resize_plan, stack_fill_kernel
from csrc_free_kernels.step_end import CONTINUES, TERMINATED, TRUNCATED
from fastrl.envs.actions import ActionSpec, UnsupportedEnvError
from fastrl.envs.atari_screen import StepScreens
from fastrl.envs.base import ABSENT, ACTING
from fastrl.envs.pettingzoo_games import make_pettingzoo
from fastrl.schema import AtariConfig

ATARI_PREFIX = "pettingzoo.atari:"


def is_atari_duel(env_id: str) -> bool:
    return env_id.startswith(ATARI_PREFIX)


class _Screens:
    """``multi_agent_ale_py``'s ALE as ``StepScreens`` reads ale-py's: its ``getScreenDims`` is (width, height).
    Its ``getScreen`` converts the array to ctypes at every call (a third of a step's screen reading, measured); the
    few arrays ``StepScreens`` fills are converted once here and their pointers kept."""

    def __init__(self, ale):
        self._ale = ale
        self._pointers: dict[int, tuple[np.ndarray, object]] = {}  # id(array) -> (the array, kept alive; its view)
        try:
            from multi_agent_ale_py.ale_python_interface import ale_lib

            self._lib = ale_lib
        except ImportError:  # another release's internals: its own calls
            self._lib = None

    def getScreenDims(self) -> tuple[int, int]:  # noqa: N802 - ALE's name
        width, height = self._ale.getScreenDims()
        return height, width

    def getScreen(self, out: np.ndarray) -> None:  # noqa: N802
        if self._lib is None:
            self._ale.getScreen(out)
        else:
            self._lib.getScreen(self._ale.obj, self._pointer(out))

    def getScreenGrayscale(self, out: np.ndarray) -> None:  # noqa: N802
        if self._lib is None:
            self._ale.getScreenGrayscale(out)
        else:
            self._lib.getScreenGrayscale(self._ale.obj, self._pointer(out))

    def _pointer(self, out: np.ndarray):
        kept = self._pointers.get(id(out))
        if kept is None or kept[0] is not out:
            kept = self._pointers[id(out)] = (out, np.ctypeslib.as_ctypes(out))
        return kept[1]


def _check_protocol(env_id: str, config: AtariConfig) -> None:
    refused = {
        "repeat_action_probability": config.repeat_action_probability > 0,
        "episodic_life": config.episodic_life,
    }
    for key, bad in refused.items():
        if bad:
            raise UnsupportedEnvError(
                f"env.atari.{key} is not supported for the multi-player Atari game {env_id!r} "
                "(fastrl.envs.atari_duel: one emulator steps every player)"
            )


def _atari_base(env):
    """PettingZoo's ``ParallelAtariEnv`` under its wrappers (the object holding ``ale``)."""
    seen = env
    for _ in range(16):
        if hasattr(seen, "ale") and hasattr(seen, "action_mapping"):
            return seen
        seen = getattr(seen, "env", None) or getattr(seen, "unwrapped", None)
        if seen is None:
            break
    raise UnsupportedEnvError(f"{type(env).__name__} is not one of PettingZoo's Atari envs (no ALE inside)")


def _rom_folder() -> str:
    """ale-py's package folder: PettingZoo looks for ``<folder>/roms/<game>.bin``, where ale-py keeps its ROMs."""
    import ale_py

    return os.path.dirname(ale_py.__file__)


class _FrameActions:
    """One emulator frame with every player's action: ``multi_agent_ale_py``'s ``act`` converts its arrays to
    ctypes at each frame (a quarter of a frame's time); here the arrays and their pointers are made once."""

    def __init__(self, ale, players: int):
        self.actions = np.zeros(players, np.intc)
        self.rewards = np.zeros(players, np.intc)
        self._ale = ale
        try:
            from multi_agent_ale_py.ale_python_interface import ale_lib

            self._call = ale_lib.actMulti
            self._args = (ale.obj, np.ctypeslib.as_ctypes(self.actions), np.ctypeslib.as_ctypes(self.rewards))
        except (ImportError, AttributeError):  # another release's internals: its own act
            self._call = None

    def __call__(self) -> np.ndarray:
        if self._call is None:
            return self._ale.act(self.actions)
        self._call(*self._args)
        return self.rewards


class AtariDuel:
    """One multi-player Atari game, every player a row (``fastrl.envs.base.EnvGroup``; read by
    ``fastrl.envs.pettingzoo.PettingZooAgent`` like a ``PettingZooGame``)."""

    def __init__(self, env_id: str, kwargs: dict, config: AtariConfig):
        _check_protocol(env_id, config)
        kwargs = {"full_action_space": config.full_action_space, **kwargs, "auto_rom_install_path": _rom_folder()}
        self.env_id, self.config = env_id, config
        self._env = make_pettingzoo(env_id, kwargs)
        base = _atari_base(self._env)
        self.ale = base.ale
        self._actions = np.asarray(base.action_mapping, np.intc)
        self.agents: list[str] = list(base.possible_agents)
        self.size = len(self.agents)
        self.n_actions = len(self._actions)
        self.action_spec = ActionSpec.discrete(self.n_actions)
        self.obs_shape: tuple[int, ...] = (config.stack, config.size, config.size)
        self.obs_dtype = np.dtype(np.uint8)
        self.obs_layout = None
        self.frames_per_step = config.frame_skip
        height, width = _Screens(self.ale).getScreenDims()
        self._screens = StepScreens(_Screens(self.ale), make_resize_plan((height, width), (config.size, config.size)))
        shape = (self.size, *self.obs_shape)
        self.step_obs = np.zeros(shape, np.uint8)
        self.reset_obs = np.zeros(shape, np.uint8)
        self._stack = self.step_obs[0]  # the first player's view, pushed in place; the others' derive from it
        self.rewards = np.zeros(self.size)  # clipped to their sign where env.atari.clip_rewards
        self.raw_rewards = np.zeros(self.size)
        self._step_raw = np.zeros(self.size, np.intc)  # a step's summed frame rewards (ALE's are ints)
        self.ends = np.zeros(self.size, np.int64)
        self.live = np.full(self.size, ACTING, np.int64)
        self.over = False
        self.unread_reset = [False] * self.size
        self.raw: list = [None] * self.size  # scripted players read the row itself (fastrl.evaluation.matches)
        self._frames = 0
        self._act = _FrameActions(self.ale, self.size)

    # ---------------------------------------------------------------- the group's protocol

    def reset_member(self, member: int, seed: int) -> np.ndarray:
        """The first member to reset after an episode resets the game with its seed; the others read theirs."""
        if not self.unread_reset[member]:
            self._reset(seed)
        self.unread_reset[member] = False
        return self.reset_obs[member]

    def probe_action(self, row: np.ndarray) -> int:
        return 0

    def _reset(self, seed: int) -> None:
        ale = self.ale
        self._act.actions[:] = 0  # NOOP for every player
        rng = np.random.default_rng(seed)
        ale.reset_game()
        self._screens.restart()
        self._frames = 0
        noops = int(rng.integers(1, self.config.noop_max + 1)) if self.config.noop_max > 0 else 0
        for _ in range(noops):
            self._act()
            self._frames += 1
            if ale.game_over():
                ale.reset_game()
        self._screens.fetch_last(pool=False)
        self._screens.push(self._stack, self._stack)
        stack_fill_kernel(self._stack)
        self._views()
        self.reset_obs[:] = self.step_obs
        self.live[:] = ACTING
        self.unread_reset = [True] * self.size

    def step(self, actions: list) -> None:
        ale, screens, skip = self.ale, self._screens, self.config.frame_skip
        act = self._act
        act.actions[:] = self._actions[actions]
        raw = self._step_raw
        raw[:] = 0
        over = False
        for i in range(skip):
            raw += act()
            if ale.game_over():
                over = True
                self._frames += i + 1
                screens.fetch_last(pool=False)
                break
            if i == skip - 2:
                screens.fetch_mid()
        else:
            screens.fetch_last(pool=skip > 1)
            self._frames += skip
        screens.push(self._stack, self._stack)
        self._views()
        truncated = not over and self._frames >= self.config.max_episode_frames
        self.raw_rewards[:] = raw
        if self.config.clip_rewards:
            np.sign(raw, out=self.rewards, casting="unsafe")
        else:
            self.rewards[:] = raw
        self.ends[:] = TERMINATED if over else TRUNCATED if truncated else CONTINUES
        self.over = over or truncated
        if self.over:
            self.live[:] = ABSENT

    def _views(self) -> None:
        """The other players' rows from the first's (``step_obs[0]``, the stack itself)."""
        for m in range(1, self.size):
            self.step_obs[m] = self._stack[:, :, ::-1] if self.config.mirror_players else self._stack

    # ---------------------------------------------------------------- state

    def state(self) -> bytes:
        """The emulator (its state encoded to bytes), the frame stack and the counters."""
        snapshot = self.ale.cloneState()
        try:
            emulator = bytes(self.ale.encodeState(snapshot))
        finally:
            self.ale.deleteState(snapshot)
        return pickle.dumps((emulator, self._stack.copy(), self._frames, self.live.copy(), self.over))

    def restore(self, state: bytes) -> None:
        emulator, stack, self._frames, live, self.over = pickle.loads(state)
        snapshot = self.ale.decodeState(np.frombuffer(emulator, np.uint8).copy())
        try:
            self.ale.restoreState(snapshot)
        finally:
            self.ale.deleteState(snapshot)
        self._screens.restart()
        self._stack[:] = stack
        self.live[:] = live

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None
