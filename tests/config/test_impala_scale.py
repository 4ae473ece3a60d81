"""configs/pong_impala_paper.toml is the IMPALA paper's Atari settings turned from its summed loss into
fastrl's means."""
import math
from pathlib import Path

import pytest

from fastrl.algos.registry import load_algorithm, options_of
from fastrl.config import load_config

pytestmark = pytest.mark.unit  # the fast tier: no engine run

PAPER = {"baseline_cost": 0.5, "entropy_cost": 0.01, "lr": 6e-4, "rmsprop_eps": 0.01, "grad_clip": 40.0,
         "unroll": 20, "batch": 32, "gamma": 0.99, "actors": 48}


def test_pong_impala_matches_the_papers_atari_settings_on_the_mean_loss():
    config = load_config(Path(__file__).resolve().parents[2] / "configs" / "pong_impala_paper.toml")
    algo, engine = config.algo, config.engine
    steps = engine.rollout * algo.batch_slots  # N: the paper sums over these, fastrl averages
    assert (engine.rollout, algo.batch_slots, engine.envs) == (PAPER["unroll"], PAPER["batch"], PAPER["actors"])
    assert algo.value_coef == PAPER["baseline_cost"] / 2  # baseline_cost x 1/2 sum -> value_coef x mean
    assert algo.entropy_coef == PAPER["entropy_cost"]
    assert (algo.optimizer, algo.lr, algo.lr_schedule, algo.rms_alpha) == ("rmsprop", PAPER["lr"], "linear", 0.99)
    assert math.isclose(algo.eps, math.sqrt(PAPER["rmsprop_eps"]) / steps)  # TF's epsilon sits under the root
    assert math.isclose(algo.max_grad_norm, PAPER["grad_clip"] / steps)
    vtrace = options_of(load_algorithm("impala"), algo.options)
    assert algo.gamma == PAPER["gamma"] and (vtrace.rho_bar, vtrace.c_bar) == (1.0, 1.0)
    assert algo.normalize_returns is False  # no PopArt in the paper's IMPALA
    assert config.env.atari.clip_rewards and config.env.atari.episodic_life
    assert (config.env.atari.frame_skip, config.env.atari.stack, config.env.atari.size) == (4, 4, 84)
