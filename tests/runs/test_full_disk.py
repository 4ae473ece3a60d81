"""A disk that fills up under a run, and the files a later run reads: nothing is torn, the state is saved.

The disk is a real tmpfs of a few MiB filled with a file where mounting is allowed, else the run's
processes lose the right to write (RLIMIT_FSIZE 0): ``tests/helpers/disk.py``. The run's directory lives
on it; the run ends with exit 1 and one paragraph naming the full disk and the checkpoint it kept, no
traceback, nothing in /dev/shm, no process left; the checkpoint resumes once there is room.
"""
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import fastrl
from fastrl.buffers.arena import list_segments, segment_owner_pid
from fastrl.config import ConfigError
from fastrl.runs.checkpoint import load_checkpoint
from fastrl.telemetry.plot import load_run
from tests.helpers.disk import SmallDisk
from tests.helpers.runs import assert_cleaned_up, cartpole, wait_for_pids

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

ROOT = Path(__file__).resolve().parents[2]
SLOW_CARTPOLE = [
    "--set", "env.id='CartPole-v1'", "--set", "engine.envs=8", "--set", "engine.rollout=5",
    "--set", "model.name='mlp'", "--set", "run.total_frames=80000", "--set", "engine.step_delay_s=0.004",
    "--set", "run.progress=false", "--set", "run.checkpoint_interval_frames=80",
    "--set", "run.target_return=inf",  # the default job's Pong target of 18 would end a CartPole run at once
]


@pytest.fixture
def disk(tmp_path):
    small = SmallDisk(tmp_path / "disk")
    yield small
    small.close()


def _tmpfs_only(disk: SmallDisk) -> None:
    if not disk.tmpfs:
        pytest.skip("needs a filesystem that fills (mounting a tmpfs needs root or CAP_SYS_ADMIN)")


@pytest.mark.parametrize("stop", [pytest.param("by itself", marks=pytest.mark.slow), "SIGTERM"])
def test_a_disk_that_fills_ends_the_run_with_its_state_saved(disk, stop):
    run_dir = disk.path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "fastrl.cli", "train", "--run-dir", str(run_dir), *SLOW_CARTPOLE],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids = wait_for_pids(run_dir)
    while not (run_dir / "checkpoints" / "latest.pt").exists():
        time.sleep(0.05)
    periodic = load_checkpoint(run_dir)["frames"]
    disk.fill([pids["main"], *pids["workers"].values()])
    if stop == "SIGTERM":
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    message = err[err.index("fastrl: the run failed and was stopped cleanly."):]
    assert "free space, then resume" in message and "Traceback" not in message, message
    assert " is full" in message or not disk.tmpfs, message  # (RLIMIT_FSIZE: "a file-size limit")
    assert "go on with: fastrl train --resume" in message, message
    assert not [n for n in list_segments() if segment_owner_pid(n) == proc.pid], "the run left shared memory"
    checkpoint = assert_cleaned_up(run_dir, pids)
    assert checkpoint["frames"] >= periodic
    if disk.tmpfs:  # the reserve kept the learner's own state at the stop, optimizer and all
        assert f"the last good parameters (version {checkpoint['version']}" in message
        assert checkpoint["kind"] != "shared-params" and checkpoint["optimizer"] is not None, checkpoint["kind"]
        assert not [p.name for p in (run_dir / "checkpoints").iterdir() if p.name.endswith(".tmp")]
    disk.free()  # (RLIMIT_FSIZE: the limited processes are gone)
    more = checkpoint["frames"] + 40
    summary = fastrl.train(resume=run_dir, overrides=["engine.serial=true", "engine.step_delay_s=0",
                                                      f"run.total_frames={more}"])
    assert summary["frames"] == more


