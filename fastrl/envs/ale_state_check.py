"""Whether ALE's saved state holds the whole emulator for a game: a resumed Atari env goes on bit for bit only then.

ale-py's ``cloneState`` leaves part of the emulator out on a few ROMs: restored into emulators with different
pasts, the same state steps on differently from its first frame. Of the 104 single-player ROMs ale-py 0.12.1
ships, Q*bert, Tetris, Yars' Revenge and 3-D Tic-Tac-Toe do so (each ROM's saved emulator against a fresh one
restoring its state, five states each, 2026-11-29: Q*bert and Tetris 5 of 5, Yars' Revenge 3, 3-D Tic-Tac-Toe 1);
on the others a restored state went on as the saved emulator did. So a resumed run of those games goes on with
valid episodes, but not bit for bit, and says so (a warning at a restore) rather than let "exact resume" be
believed where it does not hold.

The check: the state being restored goes into a scratch emulator of the same ROM, fresh, then again after each of
a few stretches of other play; from each restore it plays the same frames, and their RAM and screens are compared
with the first's frame by frame. A complete state plays alike whatever the past; one missing a part of the
emulator the game reads parts from it. Over the 104 ROMs it flagged no complete state, and Q*bert's, Tetris's and
3 of 5 of Yars' Revenge's incomplete ones (3-D Tic-Tac-Toe's rare one: not).
It costs a ROM load and about 1,300 frames (0.1-0.2 s), at a ROM's first few restores in a process.
"""

from __future__ import annotations

import logging

import numpy as np

log = logging.getLogger(__name__)

PASTS = 4  # pasts the state is restored after, besides a fresh load
PAST_FRAMES = 100  # the k-th past plays k times this many frames of other play first
COMPARED_FRAMES = 60  # frames played on from the restored state, compared one by one


def emulator(rom_path: str):
    """A bare emulator of ``rom_path`` without ALE's sticky actions (fastrl applies its own)."""
    from ale_py import ALEInterface, LoggerMode

    ALEInterface.setLoggerMode(LoggerMode.Error)
    ale = ALEInterface()
    ale.setFloat("repeat_action_probability", 0.0)
    ale.loadROM(rom_path)
    return ale


def restores_exactly(rom_path: str, state) -> bool:
    """Whether ``state`` (an ``ALEState`` of ``rom_path``) steps on alike from every past tried: one scratch
    emulator restores it fresh, then again after each of ``PASTS`` stretches of other play."""
    scratch = emulator(rom_path)
    actions = list(scratch.getMinimalActionSet())
    rng = np.random.default_rng(0)
    compared = rng.integers(len(actions), size=COMPARED_FRAMES).tolist()
    first = _frames_after(scratch, state, actions, compared)
    for past in range(1, PASTS + 1):
        play(scratch, actions, rng.integers(len(actions), size=PAST_FRAMES * past).tolist())
        if _frames_after(scratch, state, actions, compared) != first:
            return False
    return True


def play(ale, actions: list, plan: list[int]) -> None:
    """One frame of ``actions[i]`` for each ``i`` of ``plan``, a new game wherever one ends."""
    for i in plan:
        ale.act(actions[i])
        if ale.game_over():
            ale.reset_game()


def _frames_after(ale, state, actions: list, plan: list[int]) -> list[bytes]:
    """RAM and screen of each frame ``plan`` plays from ``state``."""
    ale.restoreState(state)
    return played_frames(ale, actions, plan)


def played_frames(ale, actions: list, plan: list[int]) -> list[bytes]:
    """RAM and screen of each frame ``plan`` plays from where ``ale`` is (no reset at a game's end: compared as is)."""
    frames = []
    for i in plan:
        ale.act(actions[i])
        frames.append(frame_of(ale))
    return frames


def frame_of(ale) -> bytes:
    """What two emulators must agree on frame by frame: RAM and screen."""
    return ale.getRAM().tobytes() + ale.getScreen().tobytes()


CHECKS_PER_ROM = 3  # a ROM's states are checked at this many restores a process, until one fails
_checks: dict[str, int] = {}  # rom path -> restores checked in this process (past the limit once one failed)


def warn_if_restore_is_inexact(env_id: str, rom_path: str, state) -> None:
    """At an env's restore (a resumed run): a warning, once per ROM and process, where ALE's state is incomplete.

    A state may step alike from every past tried although its ROM's states are incomplete (the game does not
    read the missing part in the frames compared: Yars' Revenge, 4 of 10 states), so the first
    ``CHECKS_PER_ROM`` restores of a ROM are checked, not only the first."""
    checked = _checks.get(rom_path, 0)
    if checked >= CHECKS_PER_ROM:
        return
    _checks[rom_path] = checked + 1
    if not restores_exactly(rom_path, state):
        _checks[rom_path] = CHECKS_PER_ROM
        log.warning(
            "%s: ALE's saved state leaves part of this game's emulator out (the same state stepped in two "
            "emulators with different pasts gave different frames), so this resumed env goes on with valid "
            "episodes but not bit for bit as the run it resumes would have (docs/faults-and-resume.md)",
            env_id,
        )
