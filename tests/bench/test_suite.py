"""``fastrl bench suite``: games and seeds one after another, resumable, scored human-normalised with IQM,
median and mean and their stratified-bootstrap intervals."""
import json

import numpy as np
import pytest

import fastrl
from fastrl import cli
from fastrl.bench import aggregate, suite
from fastrl.bench.atari_scores import ATARI5, RANDOM_HUMAN, human_normalized
from fastrl.bench.machine import bf16_units
from fastrl.config import ConfigError

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

TINY = ["engine.serial=true", "engine.envs=2", "engine.rollout=8", "algo.minibatches=1", "run.progress=false",
        "run.log_interval_s=0.5"]


def test_the_aggregates_of_a_hand_computed_case():
    scores = np.array([[0.0, 1.0, 10.0, 2.0],
                       [4.0, 3.0, 0.0, 100.0]])  # 2 seeds x 4 games
    # sorted: 0 0 1 2 3 4 10 100; the middle half (2 cut from each end): 1 2 3 4
    assert aggregate.iqm(scores) == 2.5
    # each game's mean over seeds: 2 2 5 51
    assert aggregate.median(scores) == 3.5
    assert aggregate.mean(scores) == 15.0


def test_the_interval_of_a_hand_computed_case():
    # one game, two seeds scoring 0 and 1: a resample's mean is 0, 0.5 or 1 with chances 1/4, 1/2, 1/4,
    # so the central 95% runs from 0 to 1 around the point 0.5
    estimate = aggregate.stratified_bootstrap(np.array([[0.0], [1.0]]), aggregate.mean)
    assert (estimate.point, estimate.low, estimate.high) == (0.5, 0.0, 1.0)
    # one seed per game: every resample is that seed, the interval is the point
    one = aggregate.summarize(np.array([[0.2, 0.9, 0.4]]))
    assert one["iqm"]["point"] == pytest.approx(0.5)  # 3 scores: floor(3 / 4) = 0 cut
    assert one["iqm"]["ci"] == [one["iqm"]["point"]] * 2 and one["median"]["ci"] == [0.4, 0.4]
    # strata are kept: a resample never takes a game's score for another's
    strata = aggregate.stratified_bootstrap(np.array([[0.0, 10.0], [0.0, 10.0]]), aggregate.median)
    assert (strata.low, strata.high) == (5.0, 5.0)
    # the same scores give the same interval
    noisy = np.random.default_rng(0).normal(size=(3, 5))
    assert aggregate.summarize(noisy) == aggregate.summarize(noisy)
    with pytest.raises(ValueError, match="finite"):
        aggregate.summarize(np.array([[np.nan]]))


def test_human_normalised_scores_and_atari5():
    assert human_normalized("pong", -20.7) == 0.0 and human_normalized("pong", 14.6) == pytest.approx(1.0)
    assert len(RANDOM_HUMAN) == 57
    assert ATARI5 == ("battle_zone", "double_dunk", "name_this_game", "phoenix", "qbert")
    assert all(game in RANDOM_HUMAN for game in ATARI5)


def test_games_are_put_into_the_configs_own_atari_id():
    assert suite.resolve_games(["atari5", "Pong", "qbert"]) == [*ATARI5, "pong"]
    assert suite.game_env_id("PongNoFrameskip-v4", "battle_zone") == "BattleZoneNoFrameskip-v4"
    assert suite.game_env_id("ALE/Pong-v5", "ms_pacman") == "ALE/MsPacman-v5"
    with pytest.raises(ConfigError, match="unknown Atari game 'Pongg'.*close matches: Pong"):
        suite.resolve_games(["Pongg"])
    with pytest.raises(ConfigError, match="not an Atari id"):
        suite.game_env_id("CartPole-v1", "pong")


