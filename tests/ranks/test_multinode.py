"""Many ranks under torchrun (gloo, localhost): learning as one, faults across ranks, restarts, bad input.

Each test launches the real command, ``python -m torch.distributed.run --standalone
--nproc-per-node 2 -m fastrl train ...``, as a user would (torchrun is torch's own launcher).
"""
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

import fastrl
from fastrl.buffers.arena import list_segments, segment_owner_pid
from fastrl.config import ConfigError, load_config
from fastrl.ranks.launch import launched, local_config
from tests.helpers.runs import pid_alive
from tests.helpers.torchrun import QUICK, _finish, _rank_dir, _torchrun

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks


def _params(run_dir: Path) -> dict:
    return torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=False)["model"]


@pytest.mark.parametrize("config, frames, extra", [
    # A2C in lockstep: 60 updates; one bucket (slow: the PPO case below keeps torchrun's equivalence in the default run)
    pytest.param("configs/cartpole_sync.toml", 2400, ["dist.bucket_mb=1.0"], marks=pytest.mark.slow),
    # the delayed gradient, envs running ahead; gradients all-reduced in ~10 buckets of 1 KB during backward
    pytest.param("configs/cartpole_hts.toml", 2400, ["dist.bucket_mb=0.001"], marks=pytest.mark.slow),
    # PPO: global minibatches, advantages normalised over them; 8 x 16 steps; buckets as above; the KL target stops
    # the last two updates' epochs part-way (at 2 and 1.25 of 4, measured in one process): every rank at one step
    ("configs/cartpole_ppo.toml", 2048, ["dist.bucket_mb=0.001", "algo.options.target_kl=0.006"]),
])
def test_two_ranks_of_four_envs_learn_what_one_rank_of_eight_learns(tmp_path, config, frames, extra):
    overrides = [*QUICK, f"run.total_frames={frames}", *extra]
    proc = _torchrun(tmp_path / "ranks", config, *overrides)
    err = _finish(proc)
    assert proc.returncode == 0, err
    one = fastrl.train(config, [*overrides, "engine.serial=true"], run_dir=tmp_path / "one")  # same bits as processes

    rank0, rank1 = _params(tmp_path / "ranks"), _params(_rank_dir(tmp_path / "ranks", 1))
    single = _params(tmp_path / "one")
    for name in single:
        assert torch.equal(rank0[name], rank1[name]), f"{name} differs between the ranks"
        assert torch.allclose(rank0[name], single[name], rtol=1e-5, atol=1e-5), \
            (name, float((rank0[name] - single[name]).abs().max()))
    summary = json.loads((tmp_path / "ranks" / "summary.json").read_text())
    assert summary["ranks"] == 2 and summary["status"] == "complete"
    assert summary["ranks_s"] > 0 and 0 < summary["ranks_share_of_learning"] <= 1  # what the collectives cost
    assert summary["frames"] == one["frames"] == frames  # rank 0's metrics count every rank's frames
    assert summary["episodes"] > json.loads((_rank_dir(tmp_path / "ranks", 1) / "summary.json").read_text())["episodes"]
    for rank in (0, 1):
        assert (tmp_path / "ranks" / "logs" / f"rank-{rank}.log").is_file()
        assert list((_rank_dir(tmp_path / "ranks", rank) / "checkpoints").glob("*.envs"))  # its own envs' states


@pytest.mark.slow  # 12 s; the PPO case keeps torchrun's equivalence in the default run
def test_async_ranks_all_reduce_per_batch_and_resume_only_with_as_many_ranks(tmp_path):
    run_dir = tmp_path / "run"
    proc = _torchrun(run_dir, "configs/cartpole_impala.toml", *QUICK, "algo.batch_slots=4", "run.total_frames=4000")
    err = _finish(proc)
    assert proc.returncode == 0, err
    rank0, rank1 = _params(run_dir), _params(_rank_dir(run_dir, 1))
    assert all(torch.equal(rank0[name], rank1[name]) for name in rank0)  # the same mean gradient every batch
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["ranks"] == 2 and summary["frames"] == 4000 and summary["mode"] == "async"
    with pytest.raises(ConfigError, match="made with 2 .*torchrun"):
        fastrl.train(resume=run_dir, overrides=["run.total_frames=8000"])


