"""Native Atari adapter: ``ale_py.ALEInterface`` with the standard preprocessing, no gymnasium.

Per agent step: ``frame_skip`` emulator frames with one action, max-pool of the last two
grayscale screens, area resize to ``size`` x ``size``, pushed onto a ``stack``-frame stack
that is written straight into the executor's buffer row (numba kernels from
``csrc_free_kernels.frames``; no allocation per step).

Episode start (``reset(seed, out)``): ``reset_game``, then 1..``noop_max`` single-frame
no-ops (count drawn from the reset seed), then, for games whose minimal action set has FIRE,
one agent step of FIRE and one of the set's third action (the baselines ``FireResetEnv``).
Every frame of the first stack is the first observation.

Seeding and sticky actions. ALE keeps its random generator (used only for sticky actions;
with them off the emulator is deterministic, whatever ALE's seed) in the emulator, and the
only way to reseed it is ``setInt('random_seed')`` followed by ``loadROM``: ~90 ms, some
300 agent steps, at every reset. ``restoreState`` of a state cloned with its RNG
only replays one saved stream. So ALE's ``repeat_action_probability`` is set to 0 and the
adapter applies ALE's own sticky rule itself: at every emulator frame, with probability p,
the previous frame's action is played instead of the agent's (after a reset the previous
action is NOOP). Its uniforms come from a numpy generator seeded by the reset seed, which
also draws the no-op count, so ``reset(seed)`` fixes the whole episode for a given action
sequence at no cost per reset, whatever the env did before wherever ALE's ``reset_game``
forgets the episodes before it. On some ROMs it does not (``fastrl bench ale-states``: 13
of 104 with one past, Frostbite among them; Seaquest with longer ones); resets stay ALE's
own all the same (why: docs/results, "why resets stay ALE's").

Episodic life (``episodic_life``): losing a life ends the return for learning (``done``) but
not the game (``episode_over`` stays False, the executor does not reset); as after a reset,
FIRE is pressed (if the game needs it) and the stack restarts from the new frame.
Truncation: after ``max_episode_frames`` emulator frames since the reset (no-ops and FIRE
included), ``episode_over`` is True and ``done`` is ``TRUNCATED`` (a time limit: the learner
bootstraps from the value of the final observation), unless the game ended or a life was lost
(under episodic life) at that same step, which is a ``TERMINATED`` end. ``frames_per_step``
(= frame_skip) does not count the frames of no-ops and FIRE presses.
"""

from __future__ import annotations

import difflib
import functools
import re
from typing import TYPE_CHECKING

import numpy as np

from csrc_free_kernels.frames import make_resize_plan, stack_fill_kernel
from csrc_free_kernels.step_end import CONTINUES, TERMINATED, TRUNCATED
from fastrl.envs.actions import ActionSpec
from fastrl.envs.ale_state_check import warn_if_restore_is_inexact
from fastrl.envs.atari_screen import StepScreens
from fastrl.schema import AtariConfig

if TYPE_CHECKING:
    from ale_py import ALEInterface

    from fastrl.envs.obs_layout import ObsLayout

_ID = re.compile(r"^(?P<ale>ALE/)?(?P<game>[A-Za-z0-9_]+?)(?P<variant>NoFrameskip|Deterministic)?-v(?P<version>\d+)$")
_KWARGS = ("mode", "difficulty")
_U_BLOCK = 1024  # sticky-action uniforms drawn at a time


@functools.lru_cache(maxsize=1)
def _roms() -> dict[str, str]:
    """{normalised game name: ROM id}: 'pong' -> 'pong', 'mspacman' -> 'ms_pacman'."""
    from ale_py import roms

    return {rom.replace("_", "").lower(): rom for rom in roms.get_all_rom_ids()}


def _camel(rom: str) -> str:
    return rom.title().replace("_", "")  # ale-py's own id spelling: ms_pacman -> MsPacman


def is_atari_id(env_id: str) -> bool:
    """True for ALE ids: ``ALE/<Game>-v5``, ``<Game>NoFrameskip-v4``, ``<Game>-v4``, ``<Game>Deterministic-v0``...

    ``ALE/...`` and ``...NoFrameskip/Deterministic-vN`` ids are Atari even when the game is
    unknown (so that :class:`AtariEnv` can say which games come close); a bare ``<Name>-vN``
    is Atari only if ``<Name>`` is a ROM that ale-py ships (``CartPole-v1`` is not).
    """
    match = _ID.match(env_id)
    if match is None:
        return env_id.startswith("ALE/")
    if match["ale"] or match["variant"]:
        return True
    try:
        return match["game"].replace("_", "").lower() in _roms()
    except ImportError:
        return False