def _fake_train(calls: list, scores: dict):
    """Stands in for fastrl.train: writes the files a finished run leaves, its final score from ``scores``."""
    def train(config, overrides, run_dir):
        run_dir.mkdir(parents=True)
        env_id = next(o.split("=", 1)[1].strip("'") for o in overrides if o.startswith("env.id="))
        seed = int(next(o.split("=", 1)[1] for o in overrides if o.startswith("run.seed=")))
        calls.append((env_id, seed))
        final = scores[(env_id, seed)]
        lines = [{"time_s": 1.0, "frames": 100, "episodes": 1, "return_mean": final - 1.0},
                 {"time_s": 2.0, "frames": 200, "episodes": 2, "return_mean": final}]
        (run_dir / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
        (run_dir / "summary.json").write_text(json.dumps({"env_id": env_id, "frames": 200, "train_s": 2.0,
                                                          "fps": 100.0, "status": "complete"}))
        return {}
    return train


def test_a_suite_aggregates_its_runs_and_resumes_without_running_a_finished_one(tmp_path, monkeypatch):
    scores = {("PongNoFrameskip-v4", 0): -20.7, ("PongNoFrameskip-v4", 1): 14.6,
              ("QbertNoFrameskip-v4", 0): 163.9, ("QbertNoFrameskip-v4", 1): 13455.0}
    calls: list = []
    monkeypatch.setattr(fastrl, "train", _fake_train(calls, scores))
    (tmp_path / "qbert-seed1").mkdir()  # a run cut short before: started afresh
    (tmp_path / "qbert-seed1" / "metrics.jsonl").write_text("partial\n")
    result = suite.run_suite(None, ["Pong", "Qbert"], seeds=2, frames=200, out=tmp_path)
    assert calls == [("PongNoFrameskip-v4", 0), ("PongNoFrameskip-v4", 1), ("QbertNoFrameskip-v4", 0),
                     ("QbertNoFrameskip-v4", 1)]
    assert [row["normalized"] for row in result["runs"]] == pytest.approx([0.0, 1.0, 0.0, 1.0])
    assert result["per_game"]["pong"]["final_mean"] == pytest.approx(-3.05)
    assert result["aggregates"]["iqm"]["point"] == pytest.approx(0.5)
    assert result["aggregates"]["median"]["point"] == pytest.approx(0.5)
    assert result["runs"][0]["best"] == -20.7
    assert json.loads((tmp_path / "suite.json").read_text())["aggregates"] == result["aggregates"]
    page = (tmp_path / "suite.md").read_text()
    assert "| IQM | 0.500 |" in page
    assert f"{bf16_units(result['machine'])}, torch" in page  # the machine's kind of bf16 named on the page
    assert (tmp_path / "suite.png").is_file()
    # the same command again: nothing is trained, the result is the same
    calls.clear()
    (tmp_path / "pong-seed1" / suite.RUN_RESULT).unlink()  # ... except a run whose result is missing
    again = suite.run_suite(None, ["Pong", "Qbert"], seeds=2, frames=200, out=tmp_path)
    assert calls == [("PongNoFrameskip-v4", 1)]
    assert again["aggregates"] == result["aggregates"]


def test_a_real_atari_suite_runs_each_game_and_names_runs_without_an_episode(tmp_path):
    result = suite.run_suite(None, ["Pong", "Breakout"], seeds=1, frames=256, out=tmp_path, window=5,
                             overrides=TINY)
    assert [row["env_id"] for row in result["runs"]] == ["PongNoFrameskip-v4", "BreakoutNoFrameskip-v4"]
    assert all(row["frames"] >= 256 for row in result["runs"])
    # 64 agent steps per env finish no Pong game: no score, so no aggregate, and the table says why
    assert result["aggregates"] is None and "pong-seed0" in result["without_score"]
    assert "No aggregate" in (tmp_path / "suite.md").read_text()


def test_bad_options_are_named_before_any_run(tmp_path, capsys):
    with pytest.raises(ConfigError, match="exactly one budget"):
        suite.run_suite(None, ["Pong"], seeds=1, out=tmp_path)
    with pytest.raises(ConfigError, match="--seeds 0"):
        suite.run_suite(None, ["Pong"], seeds=0, frames=10, out=tmp_path)
    with pytest.raises(ConfigError, match="run.seed is what --seeds sets here"):
        suite.run_suite(None, ["Pong"], seeds=1, frames=10, out=tmp_path, overrides=["run.seed=3"])
    with pytest.raises(ConfigError, match="no published random and human scores"):
        suite.run_suite(None, ["Tetris"], seeds=1, frames=10, out=tmp_path)
    assert cli.main(["bench", "suite", "configs/cartpole_ppo.toml", "--games", "Pong", "--frames", "10",
                     "--out", str(tmp_path)]) == 2
    assert "not an Atari id" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


@pytest.mark.unit
@pytest.mark.parametrize(("flags", "named"), [
    ({"amx_bf16": True, "avx512_bf16": True}, "AMX-BF16"),
    ({"amx_bf16": False, "avx512_bf16": True}, "AVX512-BF16, no AMX"),
    ({"amx_bf16": False, "avx512_bf16": False}, "no native bf16"),
])
def test_a_results_line_names_the_cpus_kind_of_bf16(flags, named):
    """Three kinds of CPU whose figures never compare as one: AMX, AVX512-BF16 alone (a Zen 4), bf16 emulated."""
    assert bf16_units(flags) == named
