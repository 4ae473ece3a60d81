"""CartPole-v1 to a mean return of 475 with each shipped config, every gala learner too (slow: minutes each)."""
import pytest

import fastrl

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("config", ["cartpole_sync", "cartpole_hts", "cartpole_ppo", "cartpole_hts_ppo",
                                    "cartpole_impala", "cartpole_pqn"])
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


# The optimizer and input normalisation each Pong A2C-family job learns with, in that job's mode on CartPole
@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("config, pong", [("cartpole_sync", "pong_sync_a2c"), ("cartpole_hts", "pong_hts_a2c"),
                                          ("cartpole_impala", "pong_impala"), ("cartpole_gala", "pong_gala")])
def test_each_pong_a2c_jobs_optimizer_and_inputs_reach_475_in_its_mode(tmp_path, config, pong):
    from fastrl.config import tomllib  # tomli on Python 3.10

    with open(f"configs/{pong}.toml", "rb") as f:
        job = tomllib.load(f)
    settings = [f"algo.optimizer='{job['algo']['optimizer']}'",
                f"model.normalize_obs={str(job['model']['normalize_obs']).lower()}"]
    summary = fastrl.train(f"configs/{config}.toml", ["run.progress=false", f"run.dir='{tmp_path}'", *settings],
                           run_dir=tmp_path / config)
    returns = ([entry["return_mean"] for entry in summary["learners"]] if "learners" in summary
               else [summary["final_return_mean"]])
    assert min(returns) >= 475, summary
