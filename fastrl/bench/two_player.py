"""``fastrl bench two-player``: the engine on a two-player Atari game against the one-player game, same machine.

Runs the engine (executors, actors, barriers; no learning, as ``fastrl bench sampling``) for S seconds on the
two-player config (default ``pong_selfplay``: PettingZoo's pong_v3, both paddles rows of the buffers) and on
the one-player config (default ``pong_sync``: PongNoFrameskip-v4) with as many emulators, one after the other,
``--rounds`` times with the order swapped each round. A two-player emulator frame serves both players' rows,
so its frames are counted once (``emulator_frames_per_s``: the engine's row-frames divided by the players);
``ratio`` is the median over rounds of the two-player game's emulator frames/s over the one-player game's
frames/s, and ``row_ratio`` the same for rows (the experience the learners get, twice per frame here).

``--bare`` also steps the two emulators alone in each round, one process each, random actions, ``FRAME_SKIP``
frames and a gray screen a step as ``fastrl bench references`` does (multi-agent-ale-py's game with every player's
action against ale-py's one-player game): ``bare_ratio``, the share of the gap that is the emulators' own.
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

import fastrl
from fastrl.bench import report
from fastrl.bench.references import FRAME_SKIP, in_processes, raw_emulator_fps, timed_steps
from fastrl.bench.sampling import engine_fps
from fastrl.config import ConfigError
from fastrl.envs import probe_env


def measure(
    two_player: str = "pong_selfplay",
    one_player: str = "pong_sync",
    seconds: float = 10.0,
    policy: str = "random",
    games: int = 8,
    rounds: int = 3,
    overrides: tuple[str, ...] = (),
    bare: bool = False,
) -> dict:
    if rounds < 1 or games < 1 or seconds <= 0:
        raise ConfigError(f"--rounds and --games must be >= 1 and --seconds > 0; got {rounds}, {games}, {seconds}")
    players = probe_env(fastrl.api.resolve_config(two_player, list(overrides)).env).agents
    if players < 2:
        raise ConfigError(f"{two_player!r} is a one-player env: give a multi-agent config (pettingzoo.atari ids)")
    runs = {
        "two_player": lambda: engine_fps(two_player, seconds, policy, [*overrides, f"engine.envs={games * players}"]),
        "one_player": lambda: engine_fps(one_player, seconds, policy, [*overrides, f"engine.envs={games}"]),
    }
    if bare:
        runs["bare"] = lambda: bare_emulators(two_player, one_player, seconds, overrides)
    per_round = []
    for i in range(rounds):
        order = list(runs) if i % 2 == 0 else list(runs)[::-1]
        per_round.append({name: runs[name]() for name in order})
    for r in per_round:
        r["two_player"]["emulator_frames_per_s"] = round(r["two_player"]["frames_per_s"] / players, 1)
    return {
        "two_player": two_player,
        "one_player": one_player,
        "players": players,
        "games": games,
        "policy": policy,
        "ratio": round(
            statistics.median(
                r["two_player"]["emulator_frames_per_s"] / r["one_player"]["frames_per_s"] for r in per_round
            ),
            3,
        ),
        "row_ratio": round(
            statistics.median(r["two_player"]["frames_per_s"] / r["one_player"]["frames_per_s"] for r in per_round), 3
        ),
        "rounds": per_round,
        **({"bare_ratio": round(statistics.median(r["bare"]["ratio"] for r in per_round), 3)} if bare else {}),
    }


def bare_emulators(two_player: str, one_player: str, seconds: float, overrides: tuple[str, ...] = ()) -> dict:
    """The two games' emulators alone, one process each: frames/s and the two-player's share of the one-player's."""
    from fastrl.envs.atari import parse_atari_id

    env_id = fastrl.api.resolve_config(two_player, list(overrides)).env.id
    game, _ = parse_atari_id(fastrl.api.resolve_config(one_player, list(overrides)).env.id)
    ((frames, elapsed),) = in_processes(_duel_worker, [(env_id, seconds, 0)], seconds)
    duel = frames / elapsed
    single = raw_emulator_fps(game, seconds, processes=1)["fps"]
    return {"two_player_fps": round(duel, 1), "one_player_fps": round(single, 1), "ratio": round(duel / single, 3)}


def _duel_worker(env_id: str, seconds: float, seed: int, barrier, results) -> None:
    """``references._raw_worker``'s loop on a multi-player game: every player's random action each frame."""
    from fastrl.config import AtariConfig
    from fastrl.envs.atari_duel import AtariDuel, _FrameActions, _Screens

    game = AtariDuel(env_id, {}, AtariConfig())
    ale, act = game.ale, _FrameActions(game.ale, game.size)
    ale.reset_game()
    plan = game._actions[np.random.default_rng(seed).integers(game.n_actions, size=(4096, game.size))]
    screens = _Screens(ale)  # its gray screen as the engine reads it
    screen = np.empty(screens.getScreenDims(), np.uint8)

    def step(i: int) -> None:
        act.actions[:] = plan[i & 4095]
        for _ in range(FRAME_SKIP):
            act()
        screens.getScreenGrayscale(screen)
        if ale.game_over():
            ale.reset_game()

    measured = timed_steps(step, seconds, barrier)
    game.close()
    results.put(measured)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("two_player", nargs="?", default="pong_selfplay", help="two-player config (pong_selfplay)")
    parser.add_argument("--one-player", default="pong_sync", help="the one-player config it is compared with")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds each measurement runs")
    parser.add_argument("--policy", choices=("random", "model"), default="random")
    parser.add_argument("--games", type=int, default=8, help="emulators in each run (x players rows)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, the order swapped each round; medians reported")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a key in both")
    parser.add_argument(
        "--bare", action="store_true", help="also the two emulators alone, one process each (bare_ratio)"
    )


def run(args: argparse.Namespace) -> int:
    return report(
        lambda: measure(
            args.two_player,
            args.one_player,
            args.seconds,
            args.policy,
            args.games,
            args.rounds,
            tuple(args.set),
            args.bare,
        )
    )
