"""Recurrent policies (``model.lstm``): the core and its replay, determinism across process layouts,
exact resume with the envs' states, the memory test, eval and load_policy, and refused configs."""
import numpy as np
import pytest
import torch

import fastrl
from fastrl.config import ConfigError
from fastrl.evaluation import evaluate
from fastrl.models import forward_microbatched
from fastrl.models.recurrent import hidden_size, unroll
from fastrl.models.registry import build_model
from fastrl.runs.checkpoint import load_checkpoint
from tests.helpers.runs import cartpole

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

RECALL = "tests.helpers.memory_env:recall"
# the recall env in a few seconds: whole-env minibatches, one learner thread (an LSTM's many small ops
# wait on a second thread far longer than they compute)
RECALL_PPO = ["algo.name='ppo'", "engine.envs=8", "engine.rollout=16", "model.hidden=[32]", "algo.lr=0.003",
              "algo.epochs=4", "algo.minibatches=2", "algo.entropy_coef=0.01", "engine.learner_threads=1",
              "run.return_window=200"]


def _train(tmp_path, name, *overrides, env=RECALL, mode="sync"):
    config, base = cartpole(tmp_path, f"env.id='{env}'", *overrides, mode=mode)
    return fastrl.train(config, base, run_dir=tmp_path / name), tmp_path / name


