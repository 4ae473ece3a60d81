"""``fastrl bench instructions``: the work of an agent step, counted, where a shared VM's speed cannot move it.

A 2-vCPU VM's cores drift 30% from one minute to the next, more than most changes to the hot path. Instructions
do not drift: each part below runs under valgrind's cachegrind, which counts every instruction a process executes
and simulates its caches (the last level set to this machine's L2: a core's own), and the same part runs twice,
short and long, so that start-up, imports and warm-up cancel out of the difference. Per agent step:

- ``raw``: ``envs`` bare emulators in one process, ``fastrl bench references``' loop (4 frames, one gray screen);
- ``adapter``: the config's env adapters in one bare loop (the frame protocol included: max-pool, resize, stack);
- ``engine``: the whole engine in one process (``engine.serial``: executor, inline actor, learner, in the config's
  mode with a random policy and ``algo.name = "none"``, as ``fastrl bench sampling`` runs it), ``envs`` envs.

Each part gives instructions, L1d misses and simulated L2 misses a step, its instructions as a ratio to ``raw``'s,
and the same split by what executes them (the emulator's named code, memory copies, the Python interpreter, and
code without symbols: numba's kernels and ALE's unnamed parts). A count is not a time (the interpreter retires
fewer instructions a cycle than the emulator, and a cache miss costs what the machine's memory makes it), so this
bench says where the work is and whether a change added any; ``fastrl bench sampling`` and ``paired`` say how
fast it runs. numba's kernels are compiled for x86-64-v3 (AVX2) in every run, natively and under valgrind (which
runs no AVX-512), so their counts are those of that build, not of this CPU's own.

    fastrl bench instructions configs/pong_sync.toml --envs 8 --steps 300

Needs valgrind (Debian: ``apt install valgrind``); about 7 minutes on 2 cores, most of it the engine's imports.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

PARTS = ("raw", "adapter", "engine")
WARM_UP_STEPS = 60  # steps each env takes in both runs of a part: kernels loaded, past the first episode's start
ENGINE_WARM_UP_ROLLOUTS = 2
GROUPS = ("emulator", "copies", "python", "unnamed", "other")
_PYTHON_SOURCES = ("/Python/", "/Objects/", "/Include/", "/Modules/", "/Parser/")


def this_machines_l2() -> str:
    """``SIZE,ASSOC,LINE`` of one core's L2 (sysfs), for cachegrind's last level; 1 MiB, 8-way, 64 B if unknown or
    of a geometry cachegrind cannot simulate."""
    base = "/sys/devices/system/cpu/cpu0/cache/index2"
    try:
        with open(f"{base}/size") as f:
            size = f.read().strip()
        with open(f"{base}/ways_of_associativity") as f:
            ways = int(f.read())
        with open(f"{base}/coherency_line_size") as f:
            line = int(f.read())
    except (OSError, ValueError):
        return "1048576,8,64"
    scale = {"K": 1024, "M": 1024 * 1024}.get(size[-1:], 1)
    l2 = f"{int(size.rstrip('KM')) * scale},{ways},{line}"
    try:
        check_cache(l2)
    except ValueError:  # a geometry cachegrind cannot simulate (sets not a power of two)
        return "1048576,8,64"
    return l2


# ---------------------------------------------------------------- what runs under valgrind


def step_loop(part: str, config: str | None, overrides: list[str], envs: int, steps: int) -> int:
    """Run ``part`` for ``steps`` steps of every env after its warm-up (``steps`` 0: the warm-up alone); the agent steps
    taken in all."""
    if part == "engine":
        return _engine_steps(config, overrides, envs, steps)
    import fastrl
    from fastrl.bench.references import adapter_round, raw_stepper
    from fastrl.envs.atari import parse_atari_id

    env_config = fastrl.api.resolve_config(config, overrides).env
    if part == "raw":
        game = parse_atari_id(env_config.id)[0]
        steppers = [raw_stepper(game, seed) for seed in range(envs)]

        def step_all(k: int) -> None:
            for step in steppers:
                step(k)

    else:
        step_all, _ = adapter_round(env_config, list(range(envs)))
    for k in range(WARM_UP_STEPS + steps):
        step_all(k)
    return (WARM_UP_STEPS + steps) * envs


def _engine_steps(config: str | None, overrides: list[str], envs: int, steps: int) -> int:
    import fastrl
    from fastrl.bench.sampling import SAMPLING_ONLY

    with tempfile.TemporaryDirectory() as workdir:
        resolved = fastrl.api.resolve_config(config, [*overrides, *SAMPLING_ONLY])
        frames_per_rollout = envs * resolved.engine.rollout * resolved.env.atari.frame_skip
        rollouts = ENGINE_WARM_UP_ROLLOUTS + math.ceil(steps / resolved.engine.rollout)
        summary = fastrl.train(
            fastrl.api.resolve_config(
                config,
                [*overrides, *SAMPLING_ONLY, *_serial_engine(envs), f"run.dir='{workdir}'"]
                + [f"run.total_frames={rollouts * frames_per_rollout}"],
            )
        )
    return int(summary["env_steps"])


def _serial_engine(envs: int) -> list[str]:
    """One process, one executor with its actor inline, no clocks that tick more often under valgrind's slowness."""
    return [
        "engine.serial=true",
        "engine.executors=1",
        "engine.actors=1",
        "engine.inline_actors=true",
        f"engine.envs={envs}",
        "engine.learner_threads=1",
        "model.name='random'",
        "model.normalize_obs=false",
        "run.progress=false",
        "run.tensorboard=false",
        "run.checkpoint_interval_s=inf",
        "run.log_interval_s=1e9",
    ]