def test_resuming_on_a_full_disk_leaves_the_run_as_it_was(disk, in_process):
    _tmpfs_only(disk)
    run_dir = disk.path / "run"
    config, overrides = cartpole(disk.path, "engine.serial=true", "run.total_frames=200")
    fastrl.train(config, overrides, run_dir=run_dir)
    before = {p.name: p.read_bytes() for p in (run_dir / "config.toml", run_dir / "summary.json")}
    disk.fill([])
    assert in_process("train", "--resume", str(run_dir), "--set", "run.total_frames=400") == 1, in_process.err
    assert "fastrl: the run could not start: the disk holding" in in_process.err and "is full" in in_process.err
    assert "Traceback" not in in_process.err, in_process.err
    assert {p.name: p.read_bytes() for p in (run_dir / "config.toml", run_dir / "summary.json")} == before
    disk.free()
    assert fastrl.train(resume=run_dir, overrides=["run.total_frames=400"])["frames"] == 400


def test_a_config_toml_that_disagrees_with_the_checkpoint_is_refused(tmp_path):
    """An empty config.toml (what a full disk left under older fastrl: TOML for all defaults) or one edited by
    hand is not the run's config: the checkpoint's is."""
    run_dir = tmp_path / "run"
    config, overrides = cartpole(tmp_path, "engine.serial=true", "run.total_frames=200")
    fastrl.train(config, overrides, run_dir=run_dir)
    (run_dir / "config.toml").write_text("")
    with pytest.raises(ConfigError, match=r"its config.toml disagrees with the config its checkpoint was trained "
                                          r"with: it says env.id = 'PongNoFrameskip-v4', the checkpoint 'CartPole-v1'"):
        fastrl.train(resume=run_dir, overrides=["run.total_frames=400"])
    (run_dir / "config.toml").unlink()
    assert fastrl.train(resume=run_dir, overrides=["run.total_frames=400"])["frames"] == 400
    assert "id = \"CartPole-v1\"" in (run_dir / "config.toml").read_text()  # written again from the checkpoint's


def test_a_change_of_the_parameters_is_refused_before_anything_starts(tmp_path, in_process):
    """Keys that change what the checkpoint's parameters are: refused by name (exit 2), not when loading them."""
    run_dir = tmp_path / "run"
    config, overrides = cartpole(tmp_path, "engine.serial=true", "run.total_frames=40", "algo.name='ppo'")
    fastrl.train(config, overrides, run_dir=run_dir)
    assert in_process("train", "--resume", str(run_dir), "--set", "run.total_frames=80", "--set",
                      "model.lstm=16") == 2, in_process.err
    assert "fastrl: bad config: cannot resume with model.lstm = 16: the run was made with 0" in in_process.err
    for key, value in (("model.normalize_obs", "true"), ("algo.normalize_returns", "true")):
        with pytest.raises(ConfigError, match=f"cannot resume with {key} = True: the run was made with False"):
            fastrl.train(resume=run_dir, overrides=["run.total_frames=80", f"{key}={value}"])


def test_a_cut_metrics_line_is_dropped_on_resume(tmp_path):
    run_dir = tmp_path / "run"
    config, overrides = cartpole(tmp_path, "engine.serial=true", "run.total_frames=200", "run.log_interval_s=0.01")
    fastrl.train(config, overrides, run_dir=run_dir)
    with open(run_dir / "metrics.jsonl", "a") as f:
        f.write('{"time_s": 0.3, "frames": 2')  # a run killed mid-line
    fastrl.train(resume=run_dir, overrides=["run.total_frames=400"])
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["frames"] for line in lines][-1] == 400  # every line one JSON object again
    assert load_run(run_dir).column("frames")[-1] == 400  # what fastrl plot reads: it refuses a cut line inside


def test_a_failed_export_keeps_the_file_that_was_there(disk, tmp_path, in_process):
    _tmpfs_only(disk)
    config, overrides = cartpole(tmp_path, "engine.serial=true", "run.total_frames=40")
    fastrl.train(config, overrides, run_dir=tmp_path / "run")
    out = disk.path / "policy.pt"
    fastrl.export_policy(tmp_path / "run", "torchscript", out=out)
    good = out.read_bytes()
    disk.fill([])
    assert in_process("export", str(tmp_path / "run"), "--format", "torchscript", "--out", str(out)) == 1
    assert "fastrl export: could not write the policy" in in_process.err and "nothing was replaced" in in_process.err
    assert out.read_bytes() == good
    assert not [p for p in disk.path.iterdir() if p.name.endswith(".tmp")]
