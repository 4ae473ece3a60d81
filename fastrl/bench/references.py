"""Reference Atari stepping speeds, random actions, no network:

- ``raw_emulator_fps``: one bare ``ale_py.ALEInterface`` loop per core (the physical limit):
  per agent step 4 ``act`` calls and one ``getScreenGrayscale`` into a preallocated buffer.
- ``atari_vector_env_fps``: ale-py's ``AtariVectorEnv`` (C++ threads) with the standard
  preprocessing: frame skip 4 with max-pool, 84x84 gray, 4-stack, 30 no-op starts, no sticky
  actions.
- ``adapter_loop_fps``: fastrl's own env adapters (the config's env, its preprocessing
  included) stepped round robin in one bare loop per executor, random actions, no engine
  around them. The engine cannot beat it; the gap to it is what the engine's processes,
  queues, actors and barriers cost, apart from what the preprocessing costs.

frames/s counts emulator frames (4 x agent steps). ``fastrl bench references`` prints one JSON line.
The sampling benchmark (``fastrl bench sampling``) runs both in the same invocation as fastrl.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import queue
import time

import numpy as np

FRAME_SKIP = 4


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def in_processes(worker, args: list[tuple], seconds: float) -> list[tuple[int, float]]:
    """Run ``worker(*args, barrier, results)`` in one spawned process per ``args``, started together
    at a barrier; each puts (frames, seconds) on ``results``."""
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(len(args)), ctx.Queue()
    procs = [ctx.Process(target=worker, args=(*a, barrier, results), daemon=True) for a in args]
    for p in procs:
        p.start()
    try:
        return [_result(results, procs, deadline=time.monotonic() + seconds + 120) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()


def _result(results, procs, deadline: float) -> tuple[int, float]:
    """The next worker's result; a clear error as soon as a worker died without one."""
    while True:
        try:
            return results.get(timeout=0.5)
        except queue.Empty:
            dead = [p for p in procs if p.exitcode not in (None, 0)]
            if dead:
                raise RuntimeError(
                    f"a reference worker exited with code {dead[0].exitcode} before reporting; its traceback is above"
                ) from None
            if time.monotonic() > deadline:
                raise TimeoutError("a reference worker did not report within its time plus 120 s") from None


def raw_stepper(game: str, seed: int):
    """A bare emulator of ``game`` and its ``step(i)``: FRAME_SKIP ``act`` calls with the i-th of 4,096 random actions
    (drawn from ``seed``), one ``getScreenGrayscale`` into a preallocated buffer, ALE's own reset at game over."""
    from ale_py import roms

    from fastrl.envs.ale_state_check import emulator

    ale = emulator(str(roms.get_rom_path(game)))
    ale.reset_game()
    actions = [a.value for a in ale.getMinimalActionSet()]
    plan = np.random.default_rng(seed).integers(len(actions), size=4096)
    todo = [actions[i] for i in plan]
    screen = np.empty(ale.getScreenDims(), np.uint8)

    def step(i: int) -> None:
        action = todo[i & 4095]
        for _ in range(FRAME_SKIP):
            ale.act(action)
        ale.getScreenGrayscale(screen)
        if ale.game_over():
            ale.reset_game()

    return step


def _raw_worker(game: str, seconds: float, seed: int, barrier, results) -> None:
    results.put(timed_steps(raw_stepper(game, seed), seconds, barrier))


def timed_steps(step, seconds: float, barrier) -> tuple[int, float]:
    """``step(i)`` (FRAME_SKIP emulator frames and a screen, its own resets) from the barrier on, until ``seconds``
    have passed: (frames, seconds taken). The clock is read every 64 steps, off the hot path."""
    barrier.wait(timeout=120)
    start = time.perf_counter()
    deadline = start + seconds
    steps = 0
    while True:
        step(steps)
        steps += 1
        if steps & 63 == 0 and time.perf_counter() >= deadline:
            break
    return steps * FRAME_SKIP, time.perf_counter() - start


def raw_emulator_fps(game: str = "pong", seconds: float = 5.0, processes: int | None = None) -> dict:
    """Emulator frames/s summed over ``processes`` (default: one per usable core) bare ALE loops."""
    processes = processes or _cores()
    per_process = in_processes(_raw_worker, [(game, seconds, i) for i in range(processes)], seconds)
    fps = [frames / elapsed for frames, elapsed in per_process]
    return {
        "engine": "raw ALEInterface",
        "game": game,
        "processes": processes,
        "seconds": seconds,
        "frames": sum(f for f, _ in per_process),
        "fps": sum(fps),
        "fps_per_process": fps,
    }


