"""Continuous (Box) and MultiDiscrete actions end to end: the spaces fastrl takes, the clipping,
determinism across process layouts, exact resume, learning, eval and load_policy."""
import gymnasium as gym
import numpy as np
import pytest
import torch

import fastrl
from fastrl.config import ConfigError
from fastrl.envs.gym import GymEnv, UnsupportedEnvError, check_spaces
from fastrl.evaluation import evaluate
from fastrl.runs.checkpoint import load_checkpoint
from tests.helpers.runs import cartpole

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

TARGET = "tests.helpers.target_env:make"


def _train(tmp_path, name, *overrides, env="Pendulum-v1", mode="sync", algo="ppo"):
    config, base = cartpole(tmp_path, f"env.id='{env}'", f"algo.name='{algo}'", *overrides, mode=mode)
    return fastrl.train(config, base, run_dir=tmp_path / name), tmp_path / name


def _identical(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_box_and_multi_discrete_are_taken_and_other_spaces_named():
    _, _, box = check_spaces("Pendulum-v1", gym.make("Pendulum-v1"))
    assert (box.kind, box.dims, box.head_size, box.slot_shape, box.slot_dtype) == ("box", 1, 2, (1,), "float32")
    from tests.helpers.target_env import make_multi

    _, _, multi = check_spaces("multi", make_multi())
    assert (multi.kind, multi.nvec, multi.head_size, multi.slot_shape) == ("multi_discrete", (3, 4), 7, (2,))
    env = make_multi()
    for space, why in [(gym.spaces.Tuple((gym.spaces.Discrete(2),) * 2), "Tuple(Discrete(2), Discrete(2))"),
                       (gym.spaces.Box(0, 5, (2,), np.int64), "must be floating point")]:
        env.action_space = space
        with pytest.raises(UnsupportedEnvError, match=r"env 'odd': action space .* is not supported"):
            check_spaces("odd", env)
        with pytest.raises(UnsupportedEnvError, match=why.replace("(", r"\(").replace(")", r"\)")):
            check_spaces("odd", env)


def test_the_env_gets_the_clipped_action_and_the_slot_keeps_the_sample():
    from tests.helpers.target_env import TargetEnv

    seen = []

    class Recording(TargetEnv):
        def step(self, action):
            seen.append(np.array(action))
            return super().step(action)

    adapter = GymEnv("recording", Recording())
    obs = np.zeros((2, 1), np.float32)
    adapter.reset(0, obs[0])
    sample = np.array([3.5], np.float32)
    adapter.step(sample, obs[0], obs[1])
    assert seen[-1].tolist() == [2.0] and seen[-1].dtype == np.float32 and sample.tolist() == [3.5]


def test_an_unusable_action_space_stops_the_run_before_it_starts(tmp_path):
    with pytest.raises(ConfigError, match=r"env 'tests.helpers.faulty_envs:tuple_actions': action space Tuple"):
        _train(tmp_path, "run", env="tests.helpers.faulty_envs:tuple_actions")
    assert not (tmp_path / "run").exists()


# sync: Pendulum PPO across layouts with delays runs in the default set with reward normalisation
@pytest.mark.parametrize("mode", [pytest.param("sync", marks=pytest.mark.slow), "hts"])
def test_box_parameters_do_not_depend_on_process_layout_or_timing(tmp_path, mode):
    """Pendulum with PPO, 1/1, 2/2 and 4/1 executors/actors, random step delays: bit-identical after 20 updates."""
    results = []
    for executors, actors in [(1, 1), (2, 2), (4, 1)]:
        _, run = _train(tmp_path, f"x{executors}a{actors}", f"engine.executors={executors}",
                        f"engine.actors={actors}", "engine.step_delay_s=0.002", mode=mode)
        checkpoint = load_checkpoint(run)
        assert checkpoint["rollout"] == 20
        results.append(checkpoint["model"])
    assert "policy_head.log_std" in results[0]
    assert not torch.equal(results[0]["policy_head.log_std"], torch.zeros(1))  # the log-std learned
    for other in results[1:]:
        assert _identical(results[0], other)


# sync: slow run
@pytest.mark.parametrize(("mode", "algo"), [pytest.param("sync", "a2c", marks=pytest.mark.slow), ("hts", "ppo")])
def test_a_box_run_resumed_at_a_checkpoint_equals_the_uninterrupted_one(tmp_path, mode, algo):
    env = "MountainCarContinuous-v0"
    _, whole = _train(tmp_path, "whole", "engine.serial=true", env=env, mode=mode, algo=algo)
    _, half = _train(tmp_path, "half", "run.total_frames=400", env=env, mode=mode, algo=algo)
    assert load_checkpoint(half)["exact"]
    fastrl.train(resume=half, overrides=["run.total_frames=800", "engine.executors=2"])
    resumed, expected = load_checkpoint(half), load_checkpoint(whole)
    assert resumed["frames"] == 800 and _identical(resumed["model"], expected["model"])
    assert _identical(resumed["optimizer"]["state"][0], expected["optimizer"]["state"][0])


def test_ppo_learns_to_reach_the_target(tmp_path):
    """The optimum returns 0; the initial policy about -5.3 per episode of 4 steps."""
    summary, run = _train(tmp_path, "target", "engine.serial=true", "engine.rollout=16", "run.total_frames=12800",
                          "algo.lr=0.003", "algo.epochs=4", "algo.minibatches=4", "algo.entropy_coef=0.0",
                          "run.return_window=50", env=TARGET)
    assert summary["final_return_mean"] > -0.25
    assert float(load_checkpoint(run)["model"]["policy_head.log_std"]) < -1.0  # it grew sure of where to reach


def test_eval_and_load_policy_play_a_box_run(tmp_path):
    _, run = _train(tmp_path, "run", "engine.serial=true", "run.total_frames=400", env=TARGET)
    sampled = evaluate(run, episodes=3, seed=1, trust_code=True)  # a module:factory env
    assert sampled["lengths"] == [4, 4, 4] and evaluate(run, episodes=3, seed=1, trust_code=True) == sampled
    greedy = evaluate(run, episodes=3, seed=1, greedy=True, trust_code=True)
    assert greedy["returns"] != sampled["returns"]
    policy = fastrl.load_policy(run, trust_code=True)
    with torch.no_grad():
        head, value = policy(torch.tensor([[0.5]]))
    assert head.shape == (1, 2) and value.shape == (1,)  # mean, log-std


@pytest.mark.parametrize("mode", [pytest.param("sync", marks=pytest.mark.slow), "hts"])  # sync: slow run
def test_multi_discrete_runs_and_serial_equals_processes(tmp_path, mode):
    env = "tests.helpers.target_env:make_multi"
    _, serial = _train(tmp_path, "serial", "engine.serial=true", env=env, mode=mode, algo="a2c")
    _, processes = _train(tmp_path, "processes", "engine.executors=2", "engine.actors=2", env=env, mode=mode,
                          algo="a2c")
    assert _identical(load_checkpoint(serial)["model"], load_checkpoint(processes)["model"])
    assert evaluate(serial, episodes=2, trust_code=True)["lengths"] == [4, 4]


# ---------------------------------------------------------------- async (IMPALA) and gala with Box actions


def _metrics(run):
    import json

    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_impala_learns_to_reach_the_target_in_processes(tmp_path):
    """async: real policy lag (2 executors, 2 actors), V-trace on Gaussian log-probs. The initial policy
    returns about -5.3 per episode; seeds 0-3 ended between -0.54 and -0.47 in this budget."""
    summary, run = _train(tmp_path, "impala", "algo.batch_slots=4", "engine.rollout=16", "engine.executors=2",
                          "engine.actors=2", "run.total_frames=16000", "algo.lr=0.003", "algo.entropy_coef=0.0",
                          "run.return_window=50", "run.log_interval_s=0.2", env=TARGET, mode="async", algo="impala")
    assert summary["status"] == "complete" and summary["frames"] >= 16000
    lines = [line for line in _metrics(run) if line["updates"] > 0]
    assert lines and all(np.isfinite(line[key]) for line in lines for key in ("policy_loss", "value_loss"))
    assert max(line["policy_lag_max"] for line in lines) > 0  # the behaviour policy lagged: V-trace corrected it
    assert summary["final_return_mean"] > -1.5
    assert float(load_checkpoint(run)["model"]["policy_head.log_std"]) < 0.0  # it grew surer than std 1


def test_impala_runs_pendulum_to_its_budget_with_finite_losses(tmp_path):
    summary, run = _train(tmp_path, "pendulum", "algo.batch_slots=4", "engine.rollout=10", "run.total_frames=2000",
                          "run.log_interval_s=0.2", mode="async", algo="impala")
    assert summary["status"] == "complete" and summary["frames"] >= 2000
    lines = [line for line in _metrics(run) if line["updates"] > 0]
    assert lines and all(np.isfinite(line[key]) for line in lines for key in ("policy_loss", "value_loss"))
    assert all(bool(torch.isfinite(value).all()) for value in load_checkpoint(run)["model"].values())


def _gala_models(run, learners):
    return [load_checkpoint(run / "checkpoints" / f"learner-{i}")["model"] for i in range(learners)]


def test_gala_a2c_with_box_actions_ends_with_finite_parameters(tmp_path):
    summary, run = _train(tmp_path, "gala", "engine.mode='gala'", "engine.learners=2", "engine.executors=2",
                          "run.total_frames=1600", env=TARGET, mode="gala", algo="a2c")
    assert summary["status"] == "complete" and summary["frames"] == 1600 and len(summary["learners"]) == 2
    models = _gala_models(run, 2)
    for model in models:
        assert all(bool(torch.isfinite(value).all()) for value in model.values())
        assert not torch.equal(model["policy_head.log_std"], torch.zeros(1))  # each learner's Gaussian moved


@pytest.mark.slow  # gala's fixed schedule across layouts is in the default set with discrete actions (test_gala.py)
def test_deterministic_gala_with_box_actions_is_bit_identical_run_to_run(tmp_path):
    """gala.deterministic: the same seed twice, with random step delays, 1/1 then 2/2 executors/actors."""
    runs = []
    for executors in (1, 2):
        _, run = _train(tmp_path, f"x{executors}", "engine.mode='gala'", "engine.learners=2", "gala.deterministic=true",
                        f"engine.executors={executors}", f"engine.actors={executors}", "engine.step_delay_s=0.001",
                        "run.total_frames=1600", env=TARGET, mode="gala", algo="a2c")
        runs.append(_gala_models(run, 2))
    for first, second in zip(*runs):
        assert _identical(first, second)
    # (with 2 learners a ring averages both at every mix, so the learners may well end equal to each other)
    assert not torch.equal(runs[0][0]["policy_head.log_std"], torch.zeros(1))
