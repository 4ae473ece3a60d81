"""The sampling benchmark's plumbing (not its speed: speed is measured in bench/, never in tests)."""
from __future__ import annotations

import json

import pytest

from fastrl.bench.sampling import main as sampling_main
from fastrl.bench.sampling import measure


def test_sampling_bench_reports_the_engine_and_both_references_per_round(capsys):
    sampling_main(["configs/pong_hts.toml", "--seconds", "1", "--rounds", "2",
                   "--set", "engine.envs=4", "--set", "engine.executors=2", "--set", "engine.actors=2"])
    result = json.loads(capsys.readouterr().out)
    assert result["fastrl"]["policy"] == "random" and result["fastrl"]["envs"] == 4
    assert result["atari_vector_env"]["num_envs"] == 4
    assert len(result["rounds"]) == 2
    for row in result["rounds"]:
        assert row["fastrl_fps"] > 0 and row["raw_fps"] > 0 and row["atari_vector_env_fps"] > 0
        assert row["of_raw_emulator"] == pytest.approx(row["fastrl_fps"] / row["raw_fps"], rel=1e-2)
        assert row["vs_atari_vector_env"] == pytest.approx(row["fastrl_fps"] / row["atari_vector_env_fps"], rel=1e-2)
    ratios = sorted(r["of_raw_emulator"] for r in result["rounds"])
    assert ratios[0] <= result["of_raw_emulator"] <= ratios[-1]
    assert set(result["fastrl"]["time_split"]) == {"env", "inference", "learning", "waiting"}


def test_sampling_bench_refuses_a_non_atari_config():
    with pytest.raises(ValueError, match="CartPole-v1"):
        measure("configs/cartpole_hts.toml", seconds=1)
    with pytest.raises(ValueError, match="rounds"):
        measure("configs/pong_hts.toml", seconds=1, rounds=0)
