"""Checkpoints lose nothing and resuming continues exactly.

Checkpoints at a barrier hold every env's state, so a run stopped there and resumed gives
bit-identical parameters to the run that never stopped, in sync and in hts, whatever the
process layout of either half.
"""
import json

import pytest
import torch

import fastrl
from fastrl.config import ConfigError
from fastrl.runs.checkpoint import CheckpointStore, load_checkpoint, read_env_episodes
from tests.helpers.runs import cartpole

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks


def _train(tmp_path, name, *overrides, mode="sync"):
    config, base = cartpole(tmp_path, *overrides, mode=mode)
    return fastrl.train(config, base, run_dir=tmp_path / name), tmp_path / name


def _identical(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# a bonus and a learning rate that move with the frames learned: the resumed half must take them up where it stopped
ANNEALED = [
    "algo.entropy_schedule='linear'", "algo.entropy_coef=0.05", "algo.entropy_final=0.0",
    "algo.entropy_anneal_frames=600", "algo.lr_schedule='linear'", "algo.lr_final=1e-4", "algo.lr_anneal_frames=600",
]
ANNEALED_CLIP = ["algo.options.clip_schedule='linear'", "algo.options.clip=0.3", "algo.options.clip_final=0.1",
                 "algo.options.clip_anneal_frames=600"]


# PPO resumes exactly in the default set with Box actions, LSTMs and reward normalisation (hts-ppo there); here
# hts A2C, whose pending gradient is the resume's hardest state
@pytest.mark.parametrize(("mode", "algo"), [pytest.param("sync", "a2c", marks=pytest.mark.slow), ("hts", "a2c"),
                                            pytest.param("sync", "ppo", marks=pytest.mark.slow),
                                            pytest.param("hts", "ppo", marks=pytest.mark.slow)])
def test_stopped_at_a_checkpoint_and_resumed_equals_uninterrupted(tmp_path, mode, algo):
    job = [f"algo.name='{algo}'", *ANNEALED, *(ANNEALED_CLIP if algo == "ppo" else [])]
    whole_summary, whole = _train(tmp_path, "whole", "engine.serial=true", "run.total_frames=800", *job, mode=mode)
    _, half = _train(tmp_path, "half", "run.total_frames=400", *job, mode=mode)  # processes
    first = load_checkpoint(half)
    assert first["exact"] and first["kind"] == "final" and first["rollout"] == 10
    summary = fastrl.train(resume=half, overrides=["run.total_frames=800", "engine.executors=2"])
    assert summary["frames"] == 800
    # the window of 100 holds every episode of both halves: the stopped half's came back with the checkpoint
    assert summary["episodes"] < whole_summary["episodes"] <= 100
    assert summary["final_return_mean"] == pytest.approx(whole_summary["final_return_mean"])
    resumed = load_checkpoint(half)
    assert resumed["frames"] == 800 and resumed["rollout"] == 20
    assert _identical(resumed["model"], load_checkpoint(whole)["model"])
    assert _identical(resumed["optimizer"]["state"][0], load_checkpoint(whole)["optimizer"]["state"][0])
    lines = [json.loads(line) for line in (half / "metrics.jsonl").read_text().splitlines()]
    assert lines[-1]["frames"] == 800 and any(line["frames"] <= 400 for line in lines)  # appended, not replaced
    assert lines[-1]["entropy_coef"] == 0.0  # the schedules went on from the resumed frames to their ends
    assert lines[-1]["lr"] == pytest.approx(1e-4)
    if algo == "ppo":
        assert lines[-1]["clip"] == pytest.approx(0.1)


def test_a_resumed_runs_return_window_starts_with_the_episodes_before_the_checkpoint_in_their_order(tmp_path):
    # one executor in one process: episodes reach the window in the order they end (rollout, step, env), so the
    # uninterrupted run's window of 5 is the resumed run's, whose last rollout ends too few episodes to fill it
    serial = ["engine.serial=true", "engine.executors=1", "algo.name='a2c'", "run.return_window=5"]
    whole_summary, _ = _train(tmp_path, "whole", *serial, "run.total_frames=440")
    _, half = _train(tmp_path, "half", *serial, "run.total_frames=400")
    saved = read_env_episodes(CheckpointStore(half / "checkpoints").env_dir(10))
    assert sorted(saved) == list(range(8)) and all(0 < len(ended) <= 5 for ended in saved.values())
    assert all(rollout < 10 and 0 <= step < 5 for ended in saved.values() for rollout, step, _, _ in ended)
    summary = fastrl.train(resume=half, overrides=["run.total_frames=440"])
    assert summary["frames"] == 440 and summary["episodes"] < 5
    assert summary["final_return_mean"] == pytest.approx(whole_summary["final_return_mean"])


@pytest.mark.parametrize("mode", ["sync", "hts"])
def test_resuming_from_an_older_checkpoint_sets_the_newer_aside_and_is_exact(tmp_path, mode):
    periodic = ["engine.serial=true", "run.checkpoint_interval_frames=200", "run.keep_checkpoints=10"]
    _, run = _train(tmp_path, "run", *periodic, mode=mode)
    store = CheckpointStore(run / "checkpoints")
    assert store.rollouts() == [5, 10, 15, 20]
    expected = load_checkpoint(run)["model"]
    fastrl.train(resume=store.path(10))
    assert _identical(load_checkpoint(run)["model"], expected)
    aside = [p for p in (run / "checkpoints").iterdir() if p.name.startswith("abandoned-")]
    assert len(aside) == 1 and {p.name for p in aside[0].iterdir()} >= {"ckpt-00000015.pt", "ckpt-00000020.pt"}


def test_periodic_checkpoints_keep_the_last_k_and_do_not_change_training(tmp_path):
    _, plain = _train(tmp_path, "plain", "engine.serial=true")
    _, run = _train(tmp_path, "run", "engine.serial=true", "run.checkpoint_interval_frames=120",
                    "run.keep_checkpoints=2")
    store = CheckpointStore(run / "checkpoints")
    assert store.rollouts() == [18, 20]  # every 3 rollouts (120 frames), the final one, the last 2 kept
    assert sorted(p.name for p in store.directory.glob("*.envs")) == ["ckpt-00000018.envs", "ckpt-00000020.envs"]
    assert store.latest.samefile(store.path(20))
    checkpoint = load_checkpoint(run)
    assert {"model", "optimizer", "version", "updates", "frames", "rollout", "config", "rng",
            "resume"} <= checkpoint.keys()
    assert checkpoint["config"]["engine"]["envs"] == 8
    _, timed = _train(tmp_path, "timed", "engine.serial=true", "run.checkpoint_interval_s=0.001")  # ~every barrier
    assert len(CheckpointStore(timed / "checkpoints").rollouts()) == 3
    for other in (run, timed):
        assert _identical(load_checkpoint(other)["model"], load_checkpoint(plain)["model"])


def test_an_env_that_cannot_be_saved_restarts_with_seeded_resets(tmp_path, caplog):
    _, run = _train(tmp_path, "run", "env.id='tests.helpers.faulty_envs:unpicklable'", "engine.serial=true",
                    "run.total_frames=400")
    assert "cannot be saved" in caplog.text and "seeded reset" in caplog.text
    summary = fastrl.train(resume=run, overrides=["run.total_frames=800"])
    assert summary["status"] == "complete" and summary["frames"] == 800


def test_resume_refuses_what_cannot_go_on(tmp_path):
    _, run = _train(tmp_path, "run", "engine.serial=true", "run.total_frames=400")
    with pytest.raises(ConfigError, match=r"already reached 400 frames .* --set run.total_frames=800"):
        fastrl.train(resume=run)
    with pytest.raises(ConfigError, match=r"cannot resume with engine.envs = 4: the run was made with 8"):
        fastrl.train(resume=run, overrides=["engine.envs=4", "run.total_frames=800"])
    with pytest.raises(ConfigError, match="nothing to resume"):
        fastrl.train(resume=tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="give no config or run_dir"):
        fastrl.train({}, resume=run)
    (run / "ranks.json").write_text("7")  # a damaged record of the torchrun ranks that made the run: no guess
    with pytest.raises(ConfigError, match=r"ranks.json cannot be read: it should hold \{\"ranks\": N\}"):
        fastrl.train(resume=run, overrides=["run.total_frames=800"])


def test_atari_resumes_exactly_through_ale_state_cloning(tmp_path):
    pong = ["env.id='PongNoFrameskip-v4'", "model.name='nature'", "engine.envs=2", "engine.serial=true",
            "env.atari.repeat_action_probability=0.25"]  # sticky actions: the adapter's own RNG is saved too
    _, whole = _train(tmp_path, "whole", *pong, "run.total_frames=320", mode="hts")
    _, half = _train(tmp_path, "half", *pong, "run.total_frames=160", mode="hts")
    fastrl.train(resume=half, overrides=["run.total_frames=320"])
    assert _identical(load_checkpoint(half)["model"], load_checkpoint(whole)["model"])


def test_pruning_removes_what_a_killed_writer_left(tmp_path):
    store = CheckpointStore(tmp_path, keep=1)
    store.save({"model": {}}, 1)
    store.save({"model": {}}, 2)
    torn = tmp_path / ".ckpt-00000003.pt.999999999.tmp"  # no such pid: a writer killed mid-write
    torn.write_bytes(b"torn")
    store.save({"model": {}}, 3)
    assert store.rollouts() == [3] and not torn.exists()
    assert load_checkpoint(tmp_path)["model"] == {}
