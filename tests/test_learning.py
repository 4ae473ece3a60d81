"""CartPole-v1 to a mean return of 475 with each shipped config, every gala learner too (slow: minutes each)."""
import pytest

import fastrl


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("config", ["cartpole_sync", "cartpole_hts", "cartpole_ppo", "cartpole_hts_ppo",
                                    "cartpole_impala"])
def test_cartpole_reaches_475(tmp_path, config):
    summary = fastrl.train(f"configs/{config}.toml", ["run.progress=false", f"run.dir='{tmp_path}'"],
                           run_dir=tmp_path / config)
    assert summary["final_return_mean"] >= 475, summary


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("mixing", ["ring", "allreduce"])
def test_every_gala_learner_reaches_475(tmp_path, mixing):
    summary = fastrl.train("configs/cartpole_gala.toml",
                           ["run.progress=false", f"run.dir='{tmp_path}'", f"gala.mixing='{mixing}'"],
                           run_dir=tmp_path / mixing)
    assert len(summary["learners"]) == 4
    assert all(entry["return_mean"] >= 475 for entry in summary["learners"]), summary["learners"]


# What the Pong A2C-family jobs (pong_sync_a2c, pong_hts_a2c, pong_impala, pong_gala) learn with:
# TensorFlow's RMSprop and running observation statistics, in each of their modes
@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("config", ["cartpole_sync", "cartpole_hts", "cartpole_impala", "cartpole_gala"])
def test_tf_rmsprop_on_normalized_inputs_reaches_475_in_every_mode(tmp_path, config):
    summary = fastrl.train(f"configs/{config}.toml", ["run.progress=false", f"run.dir='{tmp_path}'",
                                                      "algo.optimizer='rmsprop_tf'", "model.normalize_obs=true"],
                           run_dir=tmp_path / config)
    returns = ([entry["return_mean"] for entry in summary["learners"]] if "learners" in summary
               else [summary["final_return_mean"]])
    assert min(returns) >= 475, summary
