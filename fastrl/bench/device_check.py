"""Every GPU measurement the docs report, in one run under a time budget (``--budget-s``).

    fastrl bench device-check [--out DIR] [--budget-s 540] [--dry-run]      (bench/device_check.sh runs it)

Steps, in order, each a subprocess with a time cap (a step that hangs or fails costs its cap and leaves the
others), each one JSON line appended to ``DIR/device_check.jsonl`` the moment it ends (``step``, ``rc``,
``seconds``, and its ``result``, or the tail of its output):

1. ``machine``: ``nvidia-smi``'s GPU line, the cores, Python, torch and its CUDA, numpy, numba, ale-py,
   free ``/dev/shm``;
2. ``cuda_tests``: ``pytest -m cuda`` (tests/devices/test_cuda.py: runs on the GPU, batch invariance there,
   bit-identical parameters across actor layouts, the learner's uploads and deferred checks);
3. ``invariance``: the GPU forward's batch invariance and its error against the CPU in fp32
   (``fastrl bench invariance``);
4. ``sampling_random``: random-policy sampling at 1, 2, 4, 8, 14 executors against the raw emulator on as
   many cores and asynchronous AtariVectorEnv (``fastrl bench sampling --executors``);
5. ``learner``: the default job's training step and actor forward on the GPU, eager, compiled and with
   CUDA graphs (``fastrl bench learner --device cuda``);
6. ``sampling_cnn``: the same scaling with the default job's CNN on the GPU actors (1, 8, 14 executors);
7. ``sampling_fuller``, ``sampling_fullest``: random-policy sampling at 14 executors of 8 and of 16 envs
   (of 4 above); ``sampling_hts``, ``sampling_hts_4_actors``: 14 executors of 8 envs in ``hts``, whose actors
   answer whatever rows are ready (sync's wait for all their envs every step), with 2 and 4 actor processes;
   ``sampling_hts_inline``: the same with inline actors (each executor answers its own envs: no round trip);
8. ``time_to_score``: the default job (or ``--time-to-score CONFIG``), ``engine.device`` left at its
   default, to a mean score of 18, for whatever time the budget has left (at least
   ``MIN_TIME_TO_SCORE_S``); its ``metrics.jsonl`` and ``config.toml`` are copied beside the results.

``--steps NAME ...`` runs only the named steps of 2-7 (``machine`` and ``time_to_score`` always run), to
measure only what is still missing.

``--dry-run`` runs every step on the CPU at toy sizes (the tests on the CPU, two executor counts, a
30-second time-to-score), so the script is proven before any device minute is spent on it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

RESULTS = "device_check.jsonl"
MIN_TIME_TO_SCORE_S = 120.0  # the headline's floor: on an H200 the default job reached 18 in 53 s (seed 0)
TAIL_CHARS = 3000  # of a failed step's output kept in its line


@dataclass(frozen=True)
class Step:
    name: str
    argv: list[str]
    cap_s: float
    env: dict[str, str] = field(default_factory=dict)
    json_result: bool = True  # its last stdout line is its JSON result


def steps(dry_run: bool, python: str = sys.executable) -> list[Step]:
    """The device check's steps after ``machine`` (``time_to_score`` is sized by what is left)."""
    device = "cpu" if dry_run else "cuda"
    fastrl = [python, "-m", "fastrl", "bench"]
    pong, hts = "configs/pong_sync.toml", "configs/pong_hts.toml"
    counts = ["1", "2"] if dry_run else ["1", "2", "4", "8", "14"]
    cnn_counts = ["1", "2"] if dry_run else ["1", "8", "14"]  # ~20 s a count on an H200 (its first run: 4 ran out)
    seconds = ["--seconds", "1" if dry_run else "3"]
    rows = ["--rows", "16" if dry_run else "64"]
    learner = ["--seconds", "0.2", "--threads", "1"] if dry_run else ["--seconds", "2"]
    # -o addopts=: in one process (no pytest-xdist workers, which a bare device machine may lack), one GPU's tests
    tests = [
        python,
        "-m",
        "pytest",
        "-o",
        "addopts=",
        "-q",
        "-m",
        "cuda",
        "-p",
        "no:cacheprovider",
        "tests/devices/test_cuda.py",
    ]
    hts_14x8 = [*fastrl, "sampling", hts, "--executors", *counts[-1:], "--envs-per-executor", "8", *seconds]
    return [
        Step("cuda_tests", tests, 210.0, env={"FASTRL_TEST_DEVICE": device}, json_result=False),  # 83 s + CUDA graphs
        Step("invariance", [*fastrl, "invariance", "--device", device, *rows], 90.0),
        Step("sampling_random", [*fastrl, "sampling", pong, "--executors", *counts, *seconds], 150.0),
        Step("learner", [*fastrl, "learner", "--device", device, "--precision", "fp32", *learner], 150.0),
        Step(
            "sampling_cnn",
            [*fastrl, "sampling", pong, "--policy", "model", "--executors", *cnn_counts, *seconds],
            120.0,
        ),
        Step(  # the H200's 14 executors of 4 envs sampled at 46% of the raw emulator: do fuller executors close it?
            "sampling_fuller",
            [*fastrl, "sampling", pong, "--executors", *counts[-1:], "--envs-per-executor", "8", *seconds],
            60.0,
        ),
        Step(
            "sampling_fullest",
            [*fastrl, "sampling", pong, "--executors", *counts[-1:], "--envs-per-executor", "16", *seconds],
            90.0,  # 224 envs: its row came at ~55 s on the H200, but the process outlived a 60-s cap
        ),
        # sync's actors wait for every env they serve at each step (PAAC's one forward a step): at 14 executors
        # the H200's executors waited 44% of the time with 8 or 16 envs each. hts's actors answer whatever is
        # ready; with 2 and 4 actor processes (does one actor's loop cap the rows?)
        Step("sampling_hts", hts_14x8, 60.0),
        Step("sampling_hts_4_actors", [*hts_14x8, "--set", "engine.actors=4"], 60.0),
        # the executors' own ceiling: each answers its envs itself (random policy: no forward, no round trip)
        Step("sampling_hts_inline", [*hts_14x8, "--set", "engine.inline_actors=true"], 60.0),
    ]