# ---------------------------------------------------------------- counting


def read_counts(path: str) -> tuple[Counter, dict[str, Counter]]:
    """A cachegrind out file: (totals by event, totals by event for each of ``GROUPS``)."""
    events: list[str] = []
    totals: Counter = Counter()
    groups: dict[str, Counter] = {group: Counter() for group in GROUPS}
    source = function = ""
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("fl="):
                source = line[3:].strip()
            elif line.startswith("fn="):
                function = line[3:].strip()
            elif line[:1].isdigit():
                group = groups[_group(source, function)]
                for event, value in zip(events, line.split()[1:]):
                    group[event] += int(value)
                    totals[event] += int(value)
    return totals, groups


def _group(source: str, function: str) -> str:
    if function.startswith("ale::"):
        return "emulator"
    if any(name in function for name in ("memcpy", "memmove", "memset")):
        return "copies"
    if function.startswith(("_Py", "Py")) or any(part in source for part in _PYTHON_SOURCES):
        return "python"
    if function == "???":
        return "unnamed"
    return "other"


def per_step(long: Counter, short: Counter, steps: int) -> dict[str, float]:
    """Instructions, L1d misses and last-level (L2) misses a step: the two runs' difference over their steps'."""

    def diff(*events: str) -> float:
        return sum(long[e] - short[e] for e in events) / steps

    return {
        "instructions": round(diff("Ir")),
        "l1d_misses": round(diff("D1mr", "D1mw")),
        "l2_misses": round(diff("DLmr", "DLmw"), 1),
    }


# ---------------------------------------------------------------- the parent


# What every child runs with. numba compiles for the CPU it sees and keys its cache by it; valgrind shows another
# CPU (it runs no AVX-512). One fixed target, natively and under valgrind, so that both runs of a part load the
# kernels the native warm-up cached instead of compiling them, at different moments, inside the counts. And one
# thread for OpenBLAS and OpenMP: their idle workers spin for as long as timing makes them, noise in any count.
CHILD_ENV = {
    "NUMBA_CPU_NAME": "x86-64-v3" if platform.machine() in ("x86_64", "AMD64") else "generic",
    "NUMBA_CPU_FEATURES": "",  # the target's own
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
}


def _child(part: str, steps: int, args: argparse.Namespace, report: str, prefix: list[str]) -> None:
    """Run ``part``'s loop in a process of its own (after ``prefix``: valgrind's command, or nothing); its steps in
    ``report``."""
    child = [sys.executable, "-m", "fastrl.bench.instructions", "--child", part, "--child-steps", str(steps)]
    child += ["--child-report", report, "--envs", str(args.envs), *(f"--set={o}" for o in args.set)]
    child += [args.config] if args.config else []
    done = subprocess.run([*prefix, *child], capture_output=True, text=True, env=os.environ | CHILD_ENV)
    if done.returncode != 0:
        where = "under cachegrind" if prefix else "natively"
        raise RuntimeError(f"{part} {where} exited with {done.returncode}:\n{done.stderr[-3000:]}")


def _count(part: str, steps: int, args: argparse.Namespace, workdir: str, l2: str) -> tuple[str, int]:
    """One run of ``part`` under cachegrind: (its out file, agent steps taken)."""
    out, report = (os.path.join(workdir, f"{part}-{steps}.{ext}") for ext in ("cg", "json"))
    _child(
        part,
        steps,
        args,
        report,
        ["valgrind", "--tool=cachegrind", "--cache-sim=yes", f"--LL={l2}", f"--cachegrind-out-file={out}"],
    )
    with open(report) as f:
        return out, json.load(f)["steps"]