def _identical(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_unroll_equals_stepping_the_model_with_resets_at_episode_starts():
    torch.manual_seed(0)
    model = build_model("mlp", (3,), "float32", 2, hidden=[8], lstm=5)
    assert hidden_size(model) == 10
    obs, hidden0 = torch.randn(3, 6, 3), torch.randn(3, 10)
    done = torch.zeros(3, 6, dtype=torch.uint8)
    done[0, 1] = 1  # env 0: an episode ends at step 1, so row 2 starts from zeros
    done[2, 3] = 2  # env 2: truncated at step 3
    head, value, after = unroll(model, obs, hidden0, done)
    with torch.no_grad():
        for env in range(3):
            state = hidden0[env : env + 1]
            for t in range(6):
                if t and done[env, t - 1]:
                    state = torch.zeros_like(state)
                h, v, state = model(obs[env, t : t + 1], state)
                assert torch.allclose(head[env, t], h[0], atol=1e-6) and torch.allclose(value[env, t], v[0], atol=1e-6)
                assert torch.allclose(after[env, t], state[0], atol=1e-6)


def test_a_rows_action_and_next_state_do_not_depend_on_its_batch():
    torch.manual_seed(1)
    model = build_model("mlp", (3,), "float32", 2, hidden=[8], lstm=16).eval()
    obs, hidden = torch.randn(37, 3), torch.randn(37, 32)
    with torch.inference_mode():
        alone = [forward_microbatched(model, obs[i : i + 1], 16, hidden[i : i + 1]) for i in range(37)]
        together = forward_microbatched(model, obs, 16, hidden)
    for i, row in enumerate(alone):
        assert all(torch.equal(part[0], whole[i]) for part, whole in zip(row, together))


def test_every_built_in_model_takes_an_lstm():
    for name, shape, dtype in [("nature", (4, 44, 44), "uint8"), ("shallow", (4, 44, 44), "uint8"),
                               ("impala", (3, 16, 16), "uint8"), ("mlp", (5,), "float32")]:
        model = build_model(name, shape, dtype, 3, lstm=8)
        head, value, hidden = model(torch.zeros((2, *shape), dtype=getattr(torch, dtype)), torch.zeros(2, 16))
        assert head.shape == (2, 3) and value.shape == (2,) and hidden.shape == (2, 16)
        assert hidden_size(build_model(name, shape, dtype, 3)) == 0


# sync PPO with an LSTM in the slow run: the same replay, in one barrier order (hts is where timing could leak)
@pytest.mark.parametrize(("mode", "algo"), [pytest.param("sync", "ppo", marks=pytest.mark.slow), ("hts", "a2c")])
def test_lstm_parameters_do_not_depend_on_process_layout_or_timing(tmp_path, mode, algo):
    """1/1, 2/2 and 4/1 executors/actors with random step delays: bit-identical after 20 updates."""
    results = []
    for executors, actors in [(1, 1), (2, 2), (4, 1)]:
        _, run = _train(tmp_path, f"x{executors}a{actors}", f"algo.name='{algo}'", "model.lstm=8",
                        f"engine.executors={executors}", f"engine.actors={actors}", "engine.step_delay_s=0.002",
                        "algo.minibatches=2", "algo.epochs=2", mode=mode)
        checkpoint = load_checkpoint(run)
        assert checkpoint["rollout"] == 20
        results.append(checkpoint["model"])
    assert "core.cell.weight_hh" in results[0]
    for other in results[1:]:
        assert _identical(results[0], other)


# sync: slow run
@pytest.mark.parametrize(("mode", "algo"), [pytest.param("sync", "a2c", marks=pytest.mark.slow), ("hts", "ppo")])
def test_an_lstm_run_resumed_at_a_checkpoint_equals_the_uninterrupted_one(tmp_path, mode, algo):
    """CartPole's episodes run across the checkpoint, so the envs' recurrent states must be saved with them."""
    lstm = ["model.lstm=8", f"algo.name='{algo}'", "algo.minibatches=2", "algo.epochs=2"]
    _, whole = _train(tmp_path, "whole", "engine.serial=true", *lstm, env="CartPole-v1", mode=mode)
    _, half = _train(tmp_path, "half", "run.total_frames=400", *lstm, env="CartPole-v1", mode=mode)
    checkpoint = load_checkpoint(half)
    assert checkpoint["exact"]
    fastrl.train(resume=half, overrides=["run.total_frames=800", "engine.executors=2"])
    resumed, expected = load_checkpoint(half), load_checkpoint(whole)
    assert resumed["frames"] == 800 and _identical(resumed["model"], expected["model"])
    assert _identical(resumed["optimizer"]["state"][0], expected["optimizer"]["state"][0])


def test_the_lstm_remembers_what_the_feed_forward_policy_cannot(tmp_path):
    """Recall: the cue is seen 3 steps before the query. Remembering it returns +1, guessing 0 on average."""
    frames = ["run.total_frames=6000", "engine.serial=true"]
    recurrent, run = _train(tmp_path, "lstm", *RECALL_PPO, *frames, "model.lstm=32")
    feed_forward, _ = _train(tmp_path, "ff", *RECALL_PPO, *frames)
    assert recurrent["final_return_mean"] > 0.8, recurrent
    assert abs(feed_forward["final_return_mean"]) < 0.3, feed_forward  # 200 episodes of ±1 guesses
    greedy = evaluate(run, episodes=40, seed=3, greedy=True, trust_code=True)  # the state carried through
    assert np.mean(greedy["returns"]) > 0.8 and greedy["lengths"] == [4] * 40
    policy = fastrl.load_policy(run, trust_code=True)
    with torch.no_grad():
        head, value, hidden = policy(torch.zeros(1, 3), torch.zeros(1, policy.hidden_size))
    assert head.shape == (1, 2) and hidden.shape == (1, 64)


def test_async_impala_runs_an_lstm(tmp_path):
    summary, run = _train(tmp_path, "impala", "algo.name='impala'", "model.lstm=8", "engine.rollout=16",
                          "run.total_frames=3000", "engine.executors=2", "engine.actors=2", env="CartPole-v1",
                          mode="async")
    assert summary["frames"] >= 3000 and summary["episodes"] > 0
    assert all(torch.isfinite(p).all() for p in load_checkpoint(run)["model"].values())


@pytest.mark.slow  # gala's fixed schedule across layouts stays in the default run (test_gala.py), without LSTMs
def test_deterministic_gala_learners_with_lstms_do_not_depend_on_process_layout(tmp_path):
    """gala.deterministic, 2 learners each with its own envs' states in the slots: 1/1 and 2/2 executors/actors."""
    runs = []
    for executors in (1, 2):
        _, run = _train(tmp_path, f"x{executors}", "algo.name='a2c'", "model.lstm=8", "engine.learners=2",
                        "gala.deterministic=true", f"engine.executors={executors}", f"engine.actors={executors}",
                        "engine.step_delay_s=0.001", "run.total_frames=1600", env="CartPole-v1", mode="gala")
        runs.append([load_checkpoint(run / "checkpoints" / f"learner-{i}")["model"] for i in range(2)])
    assert "core.cell.weight_hh" in runs[0][0]
    for first, second in zip(*runs):
        assert _identical(first, second)


def test_lstm_configs_that_cannot_work_are_named(tmp_path):
    with pytest.raises(ConfigError, match=r"model.lstm is for the built-in .* model 'random'"):
        _train(tmp_path, "random", "model.name='random'", "model.lstm=8")
    with pytest.raises(ConfigError, match=r"algo.minibatches = 16 is more than engine.envs = 8: with model.lstm"):
        _train(tmp_path, "ppo", "algo.name='ppo'", "model.lstm=8", "algo.minibatches=16")
    with pytest.raises(ConfigError, match=r"model.lstm"):
        _train(tmp_path, "negative", "model.lstm=-1")
    assert not any((tmp_path / name).exists() for name in ("random", "ppo", "negative"))


def test_the_multi_input_model_takes_an_lstm_too(tmp_path):
    """An image + vector Dict (one packed row) with model.lstm: trained in sync, serial equals processes."""
    small = ["model.name='multi'", "model.kwargs={cnn='impala', channels=[8]}", "model.lstm=8", "algo.name='a2c'",
             "run.total_frames=400"]
    env = "tests.helpers.dict_envs:image_vector"
    _, serial = _train(tmp_path, "serial", *small, "engine.serial=true", env=env)
    _, processes = _train(tmp_path, "processes", *small, "engine.executors=2", "engine.actors=2", env=env)
    model = load_checkpoint(serial)["model"]
    assert "core.cell.weight_ih" in model and _identical(model, load_checkpoint(processes)["model"])
