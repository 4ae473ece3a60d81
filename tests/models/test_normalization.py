"""Running normalisation of observations (model.normalize_obs) and returns (algo.normalize_returns)."""
import numpy as np
import pytest
import torch

import fastrl
from fastrl.algos.ppo import PPOBatch, ppo_loss
from fastrl.config import ConfigError, load_config
from fastrl.models import build_model
from fastrl.models.normalizer import ObsNormalizer, RunningMeanStd, ValueNormalizer
from fastrl.runs.checkpoint import load_checkpoint
from tests.helpers.runs import cartpole

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks


def test_running_moments_are_those_of_every_batch_with_the_prior():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(n, 4)).astype(np.float32) for n in (7, 50, 1, 33)]
    stats = RunningMeanStd((4,))
    for batch in batches:
        stats.observe(torch.from_numpy(batch))
    # the prior is one sample of mean 0 and variance 1: the moments of (prior, data) pooled
    data = np.concatenate(batches).astype(np.float64)
    n = len(data) + 1
    mean = data.sum(0) / n
    var = (((data - mean) ** 2).sum(0) + (1.0 + mean**2)) / n
    assert stats.count.item() == n
    np.testing.assert_allclose(stats.mean.numpy(), mean, rtol=1e-5)
    np.testing.assert_allclose(stats.var.numpy(), var, rtol=1e-4)


def test_observations_are_standardised_per_element_and_clipped():
    norm = ObsNormalizer((2,))
    norm.observe(torch.tensor([[0.0, 10.0], [2.0, 10.0]] * 5000))  # enough rows for the prior to fade
    out = norm(torch.tensor([[1.0, 10.0], [3.0, 11.0]]))
    assert out[0, 0].item() == pytest.approx(0.0, abs=0.02)
    assert out[1, 0].item() == pytest.approx(2.0, rel=0.02)  # one std above the mean
    assert out[1, 1].item() == 5.0  # a static element that moves is clipped, not blown up
    assert out[0, 1].item() == pytest.approx(0.0, abs=0.1)


def test_value_normalizer_turns_the_head_into_returns():
    norm = ValueNormalizer()
    norm.observe(torch.tensor([4.0, 6.0] * 500))
    head = torch.tensor([0.0, 1.0])
    np.testing.assert_allclose(norm(head).numpy(), [5.0, 6.0], rtol=1e-2)


def test_ppo_value_loss_is_measured_in_units_of_the_return_scale():
    class Constant(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bias = torch.nn.Parameter(torch.zeros(1))

        def forward(self, obs):
            return torch.zeros(obs.shape[0], 2) + 0 * self.bias, torch.full((obs.shape[0],), 4.0) + self.bias

    batch = PPOBatch(obs=torch.zeros(2, 1), actions=torch.zeros(2, dtype=torch.long),
                     old_logp=torch.full((2,), -np.log(2)), old_values=torch.full((2,), 4.0),
                     advantages=torch.tensor([1.0, -1.0]), returns=torch.tensor([0.0, 8.0]))
    _, plain = ppo_loss(Constant(), batch, 0.1, 0.0, 1.0, 0.0, value_scale=1.0)
    _, scaled = ppo_loss(Constant(), batch, 0.1, 0.0, 1.0, 0.0, value_scale=4.0)
    assert plain.value_loss == pytest.approx(0.5 * 16.0)
    assert scaled.value_loss == pytest.approx(0.5 * 1.0)
    # the clip range is in the same units: a value that moved 0.4 with clip 0.1 x scale 4 is not clipped
    batch.old_values = torch.full((2,), 3.6)
    _, clipped = ppo_loss(Constant(), batch, 0.1, 0.1, 1.0, 0.0, value_scale=4.0)
    assert clipped.value_loss == pytest.approx(scaled.value_loss)


def test_normalizers_are_model_state_and_custom_models_are_refused():
    model = build_model("nature", (4, 84, 84), np.uint8, 6, normalize_obs=True, normalize_value=True)
    keys = set(model.state_dict())
    assert {"obs_normalizer.mean", "obs_normalizer.var", "value_normalizer.mean", "value_normalizer.var"} <= keys
    with pytest.raises(ValueError, match="normalise its own"):
        build_model("random", (4,), np.float32, 2, normalize_obs=True)
    with pytest.raises(ConfigError, match="normalize_returns"):
        load_config(None, ["algo.name='a2c'", "algo.normalize_returns=true"])


def _normalized_run(tmp_path, name, *overrides):
    config, base = cartpole(tmp_path, "algo.name='ppo'", "model.normalize_obs=true", "algo.normalize_returns=true",
                            "run.total_frames=800", "engine.step_delay_s=0.002", *overrides, mode="hts")
    fastrl.train(config, base, run_dir=tmp_path / name)
    return load_checkpoint(tmp_path / name)


def test_normalised_runs_are_deterministic_and_keep_their_statistics(tmp_path):
    """The statistics move in the learner only, by the rows learned from: the layout cannot change them."""
    one = _normalized_run(tmp_path, "one")
    two = _normalized_run(tmp_path, "two", "engine.executors=2", "engine.actors=2", "engine.inline_actors=true")
    assert one["model"].keys() == two["model"].keys()
    for key in one["model"]:
        assert torch.equal(one["model"][key], two["model"][key]), key
    state = one["model"]
    learned = state["obs_normalizer.count"].item() - 1  # every row of every storage learned from, once
    assert learned > 0 and learned % 40 == 0  # 8 envs x 5 steps a storage
    assert state["value_normalizer.count"].item() == 1 + learned
    policy = fastrl.load_policy(tmp_path / "one")
    assert torch.equal(policy.obs_normalizer.mean, state["obs_normalizer.mean"])


def test_an_update_moves_the_statistics_by_a_fixed_pick_of_at_most_256_rows():
    from fastrl.models.normalizer import observed_rows

    rows = np.arange(1024)
    assert rows[observed_rows(1024)].tolist() == list(range(0, 1024, 4))
    assert rows[:40][observed_rows(40)].tolist() == list(range(40))
    assert len(rows[:257][observed_rows(257)]) == 129


def test_uint8_frames_are_scaled_and_standardised_in_one_pass():
    norm = ObsNormalizer((2, 3, 3))
    norm.observe(torch.rand(500, 2, 3, 3))
    frames = torch.randint(0, 256, (4, 2, 3, 3), dtype=torch.uint8)
    expected = ((frames.float() / 255 - norm.mean) / torch.sqrt(norm.var + norm.eps)).clamp(-5, 5)
    torch.testing.assert_close(norm(frames), expected)
