"""Two-player Pong (PettingZoo's pong_v3 on multi-agent-ale-py, configs/pong_selfplay.toml): one emulator for both
paddles, the second's view mirrored, restored exactly; self-play bit-identical across layouts and on resume;
matches against a random paddle, a one-player policy in either seat, and the two-player bench."""
import json

import numpy as np
import pytest

import fastrl
from fastrl.cli import main
from fastrl.config import ConfigError, EnvConfig
from fastrl.envs.pettingzoo import make_games
from fastrl.evaluation.matches import play_matches
from fastrl.runs.checkpoint import load_checkpoint
from tests.helpers.multiagent_runs import SMALL, identical, model_params

pytest.importorskip("pettingzoo")

PONG2 = "pettingzoo.atari:pong_v3"




def _pong2(tmp_path, name, *overrides):
    run_dir = tmp_path / name
    summary = fastrl.train("configs/pong_selfplay.toml", [
        *SMALL, "engine.envs=4", "model.precision='fp32'", "run.total_frames=512", "algo.epochs=1",
        "algo.lr_schedule='constant'", *overrides],  # its linear lr anneals over total_frames: the halves differ
        run_dir=run_dir)
    return summary, run_dir


@pytest.mark.unit
def test_two_player_pong_is_one_emulator_for_both_paddles_mirrored_for_the_second_and_restores_exactly():
    pytest.importorskip("multi_agent_ale_py")
    config = EnvConfig(id=PONG2, atari=fastrl.config.AtariConfig(mirror_players=True))
    first, restored = (make_games(config, [0, 1])[0].group for _ in range(2))
    assert first.agents == ["first_0", "second_0"] and first.n_actions == 6 and first.obs_shape == (4, 84, 84)
    for m in range(2):
        first.reset_member(m, 7)
    rng = np.random.default_rng(0)
    scores = np.zeros(2)
    for _ in range(300):
        first.step(list(rng.integers(6, size=2)))
        scores += first.raw_rewards
        assert np.array_equal(first.step_obs[1], first.step_obs[0][:, :, ::-1])
    assert np.abs(scores).sum() > 0  # points were scored (+1 to the scorer, -1 to the other; a late serve -1)
    restored.restore(first.state())
    moves = rng.integers(6, size=(200, 2))
    seen = [(first.step(list(a)), first.step_obs.copy(), first.raw_rewards.copy())[1:] for a in moves]
    again = [(restored.step(list(a)), restored.step_obs.copy(), restored.raw_rewards.copy())[1:] for a in moves]
    assert all(np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1]) for x, y in zip(seen, again))


@pytest.mark.slow  # two emulators per env; Connect Four keeps the promise in the default tier (test_selfplay.py)
@pytest.mark.engine
def test_two_player_pong_self_play_is_bit_identical_across_layouts_and_resumes_exactly(tmp_path):
    pytest.importorskip("multi_agent_ale_py")
    _pong2(tmp_path, "one", "engine.executors=1", "engine.actors=1", "engine.inline_actors=false")
    _pong2(tmp_path, "two", "engine.executors=2", "engine.actors=2", "engine.inline_actors=false")
    _pong2(tmp_path, "half", "run.total_frames=256", "engine.executors=2")
    fastrl.train(resume=tmp_path / "half", overrides=["run.total_frames=512", "engine.executors=1", "engine.actors=1"])
    one, two, resumed = (model_params(tmp_path / name) for name in ("one", "two", "half"))
    assert identical(one, two) and identical(one, resumed)
    assert load_checkpoint(tmp_path / "half")["exact"]


@pytest.mark.slow  # 7 s of matches; the two-player game's bits stay in the default run
@pytest.mark.engine
def test_a_two_player_pong_policy_plays_a_random_paddle_and_the_one_player_game(tmp_path):
    pytest.importorskip("multi_agent_ale_py")
    from fastrl.evaluation import evaluate

    _, run_dir = _pong2(tmp_path, "pong2")
    match = play_matches(run_dir, "random", games=2)
    assert match["wins"] + match["draws"] + match["losses"] == 2 and match["by_seat"]["second_0"]
    one_player = evaluate(run_dir, episodes=1, max_steps=200, env_id="PongNoFrameskip-v4")
    assert one_player["env_id"] == "PongNoFrameskip-v4" and one_player["lengths"] == [200]
    with pytest.raises(ConfigError, match="'CartPole-v1': its rows"):
        evaluate(run_dir, episodes=1, env_id="CartPole-v1")


@pytest.mark.engine
@pytest.mark.slow  # two emulators a game, played from the CLI
def test_a_one_player_pong_policy_plays_two_player_pong_from_the_cli_in_either_seat(tmp_path, capsys):
    pytest.importorskip("multi_agent_ale_py")
    run_dir = tmp_path / "pong1"
    fastrl.train("configs/pong_sync.toml", [*SMALL, "engine.envs=4", "model.precision='fp32'", "run.total_frames=128",
                                            "algo.epochs=1"], run_dir=run_dir)
    assert main(["eval", str(run_dir), "--env", PONG2, "--opponent", "random", "--episodes", "2"]) == 0
    match = json.loads(capsys.readouterr().out)
    assert match["env_id"] == PONG2 and match["wins"] + match["draws"] + match["losses"] == 2
    assert sum(match["by_seat"]["second_0"].values()) == 1  # the mirrored seat is played too
    with pytest.raises(ConfigError, match="'CartPole-v1' with --opponent: not a multi-agent game"):
        play_matches(run_dir, "random", games=1, env_id="CartPole-v1")
    with pytest.raises(ConfigError, match="a single-agent env: --opponent plays"):
        play_matches(run_dir, "random", games=1)


@pytest.mark.engine
@pytest.mark.slow  # a benchmark round
def test_the_two_player_bench_counts_each_emulator_frame_once(capsys):
    pytest.importorskip("multi_agent_ale_py")
    assert main(["bench", "two-player", "--seconds", "2", "--rounds", "1", "--games", "1", "--bare"]) == 0
    result = json.loads(capsys.readouterr().out)
    (measured,) = result["rounds"]
    two, one, bare = measured["two_player"], measured["one_player"], measured["bare"]
    # the emulators alone: both step frames, and the bare ratio is theirs
    assert bare["two_player_fps"] > 0 and bare["one_player_fps"] > 0
    assert result["bare_ratio"] == pytest.approx(bare["two_player_fps"] / bare["one_player_fps"], abs=1e-3)
    assert result["players"] == 2 and two["envs"] == 2 and one["envs"] == 1
    assert two["emulator_frames_per_s"] == pytest.approx(two["frames_per_s"] / 2, abs=0.1)
    assert result["ratio"] == pytest.approx(two["emulator_frames_per_s"] / one["frames_per_s"], abs=1e-3)
    assert main(["bench", "two-player", "pong_sync"]) == 2  # a one-player config is named, not measured
