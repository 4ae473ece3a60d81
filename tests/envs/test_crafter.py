"""Crafter (``env.id = "crafter"``): the adapter, its achievements in the metrics, the benchmark's score."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import fastrl
from csrc_free_kernels.step_end import TERMINATED, TRUNCATED
from fastrl.bench.crafter import bar_chart, score, success_rates
from fastrl.config import ConfigError, EnvConfig
from fastrl.envs.registry import backend_for, make_env
from fastrl.telemetry.episode_stats import EpisodeStats, run_totals
from fastrl.telemetry.scalars import scalars
from tests.helpers.runs import layout_digests, model_digest

pytest.importorskip("crafter")

ACHIEVEMENTS = 22
# 4 envs of 40-step episodes, 16-step rollouts: 5 updates, and every env ends at least one episode
SHORT = ["model.compile=false", "run.progress=false", "run.tensorboard=false", "env.kwargs={length=40}",
         "engine.envs=4", "engine.rollout=16", "algo.minibatches=2", "algo.epochs=1", "run.total_frames=320"]



def _play(env, seed: int, actions) -> list:
    out = np.zeros(env.obs_shape, env.obs_dtype)
    env.reset(seed, out)
    seen = []
    for action in actions:
        result = env.step(action, out, out)
        seen.append((out.tobytes(), result))
        if result[3]:
            env.reset(seed + 1, out)
    return seen


@pytest.mark.unit
def test_the_adapter_writes_channels_first_frames_and_tells_a_death_from_the_time_limit():
    env = make_env(EnvConfig(id="crafter", kwargs={"length": 25}))
    assert backend_for(EnvConfig(id="crafter")).name == "crafter"
    assert (env.obs_shape, env.obs_dtype, env.n_actions) == ((3, 64, 64), np.dtype(np.uint8), 17)
    ends = [result[2] for _, result in _play(env, 3, [0] * 60) if result[3]]
    assert ends and set(ends) == {TRUNCATED}  # alive at 25 steps: a time limit, bootstrapped
    env.env._player.health = 0  # the player dies on the next step: a terminal state
    out = np.zeros(env.obs_shape, env.obs_dtype)
    assert env.step(0, out, out)[2:] == (TERMINATED, True)
    stats = env.episode_stats()
    assert len(stats) == ACHIEVEMENTS and set(stats.values()) <= {0.0, 1.0}
    env.close()


@pytest.mark.unit
def test_an_episode_is_fixed_by_its_seed_and_actions_and_a_saved_state_goes_on_exactly():
    """Crafter's chunks iterate creatures by memory address: without the adapter's ordering, another process (or a
    restored pickle) drew the same numbers for other creatures (the worlds parted after ~150 steps)."""
    actions = np.random.default_rng(0).integers(17, size=500).tolist()
    one, two = make_env(EnvConfig(id="crafter")), make_env(EnvConfig(id="crafter"))
    assert _play(one, 5, actions) == _play(two, 5, actions)
    assert _play(one, 6, actions[:50]) != _play(two, 5, actions[:50])
    out = np.zeros(one.obs_shape, one.obs_dtype)
    one.reset(7, out)
    for action in actions[:200]:
        one.step(action, out, out)
    restored = make_env(EnvConfig(id="crafter"))
    restored.set_state(one.get_state())
    copy = out.copy()
    for action in actions[200:]:
        assert one.step(action, out, out) == restored.step(action, copy, copy)
        np.testing.assert_array_equal(out, copy)


@pytest.mark.unit
def test_the_score_is_the_papers_geometric_mean_of_the_success_rates():
    assert score({"a": 0.0, "b": 0.0}) == 0.0
    assert math.isclose(score({"a": 100.0, "b": 0.0}), math.sqrt(101.0) - 1.0)
    assert math.isclose(score(dict.fromkeys("abc", 10.0)), 10.0)
    chart = bar_chart({"collect_wood": 90.0, "collect_diamond": 0.0}).splitlines()
    assert chart[0].startswith("collect_wood") and chart[0].count("#") > 30 and "#" not in chart[1]


@pytest.mark.unit
def test_the_run_totals_are_every_episode_of_every_line():
    first, second = EpisodeStats(), EpisodeStats()
    for unlocked in (1.0, 0.0, 1.0):
        first.add({"collect_wood": unlocked})
    second.add({"collect_wood": 1.0})
    lines = [first.fields(), {"frames": 1}, second.fields()]
    assert lines[0] == {"episode_stats": {"collect_wood": 2 / 3}, "episode_stats_episodes": 3}
    totals = run_totals(lines)
    assert totals.episodes == 4 and math.isclose(totals.sums["collect_wood"], 3.0)
    assert EpisodeStats().fields() == {}
    assert scalars(lines[0]) == {"episode_stats/collect_wood": 2 / 3, "episode_stats_episodes": 3.0}  # TensorBoard
    # killed after the line at 300 frames, resumed from a checkpoint at 200: the line past it is replayed
    stamped = [{"frames": 100, **first.fields()}, {"frames": 300, **second.fields()}, {"frames": 250, **first.fields()}]
    assert run_totals(stamped).episodes == 6


@pytest.mark.engine
def test_crafter_trains_with_its_achievements_in_the_metrics_and_the_same_bits_in_two_layouts(tmp_path, in_process):
    assert len(layout_digests(tmp_path, "configs/crafter_ppo.toml", SHORT, [(1, 1), (2, 1)], 320)) == 1
    run_dir = tmp_path / "x1g1"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["episodes"] >= 4  # every env ended at least one 40-step episode
    lines = [json.loads(text) for text in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert sum(line.get("episode_stats_episodes", 0) for line in lines) == summary["episodes"]
    rates, episodes = success_rates(run_dir)
    assert episodes == summary["episodes"] and len(rates) == ACHIEVEMENTS
    assert max(rates.values()) > 0  # an untrained policy unlocks some (collecting a sapling, waking up)
    assert in_process("bench", "crafter", str(run_dir), "--out", str(tmp_path / "rates.png")) == 0, in_process.err
    result = json.loads(in_process.out)
    assert result["score"] == round(score(rates), 3) and (tmp_path / "rates.png").stat().st_size > 0
    assert "collect_wood" in in_process.err and "score" in in_process.err


@pytest.mark.slow  # 7 s; the adapter's saved state going on exactly is a unit test of the default run
@pytest.mark.engine
def test_a_crafter_run_resumes_exactly(tmp_path):
    whole, half = tmp_path / "whole", tmp_path / "half"
    fastrl.train("configs/crafter_ppo.toml", [*SHORT, "engine.executors=1"], run_dir=whole)
    fastrl.train("configs/crafter_ppo.toml", [*SHORT, "engine.executors=1", "run.total_frames=192"], run_dir=half)
    fastrl.train(resume=half, overrides=["run.total_frames=320"])
    assert model_digest(half) == model_digest(whole)


@pytest.mark.unit
def test_a_run_without_achievements_is_refused_by_the_score(tmp_path):
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"frames": 10, "return_mean": 1.0}) + "\n")
    with pytest.raises(ConfigError, match="no episode with achievements"):
        success_rates(tmp_path)


def test_the_speed_bench_counts_the_rounds_whose_two_readings_of_crafter_alone_agree():
    from fastrl.bench.crafter import speed_summary

    def round_(alone: float, drift: float, engine: float) -> dict:
        return {"crafter_alone": alone, "alone_drift": drift, "adapter_loop": alone * 0.95, "engine": engine}

    result = speed_summary([round_(1000, 0.02, 900), round_(1000, 0.30, 1300), round_(1000, 0.05, 700)])
    assert result["steady_rounds"] == 2 and [r["steady"] for r in result["rounds"]] == [True, False, True]
    assert result["engine_of_crafter_alone"] == 0.8  # (0.9 + 0.7) / 2: the unsteady 1.3 left out
    assert result["steps_per_s"]["engine"] == 800 and result["adapter_loop_of_crafter_alone"] == 0.95
    everything = speed_summary([round_(1000, 0.30, 1300), round_(1000, 0.40, 700)])  # none steady: all of them
    assert everything["steady_rounds"] == 0 and everything["engine_of_crafter_alone"] == 1.0
