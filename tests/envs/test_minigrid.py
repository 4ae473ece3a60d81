"""MiniGrid ids: the mission dropped, the cells as a float vector part, the direction one-hot; DoorKey-5x5
learned with configs/minigrid_doorkey.toml."""
import builtins

import gymnasium as gym
import minigrid  # noqa: F401  (registers the ids)
import numpy as np
import pytest

import fastrl
from fastrl.config import ConfigError, EnvConfig
from fastrl.envs.actions import UnsupportedEnvError
from fastrl.envs.minigrid import MiniGridObservation
from fastrl.envs.registry import make_env
from tests.helpers.runs import cartpole

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

DOORKEY = "MiniGrid-DoorKey-5x5-v0"


def test_the_observation_is_the_cells_and_the_direction_in_flatten_order():
    adapter = make_env(EnvConfig(id=DOORKEY))
    layout = adapter.obs_layout
    assert [(p.name, p.encoding, p.shape) for p in layout.parts] == [
        ("direction", "one_hot", (4,)), ("image", "box", (7, 7, 3))]
    assert not layout.packed and adapter.obs_shape == (4 + 147,)
    env = MiniGridObservation(gym.make(DOORKEY))
    row = np.zeros(adapter.obs_shape, np.float32)
    adapter.reset(3, row)
    obs, _ = env.reset(seed=3)
    assert "mission" not in obs
    assert np.array_equal(row, gym.spaces.flatten(env.observation_space, obs))
    raw, _ = gym.make(DOORKEY).reset(seed=3)
    assert np.array_equal(row[4:], raw["image"].ravel().astype(np.float32))  # indices, not scaled


def test_a_minigrid_run_trains_with_the_mlp(tmp_path):
    config, base = cartpole(tmp_path, f"env.id='{DOORKEY}'", "model.name='auto'", "model.normalize_obs=true",
                            "algo.name='ppo'", "algo.minibatches=2", "engine.serial=true")
    summary = fastrl.train(config, base, run_dir=tmp_path / "run")
    assert summary["status"] == "complete" and summary["frames"] >= 800
    assert "Linear(in_features=151" in repr(fastrl.load_policy(tmp_path / "run"))


def test_babyai_and_unknown_ids_are_refused_by_name(monkeypatch):
    with pytest.raises(UnsupportedEnvError, match="BabyAI's missions change every episode"):
        make_env(EnvConfig(id="BabyAI-GoToRedBall-v0"))
    with pytest.raises(UnsupportedEnvError, match="is not a MiniGrid id; did you mean .*'MiniGrid-DoorKey-5x5-v0'"):
        make_env(EnvConfig(id="MiniGrid-DoorKey-5x6-v0"))
    real_import = builtins.__import__

    def without_minigrid(name, *args, **kwargs):
        if name == "minigrid":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_minigrid)
    with pytest.raises(UnsupportedEnvError,
                       match=r"needs the minigrid package: pip install 'fastrl-engine\[minigrid\]'"):
        make_env(EnvConfig(id=DOORKEY))


def test_a_refused_id_stops_the_run_before_it_starts(tmp_path):
    config, base = cartpole(tmp_path, "env.id='BabyAI-GoToRedBall-v0'")
    with pytest.raises(ConfigError, match="BabyAI"):
        fastrl.train(config, base, run_dir=tmp_path / "run")


@pytest.mark.slow  # learns to a score
def test_doorkey_5x5_reaches_a_mean_return_of_0_9(tmp_path):
    """configs/minigrid_doorkey.toml stops at 0.9 (~35K frames, seconds); the checkpoint then plays it too."""
    summary = fastrl.train("configs/minigrid_doorkey.toml", ["run.progress=false"], run_dir=tmp_path / "run")
    assert summary["final_return_mean"] >= 0.9 and summary["frames"] < 200_000, summary
    played = fastrl.evaluate(tmp_path / "run", episodes=50)
    assert played["return_mean"] >= 0.85 and min(played["returns"]) > 0, played
