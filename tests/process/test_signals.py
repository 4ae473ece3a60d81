"""Ctrl-C, SIGTERM and a killed main process, on the real command: ``python -m fastrl.cli train``."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import fastrl
from fastrl.buffers.arena import SHM_DIR, list_segments, segment_owner_pid
from fastrl.runs.checkpoint import load_checkpoint
from tests.helpers.runs import assert_cleaned_up, cartpole, pid_alive, wait_for_pids

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

ROOT = Path(__file__).resolve().parents[2]
SLOW_CARTPOLE = [  # the default job on CartPole, long enough to be interrupted mid-run
    "--set", "env.id='CartPole-v1'", "--set", "engine.envs=8", "--set", "engine.rollout=20",
    "--set", "model.name='mlp'", "--set", "run.total_frames=4000", "--set", "engine.step_delay_s=0.004",
    "--set", "run.progress=false", "--set", "run.target_return=inf",  # not the default job's Pong target of 18
    "--set", "engine.micro_batch=16",  # the MLP's batch invariance needs 16 on AVX-512 Xeons (models/microbatch.py)
]


def _start(run_dir, *args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "fastrl.cli", "train", "--run-dir", str(run_dir), *args],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _segments_of(pid: int) -> list[str]:
    return [name for name in list_segments() if segment_owner_pid(name) == pid]


def _finish(proc: subprocess.Popen, timeout: float = 60) -> str:
    _, err = proc.communicate(timeout=timeout)
    assert not _segments_of(proc.pid), "the run left shared memory behind"
    return err


def _uninterrupted(tmp_path, mode: str) -> dict:
    """The job the CLI runs with SLOW_CARTPOLE (no CONFIG: the default job), in one process, never stopped."""
    overrides = [arg for arg in SLOW_CARTPOLE if arg != "--set" and not arg.startswith("engine.step_delay_s")]
    fastrl.train(None, [*overrides, "engine.serial=true", f"engine.mode='{mode}'", f"run.dir='{tmp_path}'"],
                 run_dir=tmp_path / "uninterrupted")
    return load_checkpoint(tmp_path / "uninterrupted")["model"]


def test_ctrl_c_stops_at_a_barrier_and_resuming_gives_the_uninterrupted_parameters(tmp_path):
    run_dir = tmp_path / "run"
    proc = _start(run_dir, *SLOW_CARTPOLE, "--set", "engine.mode='hts'")
    pids = wait_for_pids(run_dir)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    err = _finish(proc)
    assert proc.returncode == 130, err
    assert "SIGINT received: the run stopped at a rollout barrier (resuming continues exactly)" in err
    checkpoint = assert_cleaned_up(run_dir, pids)
    assert checkpoint["exact"] and 0 < checkpoint["frames"] < 4000

    summary = fastrl.train(resume=run_dir, overrides=["engine.serial=true", "engine.step_delay_s=0"])
    assert summary["frames"] == 4000
    resumed = load_checkpoint(run_dir)["model"]
    expected = _uninterrupted(tmp_path, "hts")
    assert all(torch.equal(resumed[k], expected[k]) for k in expected)


def test_sigterm_exits_143_with_a_checkpoint(tmp_path):
    run_dir = tmp_path / "run"
    proc = _start(run_dir, *SLOW_CARTPOLE)
    pids = wait_for_pids(run_dir)
    proc.send_signal(signal.SIGTERM)
    err = _finish(proc)
    assert proc.returncode == 143, err
    assert "SIGTERM received" in err
    assert_cleaned_up(run_dir, pids)


def test_a_second_ctrl_c_stops_at_once(tmp_path):
    """The first Ctrl-C waits for a barrier that a hung env never reaches; the second does not wait."""
    run_dir = tmp_path / "run"
    proc = _start(run_dir, *SLOW_CARTPOLE, "--set", "env.id='tests.helpers.faulty_envs:cartpole'",
                  "--set", "env.kwargs={fault='hang', at=8}")
    pids = wait_for_pids(run_dir)
    time.sleep(0.5)  # the env is stuck by now
    proc.send_signal(signal.SIGINT)
    time.sleep(1.0)
    assert proc.poll() is None, "the first Ctrl-C must wait (up to reliability.shutdown_timeout_s)"
    forced_at = time.monotonic()
    proc.send_signal(signal.SIGINT)
    err = _finish(proc)
    assert proc.returncode == 130, err
    assert time.monotonic() - forced_at < 5
    for name, pid in pids["workers"].items():
        assert not pid_alive(pid), f"{name} still alive"


def test_killed_main_process_workers_exit_and_free_its_memory(tmp_path):
    run_dir = tmp_path / "run"
    earlier = set(list_segments())  # a segment another run leaked under a pid since reused is not this run's
    proc = _start(run_dir, *SLOW_CARTPOLE)
    pids = wait_for_pids(run_dir)
    segments = sorted(set(_segments_of(proc.pid)) - earlier)
    assert segments
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 5
    while any(pid_alive(pid) for pid in pids["workers"].values()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [n for n, pid in pids["workers"].items() if pid_alive(pid)], "workers outlived the main process"
    assert_cleaned_up(run_dir)  # the learner saved the last good state on its way out
    assert not set(segments) & set(list_segments()), "the orphaned workers left the segment behind"

    result = subprocess.run([sys.executable, "-m", "fastrl.cli", "cleanup"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0
    assert not any(name in result.stdout for name in segments)


def test_a_run_start_sweeps_segments_of_dead_runs(tmp_path, caplog):
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = Path(SHM_DIR) / f"fastrl_{dead.pid}_deadbeef_run"
    stale.write_bytes(b"\0" * 4096)
    config, base = cartpole(tmp_path, "engine.serial=true", "run.total_frames=40")
    with caplog.at_level("WARNING", logger="fastrl.api"):
        fastrl.train(config, base, run_dir=tmp_path / "run")
    assert not stale.exists()
    assert "shared-memory segments left by dead runs" in caplog.text and stale.name in caplog.text