def parse_atari_id(env_id: str) -> tuple[str, float]:
    """(ROM id, default sticky-action probability) of an ALE id; ValueError naming close matches."""
    match = _ID.match(env_id)
    if match is None:
        raise ValueError(f"{env_id!r} is not an Atari id; expected e.g. 'ALE/Pong-v5' or 'PongNoFrameskip-v4'")
    roms = _roms()
    rom = roms.get(match["game"].replace("_", "").lower())
    if rom is None:
        names = sorted(_camel(r) for r in roms.values())
        close = difflib.get_close_matches(match["game"], names, n=5, cutoff=0.5)
        hint = f"close matches: {', '.join(close)}" if close else f"known games: {', '.join(names)}"
        raise ValueError(f"unknown Atari game {match['game']!r} in env id {env_id!r}; {hint}")
    version = int(match["version"])
    # gymnasium's registrations: v0 and v5 are sticky (0.25), v4 (incl. NoFrameskip-v4) is not.
    sticky = 0.0 if (version == 4 and not match["ale"]) else 0.25
    return rom, sticky


class AtariEnv:
    """One ALE game behind the executor's adapter protocol (see ``fastrl.envs.base``).

    ``kwargs`` (``env.kwargs``): ``mode`` and ``difficulty``, the ALE game mode/difficulty.
    """

    def __init__(self, env_id: str, config: AtariConfig, kwargs: dict | None = None):
        from ale_py import Action, ALEInterface, LoggerMode, roms

        rom, default_sticky = parse_atari_id(env_id)
        kwargs = dict(kwargs or {})
        unknown = sorted(set(kwargs) - set(_KWARGS))
        if unknown:
            raise ValueError(
                f"env.kwargs {unknown} not understood for Atari id {env_id!r}; allowed: {', '.join(_KWARGS)} "
                "(frame skip, sticky actions, action set... are env.atari.* keys)"
            )
        self.env_id = env_id
        self.config = config
        p = config.repeat_action_probability
        self.repeat_action_probability = default_sticky if p < 0 else float(p)

        ALEInterface.setLoggerMode(LoggerMode.Error)
        ale = ALEInterface()
        ale.setFloat("repeat_action_probability", 0.0)  # applied here instead; see the module docstring
        ale.setInt("random_seed", 0x5EED)  # unused without ALE's sticky actions; fixed, not from the clock
        self._rom_path = str(roms.get_rom_path(rom))
        ale.loadROM(self._rom_path)
        for key, available, setter in (
            ("mode", ale.getAvailableModes(), ale.setMode),
            ("difficulty", ale.getAvailableDifficulties(), ale.setDifficulty),
        ):
            if key in kwargs:
                if kwargs[key] not in available:
                    raise ValueError(f"env.kwargs.{key} = {kwargs[key]!r} for {rom}: available {list(available)}")
                setter(kwargs[key])  # takes effect at the next reset_game
        self._ale: ALEInterface | None = ale

        minimal = list(ale.getMinimalActionSet())
        actions = list(ale.getLegalActionSet()) if config.full_action_space else minimal
        self._actions = [a.value for a in actions]  # ints: act(int) is what the hot loop calls
        self._noop = Action.NOOP.value
        self._fire_actions: tuple[int, ...] = ()
        if config.fire_reset and Action.FIRE in minimal and len(minimal) >= 3:
            self._fire_actions = (Action.FIRE.value, minimal[2].value)

        self.n_actions = len(self._actions)
        self.action_spec = ActionSpec.discrete(self.n_actions)
        self.obs_shape: tuple[int, ...] = (config.stack, config.size, config.size)
        self.obs_dtype = np.dtype(np.uint8)
        self.obs_layout: ObsLayout | None = None  # a Box of frames, not a Dict
        self.frames_per_step = config.frame_skip

        height, width = ale.getScreenDims()
        self._screens = StepScreens(ale, make_resize_plan((height, width), (config.size, config.size)))
        self._u = np.empty(_U_BLOCK, np.float64)
        self._u_pos = _U_BLOCK
        self._rng = np.random.default_rng(0)
        self._last_action = self._noop
        self._lives = 0
        self._frames = 0

    @property
    def _emulator(self) -> ALEInterface:
        """The ALE instance; an error once ``close()`` released it."""
        if self._ale is None:
            raise RuntimeError(f"{self.env_id}: used after close()")
        return self._ale

    # ---------------------------------------------------------------- emulation

    def _repeat(self, action: int) -> tuple[int, bool]:
        """Play ``action`` for frame_skip frames, keeping the last two screens; (raw reward, game over)."""
        if self.repeat_action_probability > 0.0:
            return self._repeat_sticky(action)
        ale, screens = self._emulator, self._screens
        skip = self.frames_per_step
        reward = 0
        for i in range(skip):
            reward += ale.act(action)
            if ale.game_over():
                return self._ended(reward, i)
            if i == skip - 2:
                screens.fetch_mid()
        screens.fetch_last(pool=skip > 1)
        self._frames += skip
        return reward, False

    def _repeat_sticky(self, action: int) -> tuple[int, bool]:
        """``_repeat`` with ALE's sticky rule: at each frame, with probability p, the previous
        frame's action is played instead (a loop of its own so the common p = 0 pays nothing)."""
        ale = self._emulator
        skip = self.frames_per_step
        p = self.repeat_action_probability
        reward = 0
        for i in range(skip):
            if self._u_pos == _U_BLOCK:
                self._rng.random(out=self._u)
                self._u_pos = 0
            if self._u[self._u_pos] >= p:  # ALE's rule: otherwise repeat the previous frame's action
                self._last_action = action
            self._u_pos += 1
            reward += ale.act(self._last_action)
            if ale.game_over():
                return self._ended(reward, i)
            if i == skip - 2:
                self._screens.fetch_mid()
        self._screens.fetch_last(pool=skip > 1)
        self._frames += skip
        return reward, False

    def _ended(self, reward: int, frame: int) -> tuple[int, bool]:
        """Game over at ``frame`` of the step: the final frame alone is the observation."""
        self._frames += frame + 1
        self._screens.fetch_last(pool=False)
        return reward, True

    def _press_fire(self) -> tuple[int, bool]:
        """FIRE, then the third action, one agent step each (baselines' FireResetEnv)."""
        reward = 0
        for action in self._fire_actions:
            r, over = self._repeat(action)
            reward += r
            if over:
                return reward, True
        return reward, False

    # ---------------------------------------------------------------- adapter protocol

    def reset(self, seed: int, out: np.ndarray) -> None:
        ale = self._emulator
        self._rng = np.random.default_rng(seed)
        self._u_pos = _U_BLOCK
        self._last_action = self._noop
        self._frames = 0
        ale.reset_game()
        self._screens.restart()
        noop_max = self.config.noop_max
        for _ in range(int(self._rng.integers(1, noop_max + 1)) if noop_max > 0 else 0):
            ale.act(self._noop)
            self._frames += 1
            if ale.game_over():
                ale.reset_game()
        self._screens.fetch_last(pool=False)
        if self._fire_actions and self._press_fire()[1]:
            # Game over while pressing FIRE (not seen in practice): start clean instead.
            ale.reset_game()
            self._screens.fetch_last(pool=False)
        self._lives = ale.lives()
        self._screens.push(out, out)
        stack_fill_kernel(out)

    def step(self, action: int, prev: np.ndarray, out: np.ndarray) -> tuple[float, float, int, bool]:
        if not 0 <= action < self.n_actions:
            raise ValueError(f"{self.env_id}: action {action} outside 0..{self.n_actions - 1}")
        raw, over = self._repeat(self._actions[action])
        lives = self._emulator.lives()
        life_lost = lives < self._lives
        self._lives = lives
        restart = life_lost and self.config.episodic_life and not over
        if restart and self._fire_actions:
            r, over = self._press_fire()
            raw += r
            self._lives = self._emulator.lives()
        self._screens.push(prev, out)
        if restart:
            stack_fill_kernel(out)
        truncated = self._frames >= self.config.max_episode_frames
        episode_over = over or truncated
        done = TERMINATED if over or restart else (TRUNCATED if truncated else CONTINUES)
        reward = float((raw > 0) - (raw < 0)) if self.config.clip_rewards else float(raw)
        return reward, float(raw), done, episode_over

    def probe(self, seed: int = 0) -> None:
        """One reset and step on a scratch buffer at start: compiles (or loads) the frame kernels in
        the main process, before the executors need them."""
        out = np.zeros(self.obs_shape, self.obs_dtype)
        self.reset(seed, out)
        self.step(0, out, out.copy())

    def screen_rgb(self) -> np.ndarray:
        """The emulator's current screen in colour at its own resolution (210 x 160 x 3): for videos."""
        return self._emulator.getScreenRGB()

    def get_state(self) -> dict:
        """The emulator (ALE's cloneState) and this adapter's own sticky-action stream and counters."""
        return {
            "ale": self._emulator.cloneState(),
            "rng": self._rng.bit_generator.state,
            "u": self._u.copy(),
            "u_pos": self._u_pos,
            "last_action": self._last_action,
            "lives": self._lives,
            "frames": self._frames,
        }

    def set_state(self, state: dict) -> None:
        self._emulator.restoreState(state["ale"])
        warn_if_restore_is_inexact(self.env_id, self._rom_path, state["ale"])  # a few ROMs' states are incomplete
        self._screens.restart()
        self._rng = np.random.default_rng()
        self._rng.bit_generator.state = state["rng"]
        self._u[:] = state["u"]
        self._u_pos, self._last_action = state["u_pos"], state["last_action"]
        self._lives, self._frames = state["lives"], state["frames"]

    def close(self) -> None:
        self._ale = None
