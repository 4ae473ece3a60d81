"""sync vs hts on DelayEnv: the HTS-RL Claim-1 speed-up, measured and predicted.

Each env step sleeps X ~ Gamma(k, θ) with a fixed mean and growing variance. In ``sync`` every
step waits for the slowest of K envs; in ``hts`` the envs only meet every α steps, so the wait
is for the slowest *sum* of α step times. Claim 1 predicts the ratio of expected rollout times:
    speed-up = α · E[max_K Gamma(k, θ)] / E[max_K Gamma(α k, θ)]
(learning time apart: in ``sync`` it adds to each rollout, in ``hts`` it overlaps the next).
That is the paper's hts, whose envs meet at every barrier. fastrl's hts runs ahead (an env that
finished rollout j begins j+1 before the others finish j), so the envs only meet when one gets
a whole rollout ahead: its measured speed-up may exceed the prediction, which stays as the
paper's bound to compare against. Sleep-based, so it measures the engine's scheduling, not the
CPU, and holds on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import tempfile

import numpy as np

import fastrl
from fastrl.bench import A2C_SETTINGS
from fastrl.envs import DELAY_ENV_ID


def predicted_speedup(envs: int, alpha: int, mean_s: float, variance_s2: float, samples: int = 200_000) -> float:
    if variance_s2 == 0:
        return 1.0
    rng = np.random.default_rng(0)
    shape, scale = mean_s**2 / variance_s2, variance_s2 / mean_s
    step_max = rng.gamma(shape, scale, (samples, envs)).max(1).mean()
    rollout_max = rng.gamma(alpha * shape, scale, (samples, envs)).max(1).mean()
    return float(alpha * step_max / rollout_max)


def run_mode(mode: str, envs: int, alpha: int, rollouts: int, mean_s: float, variance_s2: float, workdir: str) -> dict:
    overrides = [
        f"env.id='{DELAY_ENV_ID}'",
        f"env.kwargs={{ mean_s = {mean_s}, variance_s2 = {variance_s2}, episode_steps = 1000 }}",
        f"engine.mode='{mode}'",
        f"engine.envs={envs}",
        f"engine.executors={envs}",  # one env per process: their sleeps overlap like real parallel envs
        "engine.actors=1",  # one actor process, as its docs/results numbers were measured (not "auto")
        f"engine.rollout={alpha}",
        f"run.total_frames={envs * alpha * rollouts}",
        "run.progress=false",
        "model.name='mlp'",
        *A2C_SETTINGS,
        f"run.dir='{workdir}'",
    ]
    summary = fastrl.train({}, overrides)
    return {"train_s": summary["train_s"], "fps": summary["fps"]}


def measure(
    envs: int = 16,
    alpha: int = 10,
    rollouts: int = 30,
    mean_s: float = 0.01,
    shapes: tuple[float, ...] = (0.0, 4.0, 1.0, 0.25),
) -> list[dict]:
    """One row per step-time variance; shape 0 means constant step time (no variance)."""
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for shape in shapes:
            variance = 0.0 if shape == 0 else mean_s**2 / shape
            sync = run_mode("sync", envs, alpha, rollouts, mean_s, variance, workdir)
            hts = run_mode("hts", envs, alpha, rollouts, mean_s, variance, workdir)
            rows.append(
                {
                    "envs": envs,
                    "alpha": alpha,
                    "mean_step_s": mean_s,
                    "variance_s2": variance,
                    "gamma_shape": shape or None,
                    "sync_s": sync["train_s"],
                    "hts_s": hts["train_s"],
                    "speedup": round(sync["train_s"] / hts["train_s"], 3),
                    "predicted_speedup": round(predicted_speedup(envs, alpha, mean_s, variance), 3),
                }
            )
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--envs", type=int, default=16)
    parser.add_argument("--alpha", type=int, default=10, help="rollout length = barrier interval")
    parser.add_argument("--rollouts", type=int, default=30)
    parser.add_argument("--mean-s", type=float, default=0.01, help="mean env step time in seconds")


def run(args: argparse.Namespace) -> int:
    """Measure with the parsed ``add_arguments`` options and print one JSON line per variance."""
    for row in measure(args.envs, args.alpha, args.rollouts, args.mean_s):
        print(json.dumps(row), flush=True)
    return 0
