"""``fastrl bench ale-states``: per Atari ROM, whether ALE's saved state goes on in another emulator as in the one
that saved it (what an exact resume of an Atari run rests on), and whether fastrl's restore check
(``fastrl.envs.ale_state_check``) says so where it does not.

Each ROM plays random actions in a process of its own (ALE ends the process on a ROM it cannot play alone:
Combat, Joust, Maze Craze and Warlords are reported as ``unplayable``). At each of ``--states`` points its state
is cloned and restored in a fresh emulator, both play the same ``--frames`` frames with RAM and screens compared
frame by frame, and the check runs on the same state. One JSON line: per ROM the states tried, how many parted
from the saved emulator and how many the check flagged; then the ROMs that parted, and any state the check
flagged that did not part (a false alarm: there should be none).

Also per ROM, ``reset_depends_on_past``: after that play, ALE's ``reset_game`` against a fresh emulator's first
one, the same frames compared. Where they part, an episode's start carries something of the episodes before it
(a lower bound: a longer or other past can show it on more ROMs). It is why fastrl resets with ``reset_game``
rather than restoring a state saved after the first reset (70 emulated frames saved a reset): on those games the
restored start would be one and the same every episode, fewer starts than ALE's protocol plays.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys

import numpy as np

PLAY_BETWEEN = 500  # random frames played before each state is taken


def _parts(saved, other, actions: list, plan: list[int]) -> bool:
    """Whether two emulators part within ``plan``'s frames (RAM or screen)."""
    from fastrl.envs.ale_state_check import played_frames

    return played_frames(saved, actions, plan) != played_frames(other, actions, plan)


def _rom_worker(rom: str, states: int, frames: int, results) -> None:
    from ale_py import roms

    from fastrl.envs.ale_state_check import emulator, play, restores_exactly

    path = str(roms.get_rom_path(rom))
    saved = emulator(path)
    actions = list(saved.getMinimalActionSet())
    rng = np.random.default_rng(11)
    parted = flagged = false_alarms = 0
    for _ in range(states):
        play(saved, actions, rng.integers(len(actions), size=PLAY_BETWEEN).tolist())
        state = saved.cloneState()
        flag = not restores_exactly(path, state)
        other = emulator(path)
        other.restoreState(state)
        part = _parts(saved, other, actions, rng.integers(len(actions), size=frames).tolist())
        parted += part
        flagged += flag
        false_alarms += flag and not part
    saved.reset_game()  # after all that play, against a fresh emulator's first reset
    fresh = emulator(path)
    fresh.reset_game()
    reset_depends = _parts(saved, fresh, actions, rng.integers(len(actions), size=frames).tolist())
    results.put(
        {
            "states": states,
            "parted": parted,
            "flagged": flagged,
            "false_alarms": false_alarms,
            "reset_depends_on_past": reset_depends,
        }
    )


def sweep(rom_ids: list[str], states: int = 5, frames: int = 300) -> dict:
    """Each ROM of ``rom_ids`` in turn, in a spawned process: its row, or ``"unplayable"`` where ALE ended it."""
    ctx = mp.get_context("spawn")
    rows: dict[str, dict | str] = {}
    for rom in rom_ids:
        results = ctx.Queue()
        process = ctx.Process(target=_rom_worker, args=(rom, states, frames, results), daemon=True)
        process.start()
        process.join(timeout=120 + states * 10)
        if process.is_alive():
            process.kill()
            raise TimeoutError(f"ROM {rom!r}: no answer within {120 + states * 10} s")
        rows[rom] = results.get() if process.exitcode == 0 else "unplayable"
    played = {rom: row for rom, row in rows.items() if isinstance(row, dict)}
    return {
        "states": states,
        "frames": frames,
        "roms": rows,
        "parted": sorted(rom for rom, row in played.items() if row["parted"]),
        "false_alarms": sorted(rom for rom, row in played.items() if row["false_alarms"]),
        "reset_depends_on_past": sorted(rom for rom, row in played.items() if row["reset_depends_on_past"]),
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--roms", nargs="+", default=None, help="ROM ids (default: every ROM ale-py ships)")
    parser.add_argument("--states", type=int, default=5, help="states tried per ROM (default 5)")
    parser.add_argument("--frames", type=int, default=300, help="frames compared after each restore (default 300)")


def run(args: argparse.Namespace) -> int:
    from ale_py import roms

    known = sorted(roms.get_all_rom_ids())
    unknown = sorted(set(args.roms or ()) - set(known))
    if unknown or args.states < 1 or args.frames < 1:
        what = f"unknown ROM ids {unknown}" if unknown else "--states and --frames must be at least 1"
        print(f"fastrl bench ale-states: {what}", file=sys.stderr)
        return 2
    print(json.dumps(sweep(args.roms or known, args.states, args.frames)))
    return 0