@pytest.mark.slow  # waits out a rank timeout; test_multinode_gala keeps a dead peer in the default tier
def test_a_rank_killed_with_sigkill_ends_the_other_within_its_timeout_leaving_nothing(tmp_path):
    run_dir = tmp_path / "run"
    proc = _torchrun(run_dir, "configs/cartpole_sync.toml", *QUICK, "run.total_frames=10_000_000",
                     "engine.step_delay_s=0.004", "dist.timeout_s=20")
    pids = [_wait_for_pids(_rank_dir(run_dir, rank), proc) for rank in (0, 1)]
    time.sleep(1.0)
    os.kill(pids[1]["main"], signal.SIGKILL)
    killed = time.monotonic()
    err = _finish(proc, timeout=60)
    assert time.monotonic() - killed < 20 + 10  # dist.timeout_s, and the teardown
    assert proc.returncode != 0
    assert "rank 1" in err  # torchrun's report names the rank that ended first; fastrl's message points at it
    every = [pid for p in pids for pid in [p["main"], *p["workers"].values()]]
    deadline = time.monotonic() + 5
    while any(pid_alive(pid) for pid in every) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in every if pid_alive(pid)], "a process of a rank outlived the run"
    assert not [n for n in list_segments() if segment_owner_pid(n) in (pids[0]["main"], pids[1]["main"])]
    assert torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=False)["frames"] > 0


@pytest.mark.slow  # 22 s of launches and a restart
def test_torchrun_max_restarts_goes_on_from_the_last_checkpoint(tmp_path):
    run_dir = tmp_path / "run"
    proc = _torchrun(run_dir, "configs/cartpole_sync.toml", *QUICK, "run.total_frames=4000",
                     "env.id='tests.helpers.faulty_envs:cartpole_failing_in_first_attempt'", "env.kwargs={ at = 300 }",
                     "run.checkpoint_interval_frames=400", launcher=("--max-restarts=1",))
    err = _finish(proc)
    assert proc.returncode == 0, err
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["frames"] == 4000
    assert torch.equal(_params(run_dir)["value_head.weight"], _params(_rank_dir(run_dir, 1))["value_head.weight"])
    log = (run_dir / "logs" / "rank-1.log").read_text()
    assert "step 300 failed on purpose" in log and "resuming" in log


def _wait_for_pids(run_dir: Path, proc: subprocess.Popen, timeout: float = 90) -> dict:
    path, deadline = run_dir / "pids.json", time.monotonic() + timeout
    while not path.is_file():
        assert proc.poll() is None, _finish(proc)
        assert time.monotonic() < deadline, "the rank never started"
        time.sleep(0.1)
    time.sleep(0.1)  # written whole, but give the reader a moment after its creation
    return json.loads(path.read_text())


# ---------------------------------------------------------------- bad input, before anything starts

TORCHRUN_ENV = {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "localhost", "MASTER_PORT": "29500"}


@pytest.mark.parametrize("overrides, message", [
    (["engine.envs=7"], "engine.envs = 7 .* multiple of the 2 ranks"),
    (["engine.serial=true"], "engine.serial = true .* torchrun"),
    (["dist.backend='nccl'"], "dist.backend = 'nccl'"),
    (["engine.envs=2", "engine.executors=2"],
     r"engine.executors = 2 is more than engine.envs = 1 \(on each of the 2 ranks"),
])
def test_impossible_combinations_under_torchrun_are_named(overrides, message):
    config = load_config("configs/cartpole_sync.toml", overrides)
    with pytest.raises(ConfigError, match=message):
        ranks = launched(config, TORCHRUN_ENV)
        local_config(config, ranks)


def test_without_torchrun_nothing_changes():
    assert launched(load_config("configs/cartpole_sync.toml"), {}) is None
    assert launched(load_config("configs/cartpole_sync.toml"), {**TORCHRUN_ENV, "WORLD_SIZE": "1"}) is None


def test_a_bad_split_ends_every_rank_with_exit_2_before_anything_starts(tmp_path):
    proc = _torchrun(tmp_path / "run", "configs/cartpole_sync.toml", *QUICK, "engine.envs=7")
    err = _finish(proc, timeout=90)
    assert proc.returncode != 0
    assert "fastrl: bad config: engine.envs = 7 (the total over every rank) must be a multiple of the 2 ranks" in err
    assert not (tmp_path / "run").exists()


def test_gala_takes_one_learner_per_rank_under_torchrun(monkeypatch):
    """One gossiping agent per node is GALA's own setting: engine.learners is per rank."""
    overrides = ["engine.mode='gala'", "engine.learners=1", "engine.envs=8"]
    with pytest.raises(ConfigError, match="needs engine.learners >= 2"):
        load_config("configs/cartpole_gala.toml", overrides)  # one machine: one agent gossips with no one
    for key, value in TORCHRUN_ENV.items():
        monkeypatch.setenv(key, value)
    config = load_config("configs/cartpole_gala.toml", overrides)
    assert local_config(config, launched(config)).engine.learners == 1