def machine() -> dict:
    """What every figure of this run depends on."""
    import platform

    import numpy
    import torch

    from fastrl.bench.machine import machine_info

    info = machine_info()
    info.update(
        python=platform.python_version(),
        torch_cuda=torch.version.cuda,
        cudnn=torch.backends.cudnn.version() if torch.cuda.is_available() else None,
        numpy=numpy.__version__,
        numba=_version("numba"),
        ale_py=_version("ale_py"),
        faster_fifo=_version("faster_fifo"),
        nvidia_smi=_nvidia_smi(),
        dev_shm_free_gib=round(shutil.disk_usage("/dev/shm").free / 2**30, 1) if Path("/dev/shm").is_dir() else None,
    )
    return info


def _version(module: str) -> str | None:
    from importlib import metadata

    try:
        __import__(module)
        return metadata.version(module.replace("_", "-"))
    except Exception as exc:  # noqa: BLE001 - a broken install is what this line is there to show
        return f"{type(exc).__name__}: {exc}"


def _nvidia_smi() -> str | None:
    query = "--query-gpu=name,memory.total,driver_version,power.limit,clocks.max.sm"
    try:
        done = subprocess.run(
            ["nvidia-smi", query, "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or done.stderr.strip() or None


class Check:
    """The run: its deadline, where its lines go."""

    def __init__(self, out: Path, budget_s: float):
        self.out, self.deadline = out, time.monotonic() + budget_s
        out.mkdir(parents=True, exist_ok=True)
        self.results = out / RESULTS

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def record(self, line: dict) -> None:
        with self.results.open("a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
        print(f"device-check: {line['step']}: rc {line.get('rc')} in {line.get('seconds')} s", file=sys.stderr)

    def run(self, step: Step, cap_s: float) -> dict:
        """Run ``step`` for at most ``cap_s`` seconds; its line (also recorded)."""
        begun = time.monotonic()
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **step.env}
        rc: int | str
        try:
            done = subprocess.run(step.argv, capture_output=True, text=True, timeout=max(cap_s, 1.0), env=env)
            rc, stdout, stderr = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired as exc:
            rc, stdout, stderr = "timeout", _text(exc.stdout), _text(exc.stderr)
        sys.stderr.write(stderr[-TAIL_CHARS:])
        line: dict = {"step": step.name, "rc": rc, "seconds": round(time.monotonic() - begun, 1), "cap_s": cap_s}
        line.update(_result(step, rc, stdout, stderr))
        self.record(line)
        return line


def _text(data) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


def _result(step: Step, rc, stdout: str, stderr: str) -> dict:
    if not step.json_result:  # pytest: its summary line and what failed
        lines = stdout.strip().splitlines()
        failed = [x for x in lines if x.startswith(("FAILED", "ERROR"))]
        return {"summary": lines[-1] if lines else "", "failed": failed, "tail": stdout[-TAIL_CHARS:] if failed else ""}
    last = stdout.strip().splitlines()[-1] if stdout.strip() else ""
    try:
        return {"result": json.loads(last)}
    except json.JSONDecodeError:
        return {"tail": (stdout + stderr)[-TAIL_CHARS:]}


def time_to_score(
    check: Check, dry_run: bool, config: str | None = None, overrides: Sequence[str] = (), python: str = sys.executable
) -> None:
    """``config`` (the default job if None) with ``overrides`` to 18 with what the budget has left; its curve and
    config copied beside the results."""
    minutes = 0.5 if dry_run else max(MIN_TIME_TO_SCORE_S, check.left() - 45.0) / 60.0
    with tempfile.TemporaryDirectory() as workdir:
        run_dir = Path(workdir) / "default_job"
        argv = [python, "-m", "fastrl", "bench", "time-to-score", *([config] if config else [])]
        argv += ["--target", "18", "--max-minutes", f"{minutes:.2f}"]
        argv += ["--run-dir", str(run_dir), "--set", "run.progress=false"]
        argv += [arg for override in overrides for arg in ("--set", override)]
        check.run(Step("time_to_score", argv, minutes * 60.0 + 120.0), minutes * 60.0 + 120.0)
        for name, copy_as in (
            ("metrics.jsonl", "time_to_score_metrics.jsonl"),
            ("config.toml", "time_to_score_config.toml"),
        ):
            if (run_dir / name).is_file():
                shutil.copyfile(run_dir / name, check.out / copy_as)


def device_check(
    out: Path,
    budget_s: float,
    dry_run: bool,
    only: list[str] | None = None,
    config: str | None = None,
    overrides: Sequence[str] = (),
) -> int:
    check = Check(out, budget_s)
    begun = time.monotonic()
    check.record({"step": "machine", "rc": 0, "seconds": 0.0, "dry_run": dry_run, "result": machine()})
    for step in steps(dry_run):
        if only is not None and step.name not in only:
            continue
        spare = check.left() - (30.0 if dry_run else MIN_TIME_TO_SCORE_S + 60.0)  # what time-to-score keeps
        if spare < 10:
            check.record({"step": step.name, "rc": "skipped", "seconds": 0.0, "why": "the budget ran out"})
            continue
        check.run(step, min(step.cap_s, spare))
    time_to_score(check, dry_run, config, overrides)
    print(f"device-check: done in {time.monotonic() - begun:.0f} s; results in {check.results}", file=sys.stderr)
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default=os.environ.get("OUT", "bench-out/device_check"), help="results folder")
    parser.add_argument("--budget-s", type=float, default=540.0, help="seconds for every step together (default 540)")
    parser.add_argument("--dry-run", action="store_true", help="every step on the CPU at toy sizes")
    parser.add_argument(
        "--steps", nargs="+", metavar="NAME", help=f"only these steps (of: {', '.join(s.name for s in steps(True))})"
    )
    parser.add_argument("--time-to-score", metavar="CONFIG", help="the config timed to 18 (default: the default job)")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="an override of the timed config (run.seed=2)"
    )


def run(args: argparse.Namespace) -> int:
    if args.budget_s < 60:
        print("fastrl: bad options: --budget-s must be at least 60", file=sys.stderr)
        return 2
    unknown = sorted(set(args.steps or []) - {s.name for s in steps(True)})
    if unknown:
        names = ", ".join(s.name for s in steps(True))
        print(f"fastrl: bad options: --steps {' '.join(unknown)}: not a step (the steps: {names})", file=sys.stderr)
        return 2
    if args.time_to_score and not Path(args.time_to_score).is_file():
        print(f"fastrl: bad options: --time-to-score {args.time_to_score}: no such config file", file=sys.stderr)
        return 2
    bad = [item for item in args.set if "=" not in item]
    if bad:
        print(f"fastrl: bad options: --set {bad[0]}: expected KEY=VALUE (e.g. run.seed=2)", file=sys.stderr)
        return 2
    return device_check(Path(args.out), args.budget_s, args.dry_run, args.steps, args.time_to_score, args.set)
