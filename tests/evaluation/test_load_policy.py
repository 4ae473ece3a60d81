"""``fastrl.load_policy``: the trained module of a run, resolved as ``fastrl eval`` resolves it."""
import pytest
import torch

import fastrl
from fastrl.config import ConfigError
from fastrl.runs.checkpoint import load_checkpoint
from tests.helpers.runs import cartpole

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

OBS = torch.zeros(5, 4)  # five CartPole observations


def _train(tmp_path, mode: str, *overrides: str):
    config, base = cartpole(tmp_path, *overrides, mode=mode)
    run_dir = tmp_path / mode
    fastrl.train(config, base, run_dir=run_dir)
    return run_dir


def _assert_is_the_checkpoint(model, checkpoint_path):
    """The module holds exactly the checkpoint's parameters, is in eval mode and gives (logits, value)."""
    state = load_checkpoint(checkpoint_path)["model"]
    loaded = model.state_dict()
    assert loaded.keys() == state.keys()
    for key, value in state.items():
        assert torch.equal(loaded[key], value), key
    assert isinstance(model, torch.nn.Module) and not model.training
    with torch.no_grad():
        logits, value = model(OBS)
    assert logits.shape == (5, 2) and value.shape == (5,)  # CartPole: 2 actions, one value per observation


@pytest.mark.parametrize("mode, overrides", [
    ("sync", ("engine.serial=true",)),
    ("hts", ("engine.serial=true",)),
    ("async", ("engine.serial=true", "algo.name='impala'", "algo.batch_slots=4", "engine.rollout=10")),
])
def test_load_policy_of_a_run_dir_its_checkpoints_and_a_file(tmp_path, mode, overrides):
    run_dir = _train(tmp_path, mode, "run.total_frames=800", *overrides)
    latest = run_dir / "checkpoints" / "latest.pt"
    for target in (run_dir, run_dir / "checkpoints", latest, str(run_dir)):
        _assert_is_the_checkpoint(fastrl.load_policy(target), latest)
    with pytest.raises(ConfigError, match="this run has one learner; --params average applies to gala runs"):
        fastrl.load_policy(run_dir, params="average")
    with pytest.raises(ConfigError, match="has one learner"):
        fastrl.load_policy(run_dir, params="learner-0")


def test_load_policy_of_a_gala_run_average_and_each_learner(tmp_path):
    # independent agents: a ring of two may end a run with both agents holding the same average (which mixes
    # last is timing), and this test is about loading each learner, not about gossip
    run_dir = _train(tmp_path, "gala", "engine.mode='gala'", "engine.learners=2", "engine.envs=4",
                     "gala.mixing='none'", "run.total_frames=800")
    checkpoints = run_dir / "checkpoints"
    average = fastrl.load_policy(run_dir)  # auto: the top-level checkpoint, the learners' average
    _assert_is_the_checkpoint(average, checkpoints / "latest.pt")
    _assert_is_the_checkpoint(fastrl.load_policy(run_dir, params="average"), checkpoints / "latest.pt")
    learners = [fastrl.load_policy(run_dir, params=p) for p in ("learner-0", "1")]
    for i, model in enumerate(learners):
        _assert_is_the_checkpoint(model, checkpoints / f"learner-{i}" / "latest.pt")
    _assert_is_the_checkpoint(fastrl.load_policy(checkpoints / "learner-1" / "latest.pt"),
                              checkpoints / "learner-1" / "latest.pt")
    assert not all(torch.equal(a, b) for a, b in zip(learners[0].state_dict().values(),
                                                     learners[1].state_dict().values()))
    with pytest.raises(ConfigError, match="has no learner-5 checkpoint .*its learners are learner-0, learner-1"):
        fastrl.load_policy(run_dir, params="learner-5")


def test_bad_targets_and_params_are_named(tmp_path):
    with pytest.raises(ConfigError, match="nothing to evaluate at .*no such run directory or checkpoint file"):
        fastrl.load_policy(tmp_path / "nope")
    (tmp_path / "empty" / "checkpoints").mkdir(parents=True)
    with pytest.raises(ConfigError, match="nothing to evaluate at .*no checkpoint"):
        fastrl.load_policy(tmp_path / "empty")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ConfigError, match="cannot read checkpoint"):
        fastrl.load_policy(tmp_path / "junk.pt")
    torch.save({"weights": 1}, tmp_path / "other.pt")
    with pytest.raises(ConfigError, match="holds no 'model' parameters and 'config'"):
        fastrl.load_policy(tmp_path / "other.pt")
    for params in ("best", None, 1.5):
        with pytest.raises(ConfigError, match="params = .*"):
            fastrl.load_policy(tmp_path / "other.pt", params=params)
