"""Launching fastrl under torchrun as a user would (``python -m torch.distributed.run --standalone ...``),
and reading what each rank wrote."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
QUICK = ["run.progress=false", "engine.envs=8", "engine.executors=1", "engine.actors=1", "run.log_interval_s=0.5"]


def _sets(overrides) -> list[str]:
    return [arg for o in overrides for arg in ("--set", o)]


def _torchrun(run_dir: Path, config: str, *overrides: str, ranks: int = 2, launcher=()) -> subprocess.Popen:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}", *launcher,
               "-m", "fastrl", "train", config, "--run-dir", str(run_dir), *_sets(overrides)]
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})


def _finish(proc: subprocess.Popen, timeout: float = 150) -> str:
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return err


def _rank_dir(run_dir: Path, rank: int) -> Path:
    return run_dir if rank == 0 else run_dir / "ranks" / f"rank-{rank}"
