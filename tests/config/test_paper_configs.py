"""The papers' own settings stay pinned beside the configs that learn fastest here: HTS-RL's Table A3 A2C
(configs/pong_hts_a2c_paper.toml) and GALA's agents (configs/pong_gala_paper.toml); IMPALA's Table G1 is
pinned in test_impala_scale.py."""
from pathlib import Path

import pytest

from fastrl.config import load_config

pytestmark = pytest.mark.unit  # the fast tier: no engine run

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
# HTS-RL (Liu et al. 2020) Table A3, the A2C of openai/baselines and ikostrikov's pytorch-a2c-ppo-acktr
TABLE_A3 = {"optimizer": "rmsprop", "lr": 7e-4, "eps": 1e-5, "rms_alpha": 0.99, "gamma": 0.99, "entropy_coef": 0.01,
            "value_coef": 0.5, "max_grad_norm": 0.5}


def _algo(config) -> dict:
    return {key: getattr(config.algo, key) for key in TABLE_A3}


def test_the_hts_a2c_paper_config_is_table_a3_on_raw_inputs():
    config = load_config(CONFIGS / "pong_hts_a2c_paper.toml")
    assert config.engine.mode == "hts" and config.algo.name == "a2c" and _algo(config) == TABLE_A3
    assert (config.engine.envs, config.engine.rollout) == (16, 5)
    assert not config.model.normalize_obs  # the paper's inputs: divided by 255 only


def test_the_gala_paper_config_is_the_papers_a2c_agents_on_a_ring():
    config = load_config(CONFIGS / "pong_gala_paper.toml")
    engine = config.engine
    assert engine.mode == "gala" and config.gala.mixing == "ring" and config.gala.base == "sync"
    assert config.algo.name == "a2c" and _algo(config) == TABLE_A3
    assert (engine.learners, engine.envs, engine.rollout) == (4, 16, 5) and config.model.name == "shallow"
    assert not config.model.normalize_obs


def test_the_learning_configs_differ_from_the_papers_only_where_their_comments_say():
    hts, gala = load_config(CONFIGS / "pong_hts_a2c.toml"), load_config(CONFIGS / "pong_gala.toml")
    assert _algo(hts) == TABLE_A3 and hts.model.normalize_obs  # zero-mean inputs, the rest Table A3
    assert _algo(gala) == TABLE_A3 and gala.model.normalize_obs
    assert (gala.engine.learners, gala.engine.envs) == (2, 16)  # 40-sample updates per agent