def adapter_round(env_config, env_indices: list[int]):
    """``env_config``'s adapters for ``env_indices``, reset, and ``step_all(k)``: every env stepped once in turn with
    the k-th random action of a plan, reset where its episode ended; (step_all, emulator frames an agent step)."""
    from fastrl.envs import make_env

    envs = [make_env(env_config, e) for e in env_indices]
    ring = 4  # rows each env cycles through, as an executor moves along its slots
    rows = np.zeros((len(envs), ring, *envs[0].obs_shape), envs[0].obs_dtype)
    for i, env in enumerate(envs):
        env.reset(i, rows[i, 0])
    plan = np.random.default_rng(env_indices[0]).integers(envs[0].n_actions, size=4096).tolist()
    position = [0] * len(envs)

    def step_all(k: int) -> None:
        for i, env in enumerate(envs):
            p = position[i]
            q = position[i] = (p + 1) % ring
            if env.step(plan[(k * len(envs) + i) & 4095], rows[i, p], rows[i, q])[3]:
                env.reset(k * len(envs) + i, rows[i, q])

    return step_all, getattr(envs[0], "frames_per_step", 1)


def _adapter_worker(env_config, env_indices: list[int], seconds: float, barrier, results) -> None:
    step_all, frames_per_step = adapter_round(env_config, env_indices)
    barrier.wait(timeout=120)
    start = time.perf_counter()
    deadline = start + seconds
    rounds = 0
    while True:
        step_all(rounds)
        rounds += 1
        if time.perf_counter() >= deadline:
            break
    results.put((rounds * len(env_indices) * frames_per_step, time.perf_counter() - start))


def adapter_loop_fps(env_config, envs: int, processes: int, seconds: float = 5.0) -> dict:
    """Frames/s of ``envs`` env adapters of ``env_config`` split over ``processes`` bare loops."""
    from fastrl.partition import split

    parts = [(env_config, [int(e) for e in part], seconds) for part in split(envs, processes)]
    per_process = in_processes(_adapter_worker, parts, seconds)
    return {
        "engine": "fastrl env adapters, bare loop",
        "envs": envs,
        "processes": processes,
        "seconds": seconds,
        "fps": sum(frames / elapsed for frames, elapsed in per_process),
    }


def atari_vector_env_fps(
    game: str = "pong", num_envs: int = 16, seconds: float = 5.0, batch_size: int | None = None, threads: int = 0
) -> dict:
    """Frames/s of ale-py's AtariVectorEnv; ``batch_size`` < ``num_envs`` runs it asynchronously; ``threads``:
    its stepping threads (0: its own choice, one per core)."""
    from ale_py import AtariVectorEnv

    batch = batch_size or num_envs
    env = AtariVectorEnv(
        game,
        num_envs,
        batch_size=batch,
        num_threads=threads,
        frameskip=FRAME_SKIP,
        img_height=84,
        img_width=84,
        stack_num=4,
        grayscale=True,
        maxpool=True,
        noop_max=30,
        repeat_action_probability=0.0,
    )
    try:
        rng = np.random.default_rng(0)
        n_actions = env.single_action_space.n
        plan = rng.integers(n_actions, size=(256, batch)).astype(np.int32)
        env.reset(seed=0)
        start = time.perf_counter()
        deadline = start + seconds
        steps = 0
        while time.perf_counter() < deadline:
            env.step(plan[steps & 255])
            steps += 1
        elapsed = time.perf_counter() - start
    finally:
        env.close()
    frames = steps * batch * FRAME_SKIP
    return {
        "engine": "ale-py AtariVectorEnv",
        "game": game,
        "num_envs": num_envs,
        "batch_size": batch,
        "threads": threads,
        "seconds": seconds,
        "frames": frames,
        "fps": frames / elapsed,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--game", default="pong", help="ROM id (default pong)")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds each reference runs (default 5)")
    parser.add_argument("--processes", type=int, default=None, help="raw emulator processes (default: every core)")
    parser.add_argument("--num-envs", type=int, default=16, help="AtariVectorEnv's envs (default 16)")
    parser.add_argument("--batch-size", type=int, default=None, help="AtariVectorEnv's batch (default: all envs)")


def run(args: argparse.Namespace) -> int:
    """Measure both references and print one JSON line."""
    raw = raw_emulator_fps(args.game, args.seconds, args.processes)
    vec = atari_vector_env_fps(args.game, args.num_envs, args.seconds, args.batch_size)
    vec["of_raw"] = vec["fps"] / raw["fps"]
    print(json.dumps({"raw_emulator": raw, "atari_vector_env": vec}))
    return 0
