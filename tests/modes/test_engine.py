"""The engine end to end on CartPole: runs, outputs, determinism, nothing left behind."""
import json

import pytest
import torch

import fastrl
from fastrl.runs.checkpoint import load_checkpoint
from tests.helpers.runs import cartpole

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks


def _train(tmp_path, name, *overrides, mode="sync"):
    config, base = cartpole(tmp_path, *overrides, mode=mode)
    run_dir = tmp_path / name
    summary = fastrl.train(config, base, run_dir=run_dir)
    return summary, run_dir


def _params(run_dir):
    return load_checkpoint(run_dir)["model"]


def _assert_identical(a, b):
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), f"parameter {key} differs"


# one run per mode and per algorithm in the default set, the other pairs in the slow run
@pytest.mark.parametrize(("mode", "algo"), [("sync", "ppo"), ("hts", "a2c"),
                                            pytest.param("sync", "a2c", marks=pytest.mark.slow),
                                            pytest.param("hts", "ppo", marks=pytest.mark.slow)])
def test_run_writes_summary_metrics_config_and_checkpoint(tmp_path, mode, algo):
    summary, run_dir = _train(tmp_path, "run", "run.total_frames=4000", f"algo.name='{algo}'", mode=mode)
    assert summary["status"] == "complete"
    assert summary["frames"] == 4000
    assert {"frames", "wall_s", "fps", "final_return_mean"} <= summary.keys()
    assert 0 < summary["env_steps"] <= 4000  # the steps before the clock started are start-up's
    assert json.loads((run_dir / "summary.json").read_text()) == summary
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert lines and lines[-1]["frames"] == 4000
    assert lines[-1]["policy_lag_max"] == (0 if mode == "sync" else 1)
    assert set(lines[-1]["time_split"]) == {"env", "inference", "learning", "waiting"}
    assert fastrl.load_config(run_dir / "config.toml").engine.mode == mode
    checkpoint = load_checkpoint(run_dir)
    assert checkpoint["frames"] == 4000 and "model" in checkpoint


def test_the_summary_counts_the_rows_the_executors_stepped_in_training(tmp_path):
    """The envs' own pace beside the learned frames/s: serially every step after the clock starts is learned from
    (in processes a step may come before the clock, and hts or async leave rollouts in flight at the stop)."""
    summary, _ = _train(tmp_path, "serial", "engine.serial=true", "run.total_frames=4000")
    assert summary["env_steps"] == summary["frames"] == 4000  # CartPole: one frame a step
    assert summary["env_steps_per_s"] == pytest.approx(4000 / summary["train_s"], rel=1e-2)


@pytest.mark.parametrize("mode", ["sync", "hts"])
def test_serial_mode_gives_the_same_parameters_as_processes(tmp_path, mode):
    """Serial runs the components the worker processes run (inline pairs too), round-robin."""
    _, serial = _train(tmp_path, "serial", "engine.serial=true", mode=mode)
    _, processes = _train(tmp_path, "processes", mode=mode)
    _assert_identical(_params(serial), _params(processes))
    _, inline = _train(tmp_path, "serial-inline", "engine.serial=true", "engine.executors=2", "engine.actors=2",
                       "engine.inline_actors=true", mode=mode)
    _assert_identical(_params(serial), _params(inline))


# sync has one barrier order whatever the layout (it is also checked serial vs processes above);
# hts, where envs run ahead of the learner, is where timing could leak in: sync's pair is slow-marked
# to keep the default run within its time budget
@pytest.mark.parametrize(("mode", "algo"), [
    pytest.param("sync", "a2c", marks=pytest.mark.slow), pytest.param("sync", "ppo", marks=pytest.mark.slow),
    # hts PPO: the same layouts and delays run in the default set with Box actions (test_box_actions.py)
    ("hts", "a2c"), pytest.param("hts", "ppo", marks=pytest.mark.slow),
])
def test_parameters_do_not_depend_on_process_layout_or_timing(tmp_path, mode, algo):
    """Same seed, 1 vs 2 actors, 1 vs 2 vs 4 executors, executors moving between CPUs every 10 ms,
    random delays: bit-identical after 20 updates.

    PPO's minibatch permutations come from (run seed, rollout), never from timing."""
    layouts = [(1, 1, False, 0), (2, 1, False, 0), (4, 2, False, 0), (2, 2, True, 0.01)]
    results = []
    for executors, actors, inline, rotation in layouts:
        _, run_dir = _train(
            tmp_path,
            f"x{executors}a{actors}{'inline' if inline else ''}",
            f"engine.executors={executors}",
            f"engine.actors={actors}",
            f"engine.inline_actors={str(inline).lower()}",
            f"engine.core_rotation_s={rotation}",
            "engine.step_delay_s=0.002",
            "run.total_frames=800",  # 20 rollouts of 8 envs x 5 steps
            f"algo.name='{algo}'",
            mode=mode,
        )
        checkpoint = load_checkpoint(run_dir)
        assert checkpoint["rollout"] == 20
        results.append(checkpoint["model"])
    for other in results[1:]:
        _assert_identical(results[0], other)


def test_every_env_resets_as_its_executor_starts_so_a_slow_first_reset_is_start_up(tmp_path):
    """Crafter builds its world in ~0.1 s a reset: the executors reset their envs as they are built, before the
    run's clock starts (serial: nothing else to wait for), with the seeds their first rollout would have drawn."""
    slow = ["env.id='tests.helpers.faulty_envs:cartpole'", "env.kwargs={first_reset_s=0.2}", "engine.serial=true"]
    summary, _ = _train(tmp_path, "slow", *slow)
    assert summary["startup_s"] >= 8 * 0.2  # the 8 envs' first resets


def test_a_different_seed_gives_different_parameters(tmp_path):
    _, a = _train(tmp_path, "a", "engine.serial=true")
    _, b = _train(tmp_path, "b", "engine.serial=true", "run.seed=1")
    assert any(not torch.equal(x, y) for x, y in zip(_params(a).values(), _params(b).values()))


def test_collect_only_with_a_random_policy_stops_on_time(tmp_path):
    summary, run_dir = _train(
        tmp_path, "collect", "algo.name='none'", "model.name='random'", "run.max_seconds=1.5",
        "run.total_frames=1_000_000_000", "engine.executors=2", "engine.actors=2", "engine.inline_actors=true",
    )
    assert summary["frames"] > 0 and summary["updates"] == 0
    assert 1.5 <= summary["train_s"] < 6
    assert sum(summary["time_split"].values()) == pytest.approx(1.0, abs=1e-3)
    by_role = summary["time_split_by_role"]  # the idle learner's clock is not averaged into the executors'
    assert {"executors", "learners"} <= set(by_role)
    assert by_role["executors"]["env"] > summary["time_split"]["env"]
    assert by_role["learners"]["env"] == 0.0
    assert all(sum(split.values()) == pytest.approx(1.0, abs=1e-3) for split in by_role.values())


@pytest.mark.slow  # Pong in processes; test_ale_vector and the layout tests keep Atari in the default tier
def test_pong_trains_in_processes(tmp_path):
    summary = fastrl.train(
        None,
        ["engine.envs=4", "engine.executors=2", "engine.actors=1", "run.total_frames=2048", "run.progress=false",
         f"run.dir='{tmp_path}'"],  # the default job: two rollouts of 4 envs x 64 steps x frame skip 4
        run_dir=tmp_path / "pong",
    )
    assert summary["status"] == "complete" and summary["frames"] == 2048 and summary["env_id"] == "PongNoFrameskip-v4"
    assert load_checkpoint(tmp_path / "pong")["updates"] > 0
