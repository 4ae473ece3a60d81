"""``fastrl eval`` / ``fastrl.evaluate``: a trained policy played from its run directory or checkpoint."""
import json
import re
import shutil

import numpy as np
import pytest
import torch

import fastrl
from fastrl.config import ConfigError
from fastrl.evaluation import learner_index, resolve_checkpoint, run_dir_of
from fastrl.runs.checkpoint import load_checkpoint
from tests.helpers.runs import cartpole

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

SUMMARY_KEYS = {"checkpoint", "params", "episodes", "return_mean", "return_std", "return_min", "return_max",
                "length_mean", "returns", "lengths", "truncated", "env_id", "frames", "greedy", "seed"}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A tiny trained CartPole run (serial: one process, a few seconds)."""
    tmp = tmp_path_factory.mktemp("eval")
    config, overrides = cartpole(tmp, "engine.serial=true", "run.total_frames=1200")
    fastrl.train(config, overrides, run_dir=tmp / "run")
    return tmp / "run"


@pytest.fixture(scope="module")
def gala_dir(run_dir, tmp_path_factory):
    """The gala layout, fabricated from the real checkpoint: the average on top, learner-0 and learner-1 below.

    learner-1's parameters are all zero (uniform logits), so its play is told apart from the others'.
    """
    gala = tmp_path_factory.mktemp("gala") / "run"
    (gala / "checkpoints").mkdir(parents=True)
    checkpoint = load_checkpoint(run_dir)
    torch.save({**checkpoint, "gala": {"learners": 2}}, gala / "checkpoints" / "latest.pt")
    (gala / "checkpoints" / "learner-0").mkdir()
    shutil.copyfile(run_dir / "checkpoints" / "latest.pt", gala / "checkpoints" / "learner-0" / "latest.pt")
    (gala / "checkpoints" / "learner-1").mkdir()
    zeroed = {key: torch.zeros_like(value) for key, value in checkpoint["model"].items()}
    torch.save({**checkpoint, "model": zeroed}, gala / "checkpoints" / "learner-1" / "latest.pt")
    return gala


# ---------------------------------------------------------------- which checkpoint a target means


def test_run_dir_of_every_kind_of_target(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints" / "learner-3").mkdir(parents=True)
    for path in (run / "checkpoints" / "latest.pt", run / "checkpoints" / "ckpt-00000008.pt",
                 run / "checkpoints" / "learner-3" / "latest.pt", tmp_path / "stray.pt"):
        path.write_bytes(b"")
    assert run_dir_of(run) == run
    assert run_dir_of(run / "checkpoints") == run
    assert run_dir_of(run / "checkpoints" / "latest.pt") == run
    assert run_dir_of(run / "checkpoints" / "ckpt-00000008.pt") == run
    assert run_dir_of(run / "checkpoints" / "learner-3") == run
    assert run_dir_of(run / "checkpoints" / "learner-3" / "latest.pt") == run
    assert run_dir_of(tmp_path / "stray.pt") is None
    assert run_dir_of(tmp_path) is None


def test_learner_index_reads_both_spellings():
    assert learner_index("learner-2") == 2 and learner_index("2") == 2 and learner_index(" 0 ") == 0
    assert learner_index("learner-x") is None and learner_index("average") is None and learner_index("-1") is None


# ---------------------------------------------------------------- the API on a real run


def test_evaluate_a_run_reports_every_field(run_dir):
    result = fastrl.evaluate(run_dir, episodes=3, seed=0)
    assert SUMMARY_KEYS <= result.keys()
    assert result["checkpoint"] == str(run_dir / "checkpoints" / "latest.pt")
    assert result["params"] == "model" and result["env_id"] == "CartPole-v1" and result["frames"] == 1200
    assert result["episodes"] == 3 and len(result["returns"]) == 3 and len(result["lengths"]) == 3
    returns = np.asarray(result["returns"])
    assert result["return_mean"] == pytest.approx(returns.mean())
    assert result["return_std"] == pytest.approx(returns.std())
    assert (result["return_min"], result["return_max"]) == (returns.min(), returns.max())
    assert result["length_mean"] == pytest.approx(np.mean(result["lengths"]))
    assert result["returns"] == [float(n) for n in result["lengths"]]  # CartPole: +1 per step
    assert result["truncated"] == 0 and all(1 <= n <= 500 for n in result["lengths"])
    json.dumps(result)  # what the CLI prints


def test_same_seed_same_returns_and_every_target_spelling_agrees(run_dir):
    a = fastrl.evaluate(run_dir, episodes=4, seed=7)
    assert fastrl.evaluate(run_dir / "checkpoints", episodes=4, seed=7)["returns"] == a["returns"]
    assert fastrl.evaluate(run_dir / "checkpoints" / "latest.pt", episodes=4, seed=7)["returns"] == a["returns"]
    others = [fastrl.evaluate(run_dir, episodes=4, seed=s)["returns"] for s in (8, 9)]
    assert any(other != a["returns"] for other in others)


def test_greedy_and_sampled_both_play_and_greedy_is_deterministic(run_dir):
    greedy = fastrl.evaluate(run_dir, episodes=3, seed=1, greedy=True)
    assert greedy["greedy"] is True and len(greedy["returns"]) == 3
    assert fastrl.evaluate(run_dir, episodes=3, seed=1, greedy=True)["returns"] == greedy["returns"]
    sampled = fastrl.evaluate(run_dir, episodes=3, seed=1)
    assert sampled["greedy"] is False and len(sampled["returns"]) == 3


def test_max_steps_cuts_episodes(run_dir):
    result = fastrl.evaluate(run_dir, episodes=2, max_steps=3, greedy=True)
    assert result["lengths"] == [3, 3] and result["returns"] == [3.0, 3.0] and result["truncated"] == 2


def test_evaluation_leaves_torch_threads_and_rng_alone(run_dir):
    threads, state = torch.get_num_threads(), torch.get_rng_state()
    fastrl.evaluate(run_dir, episodes=1)
    assert torch.get_num_threads() == threads and torch.equal(torch.get_rng_state(), state)


@pytest.mark.parametrize("kwargs, message", [
    ({"episodes": 0}, "episodes = 0: expected an int >= 1"),
    ({"episodes": 2.5}, "episodes = 2.5: expected an int >= 1"),
    ({"seed": -1}, "seed = -1: expected an int >= 0"),
    ({"max_steps": 0}, "max_steps = 0: expected None"),
    ({"params": "best"}, "params = 'best' is not one of 'auto', 'average', 'learner-<i>'"),
    ({"params": "average"}, "this run has one learner; --params average applies to gala runs"),
    ({"params": "learner-0"},
     "has one learner (no checkpoints/learner-<i>/); --params learner-<i> applies to gala runs"),
])
def test_bad_input_is_a_config_error_naming_the_value(run_dir, kwargs, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        fastrl.evaluate(run_dir, **kwargs)


def test_missing_target_or_checkpoint_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="nothing to evaluate at .*nope.*: no such run directory or checkpoint file"):
        fastrl.evaluate(tmp_path / "nope")
    (tmp_path / "empty" / "checkpoints").mkdir(parents=True)
    with pytest.raises(ConfigError, match="no checkpoint .*latest.pt"):
        fastrl.evaluate(tmp_path / "empty")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ConfigError, match="cannot read checkpoint .*junk.pt"):
        fastrl.evaluate(tmp_path / "junk.pt")


# ---------------------------------------------------------------- gala: the average and each learner


def test_gala_average_and_each_learner(gala_dir):
    checkpoints = gala_dir / "checkpoints"
    average = fastrl.evaluate(gala_dir, episodes=2, params="average", greedy=True)
    assert average["params"] == "average" and average["checkpoint"] == str(checkpoints / "latest.pt")
    assert fastrl.evaluate(gala_dir, episodes=2, greedy=True)["params"] == "average"  # auto on a gala run
    learner0 = fastrl.evaluate(gala_dir, episodes=2, params="learner-0", greedy=True)
    assert learner0["params"] == "learner-0" and learner0["checkpoint"] == str(checkpoints / "learner-0" / "latest.pt")
    assert learner0["returns"] == average["returns"]  # the fabricated learner-0 holds the same parameters
    learner1 = fastrl.evaluate(gala_dir, episodes=2, params="1", greedy=True)
    assert learner1["params"] == "learner-1" and learner1["checkpoint"] == str(checkpoints / "learner-1" / "latest.pt")
    assert learner1["returns"] != average["returns"]  # zero parameters: always action 0, CartPole falls in ~10 steps
    auto_learner = fastrl.evaluate(checkpoints / "learner-1" / "latest.pt", episodes=2, greedy=True)
    assert auto_learner["params"] == "learner-1" and auto_learner["returns"] == learner1["returns"]
    from_learner_file = fastrl.evaluate(checkpoints / "learner-1" / "latest.pt", episodes=2, params="average",
                                        greedy=True)
    assert from_learner_file["checkpoint"] == str(checkpoints / "latest.pt")


def test_gala_missing_learner_names_the_ones_there(gala_dir):
    with pytest.raises(ConfigError,
                       match=re.escape("has no learner-5 checkpoint") + ".*its learners are learner-0, learner-1"):
        fastrl.evaluate(gala_dir, params="learner-5")
    for params in ("learner-0", "0", 0):
        path, which = resolve_checkpoint(gala_dir / "checkpoints", params)
        assert path == gala_dir / "checkpoints" / "learner-0" / "latest.pt" and which == "learner-0"


# ---------------------------------------------------------------- the command


def test_cli_prints_the_result_as_one_json_line(run_dir, in_process):
    assert in_process("eval", str(run_dir), "--episodes", "3", "--seed", "5", "--greedy", "--max-steps", "200") == 0
    lines = in_process.out.strip().splitlines()
    assert len(lines) == 1
    printed = json.loads(lines[0])
    assert printed == fastrl.evaluate(run_dir, episodes=3, seed=5, greedy=True, max_steps=200)


def test_cli_bad_input_is_exit_2_with_the_reason(run_dir, gala_dir, in_process):
    assert in_process("eval", str(run_dir), "--params", "average", "--episodes", "1") == 2
    assert in_process.out == "" and "fastrl: cannot evaluate:" in in_process.err
    assert "this run has one learner; --params average applies to gala runs" in in_process.err
    assert in_process("eval", str(gala_dir), "--params", "learner-2") == 2
    assert "its learners are learner-0, learner-1" in in_process.err


# ---------------------------------------------------------------- Atari


def test_atari_checkpoint_plays(tmp_path):
    """An untrained Pong checkpoint (the uniform 'random' model) plays through the Atari adapter."""
    pytest.importorskip("ale_py")
    config = fastrl.load_config(None, ["env.id='PongNoFrameskip-v4'", "model.name='random'"])
    (tmp_path / "checkpoints").mkdir()
    torch.save({"config": config.to_dict(), "model": {"zero": torch.zeros(())}, "frames": 0},
               tmp_path / "checkpoints" / "latest.pt")
    result = fastrl.evaluate(tmp_path, episodes=2, max_steps=40)
    assert result["env_id"] == "PongNoFrameskip-v4" and result["lengths"] == [40, 40] and result["truncated"] == 2
