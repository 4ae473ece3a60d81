"""A run directory belongs to one run: two runs started together never share one, a directory holding a run
is refused to a new one, and a directory whose run is up is refused to any other (new or resumed).

The faults are injected as users meet them: two ``fastrl train`` commands started in the same second, a
second command pointed at a finished run's directory and at a running one's."""
import json
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

import fastrl
from fastrl.api import resolve_config
from fastrl.config import ConfigError
from fastrl.runs import run_dir as run_dirs
from fastrl.runs.checkpoint import load_checkpoint
from tests.helpers.runs import assert_cleaned_up, cartpole, wait_for_pids

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--set", "env.id='CartPole-v1'", "--set", "model.name='mlp'", "--set", "engine.envs=4", "--set",
        "engine.rollout=5", "--set", "run.total_frames=200", "--set", "run.progress=false",
        "--set", "engine.serial=true", "--set", "run.target_return=inf"]  # not the default job's Pong 18


def _start(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "fastrl.cli", "train", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_runs_started_together_get_a_directory_each(tmp_path):
    runs = tmp_path / "runs"
    procs = [_start(*TINY, "--set", f"run.dir='{runs}'") for _ in range(2)]  # the same config: the same name
    for proc in procs:
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
    made = sorted(runs.iterdir())
    assert len(made) == 2, made  # in one second: ..._seed0 and ..._seed0-2
    for d in made:
        assert load_checkpoint(d)["frames"] == 200 and len(load_checkpoint(d)["config"]) > 0
        assert sorted(p.name for p in (d / "checkpoints").glob("ckpt-*.pt")) == ["ckpt-00000010.pt"]


def test_a_clash_of_default_names_gets_a_suffix(tmp_path, monkeypatch):
    monkeypatch.setattr(run_dirs.time, "strftime", lambda _: "20260101-000000")  # every start in one second
    config = resolve_config(None, [f"run.dir='{tmp_path}'", "env.id='CartPole-v1'"])
    made = [run_dirs.new_run_dir(config) for _ in range(3)]
    assert [p.name for p in made] == [f"20260101-000000_CartPole-v1_sync_seed0{s}" for s in ("", "-2", "-3")]
    assert all(p.is_dir() for p in made)


def test_a_directory_holding_a_run_is_refused_to_a_new_one(tmp_path):
    run = tmp_path / "run"
    config, overrides = cartpole(tmp_path, "engine.serial=true", "run.total_frames=40")
    fastrl.train(config, overrides, run_dir=run)
    files = (run / "config.toml", run / "checkpoints" / "latest.pt", run / "summary.json")
    before = {p: (p.stat().st_ino, p.read_bytes()) for p in files}
    with pytest.raises(ConfigError) as refused:
        fastrl.train(config, [*overrides, "run.seed=7"], run_dir=run)
    message = str(refused.value)
    assert message.startswith(f"run directory '{run}' is not empty (checkpoints, config.toml"), message
    assert f"fastrl train --resume {run}" in message
    assert {p: (p.stat().st_ino, p.read_bytes()) for p in files} == before, "the refused run touched the first's"


@pytest.mark.slow  # seconds of a real run: the default run keeps one test of each fault
def test_a_running_runs_directory_is_refused_to_any_other(tmp_path):
    run = tmp_path / "run"
    slow = ["--set", "env.id='CartPole-v1'", "--set", "model.name='mlp'", "--set", "engine.envs=8", "--set",
            "engine.rollout=5", "--set", "run.total_frames=80000", "--set", "engine.step_delay_s=0.004",
            "--set", "run.progress=false", "--set", "run.checkpoint_interval_frames=40",
            "--set", "run.target_return=inf"]
    first = _start(*slow, "--run-dir", str(run))
    try:
        pids = wait_for_pids(run)
        while not (run / "checkpoints" / "latest.pt").exists():
            time.sleep(0.05)
        config = (run / "config.toml").read_bytes()
        other = _start("--run-dir", str(run), *TINY)
        _, err = other.communicate(timeout=240)
        assert other.returncode == 2, err
        assert f"run directory '{run}' is in use by another run (main process pid {first.pid})" in err, err
        with pytest.raises(ConfigError, match=f"is in use by another run \\(main process pid {first.pid}\\)"):
            fastrl.train(resume=run)
        assert (run / "config.toml").read_bytes() == config
    finally:
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=120)
    assert first.returncode == 130, err
    assert_cleaned_up(run, pids)
    resumed = fastrl.train(resume=run, overrides=["engine.serial=true", "engine.step_delay_s=0",
                                                  f"run.total_frames={load_checkpoint(run)['frames'] + 40}"])
    assert resumed["status"] == "complete"  # the lock went with the first run's process


def test_a_tilde_is_the_home_directory_and_no_one_else_reads_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    config, overrides = cartpole(tmp_path, "engine.serial=true", "run.total_frames=40")
    fastrl.train(config, [*overrides, "run.dir='~/runs'"])
    assert not (tmp_path / "~").exists()
    (run,) = (tmp_path / "home" / "runs").iterdir()
    for path in (run, run / "config.toml", run / "summary.json", run / "checkpoints" / "latest.pt"):
        assert not stat.S_IMODE(path.stat().st_mode) & 0o007, f"{path} is open to other users"
    with pytest.raises(ConfigError, match="is not empty"):
        fastrl.train(config, overrides, run_dir=run)
    assert json.loads((run / "summary.json").read_text())["frames"] == 40