def measure(args: argparse.Namespace) -> dict:
    from fastrl.bench.machine import machine_info

    l2 = args.l2 or this_machines_l2()
    with tempfile.TemporaryDirectory() as workdir, ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        for part in set(args.parts) - {"raw"}:  # natively first: numba's kernels cached, not compiled in the counts
            _child(part, 1, args, os.path.join(workdir, f"{part}-warm.json"), [])
        longest_first = sorted(args.parts, key=lambda part: part != "engine")  # the engine's imports take minutes
        runs = {
            (part, steps): pool.submit(_count, part, steps, args, workdir, l2)
            for part in longest_first
            for steps in (0, args.steps)
        }
        parts: dict[str, dict] = {}
        for part in args.parts:
            (short_file, short_steps), (long_file, long_steps) = (runs[part, s].result() for s in (0, args.steps))
            (short, short_groups), (long, long_groups) = read_counts(short_file), read_counts(long_file)
            steps = long_steps - short_steps
            parts[part] = {
                "steps": steps,
                **per_step(long, short, steps),
                "by_group": {g: per_step(long_groups[g], short_groups[g], steps) for g in GROUPS},
            }
    if "raw" in parts:
        for result in parts.values():
            result["instructions_of_raw"] = round(result["instructions"] / parts["raw"]["instructions"], 4)
    return {
        "config": args.config,
        "overrides": args.set,
        "envs": args.envs,
        "l2": l2,
        "parts": parts,
        "machine": machine_info(),
    }


def check(args: argparse.Namespace) -> None:
    """Bad input named before anything runs."""
    import fastrl
    from fastrl.bench.sampling import SAMPLING_ONLY
    from fastrl.envs.atari import is_atari_id

    if shutil.which("valgrind") is None:
        raise ValueError("valgrind is not installed (Debian/Ubuntu: apt install valgrind); this bench counts under it")
    if args.envs < 1 or args.steps < 1:
        raise ValueError(f"--envs and --steps must be at least 1 (got {args.envs}, {args.steps})")
    unknown = sorted(set(args.parts) - set(PARTS))
    if unknown:
        raise ValueError(f"--parts {unknown} unknown; choose from {', '.join(PARTS)}")
    if args.l2 is not None:
        check_cache(args.l2)
    config = fastrl.api.resolve_config(args.config, [*args.set, *SAMPLING_ONLY])  # ConfigError names the key
    if not is_atari_id(config.env.id):
        raise ValueError(f"env.id {config.env.id!r} is not an Atari id: the raw part needs an ALE game")


def check_cache(text: str) -> None:
    """``SIZE,ASSOC,LINE`` as cachegrind takes a cache: positive integers, a power-of-two line and number of sets."""
    try:
        size, ways, line = (int(part) for part in text.split(","))
    except ValueError:
        raise ValueError(f"--l2 {text!r}: expected SIZE,ASSOC,LINE in bytes, e.g. 1048576,8,64") from None
    sets = size // (ways * line) if min(size, ways, line) > 0 else 0
    if sets < 1 or size != sets * ways * line or sets & (sets - 1) or line & (line - 1):
        raise ValueError(f"--l2 {text!r}: SIZE must be ASSOC x LINE x a power of two, and LINE a power of two")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", nargs="?", help="an Atari TOML config (default: the default config)")
    parser.add_argument("--envs", type=int, default=8, help="envs in one process, every part (default 8)")
    parser.add_argument("--steps", type=int, default=300, help="steps of every env counted (default 300)")
    parser.add_argument("--parts", nargs="+", default=list(PARTS), help=f"of {', '.join(PARTS)} (default all)")
    parser.add_argument("--l2", help="SIZE,ASSOC,LINE of the simulated last level (default: this machine's L2)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config overrides")


def run(args: argparse.Namespace) -> int:
    try:
        check(args)
        result = measure(args)
    except ValueError as exc:
        print(f"fastrl bench instructions: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:  # a child failed: its own error, from its stderr
        print(f"fastrl bench instructions: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0


def _child_main() -> None:
    """``python -m fastrl.bench.instructions --child PART ...``: the loop valgrind counts; its steps into a file."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    parser.add_argument("--child", choices=PARTS, required=True)
    parser.add_argument("--child-steps", type=int, required=True)
    parser.add_argument("--child-report", required=True)
    args = parser.parse_args()
    steps = step_loop(args.child, args.config, args.set, args.envs, args.child_steps)
    with open(args.child_report, "w") as f:
        json.dump({"steps": steps}, f)


if __name__ == "__main__":
    _child_main()
