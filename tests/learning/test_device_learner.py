"""The learner's way to its device, tested on the CPU: every storage field reaches the device once per update
(counted), and the checks a GPU learner defers to the end of an update (reliability.finite_checks = 'update')
train the same bits as checking every step, and roll a bad update back whole."""

import numpy as np
import pytest
import torch

import fastrl
import fastrl.buffers.device_storage as device_storage
from fastrl.process.faults import RunFailed
from tests.helpers.runs import assert_cleaned_up, cartpole, model_digest

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

PONG = ["engine.serial=true", "engine.envs=4", "engine.rollout=32", "model.compile=false", "run.progress=false",
        "run.tensorboard=false"]




@pytest.mark.slow  # a Pong run; the deferred-checks test keeps the upload path in the default tier
def test_every_storage_field_reaches_the_device_once_per_update(tmp_path, monkeypatch):
    """The default job's PPO (3 epochs x 4 minibatches) on Pong, in one process, every conversion of a frame
    array to a tensor recorded: the frames go to the device once per update, through the uploads, and
    nowhere else (the normaliser's sample and the minibatches are indexed on the device)."""
    frames, storages = [], []
    real_from_numpy, real_of, real_upload = torch.from_numpy, device_storage.Uploads.of, device_storage.Uploads.upload

    def from_numpy(array):
        if array.dtype == np.uint8 and array.ndim >= 3:  # Atari frames, however many
            frames.append(array.shape)
        return real_from_numpy(array)

    def of(self, arrays):
        storages.append([])
        return real_of(self, arrays)

    def upload(self, name, array):
        storages[-1].append(name)
        return real_upload(self, name, array)

    monkeypatch.setattr(torch, "from_numpy", from_numpy)
    monkeypatch.setattr(device_storage.Uploads, "of", of)
    monkeypatch.setattr(device_storage.Uploads, "upload", upload)
    updates = 3
    summary = fastrl.train("configs/pong_sync.toml", [*PONG, f"run.total_frames={updates * 4 * 32 * 4}"],
                           run_dir=tmp_path / "run")
    assert summary["status"] == "complete" and summary["updates"] == updates
    assert len(storages) == updates + 1  # and the warm-up's zeros, shaped as an update's storage
    for fields in storages:
        assert "obs" in fields and len(fields) == len(set(fields)), fields  # no field twice in one update
    assert {"obs", "action", "logp", "value"} <= set(storages[-1])
    assert frames == [(4, 33, 4, 84, 84)] * len(storages)  # whole storages [N, T + 1, ...], never rows again


@pytest.mark.parametrize("config, overrides", [
    pytest.param("configs/pong_sync.toml", PONG + ["run.total_frames=2048"],  # sync PPO, normalised inputs, returns
                 marks=pytest.mark.slow),
    pytest.param("configs/pong_hts.toml", PONG + ["run.total_frames=2048"],  # hts PPO: the trainee, a version ahead
                 marks=pytest.mark.slow),
    ("configs/cartpole_ppo.toml", ["run.total_frames=4096", "model.lstm=16", "algo.minibatches=2",
                                   "run.progress=false", "run.tensorboard=false"]),  # whole rollouts
])
def test_checks_deferred_to_the_end_of_an_update_train_the_same_bits(tmp_path, config, overrides):
    digests = []
    for checks in ("step", "update"):
        summary = fastrl.train(config, [*overrides, f"reliability.finite_checks='{checks}'"],
                               run_dir=tmp_path / checks)
        assert summary["status"] == "complete"
        digests.append(model_digest(tmp_path / checks))
    assert digests[0] == digests[1]


LONG = ["run.total_frames=10_000_000", "run.max_seconds=60", "engine.serial=true",
        "reliability.finite_checks='update'"]


@pytest.mark.parametrize("algo", ["a2c", "ppo"])
def test_a_non_finite_loss_found_at_the_end_of_an_update_rolls_it_back(tmp_path, algo):
    config, base = cartpole(tmp_path, "env.id='tests.helpers.faulty_envs:cartpole'",
                            "env.kwargs={fault='huge_reward', at=13}", f"algo.name='{algo}'", *LONG)
    with pytest.raises(RunFailed) as info:
        fastrl.train(config, base, run_dir=tmp_path / "run")
    assert "non-finite loss" in str(info.value) and "on the data of rollout 2" in str(info.value)
    checkpoint = assert_cleaned_up(tmp_path / "run")
    assert checkpoint["version"] == 2 and checkpoint["updates"] == 2  # rollouts 0 and 1 learned, not 2


@pytest.mark.parametrize("mode", ["sync", "hts"])
def test_non_finite_parameters_roll_the_whole_update_back(tmp_path, mode):
    """PPO's epochs run on, then the update is undone: θ and the optimizer state as before it."""
    config, base = cartpole(tmp_path, "algo.name='ppo'", "algo.lr=3e38", *LONG, mode=mode)
    with pytest.raises(RunFailed) as info:
        fastrl.train(config, base, run_dir=tmp_path / "run")
    message = str(info.value)
    assert "non-finite parameters after an optimizer step" in message and "rolled back" in message
    checkpoint = assert_cleaned_up(tmp_path / "run")
    assert checkpoint["updates"] == 0


def test_finite_checks_is_refused_by_name_for_other_values():
    from fastrl.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="reliability.finite_checks = 'never'"):
        load_config(None, ["reliability.finite_checks='never'"])
