"""IMPALA's ``algo.normalize_returns``: PopArt (``fastrl.algos.popart``). V-trace runs in the returns' units, its
targets move the value statistics, the value head is rescaled so the model's values do not move with them, and
the loss measures the value error and the advantages in units of σ. With it IMPALA learns the time-limited bandit
(``tests.helpers.time_limited_bandit:bandit``, values near r / (1 − γ)), which it did not learn without."""

import numpy as np
import pytest
import torch

import fastrl
from fastrl.algos import popart
from fastrl.algos.impala import Impala, impala_loss
from fastrl.algos.update_rule import gradients_of
from fastrl.buffers.device_storage import Uploads
from fastrl.config import AlgoConfig, load_config
from fastrl.models.registry import build_model
from fastrl.runs.checkpoint import load_checkpoint

CPU = torch.device("cpu")
TIME_LIMITED = "env.id='tests.helpers.time_limited_bandit:bandit'"
QUIET = ["run.progress=false", "run.tensorboard=false", "run.target_return=inf"]


def _model(normalize_value: bool, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build_model("mlp", (4,), np.float32, 3, hidden=(16,), normalize_value=normalize_value)


def _storage(seed: int = 1, reward_scale: float = 30.0, envs: int = 3, steps: int = 6):
    """A batch of ``envs`` slots of ``steps`` steps: random rewards around ``reward_scale``, one truncation (it
    bootstraps from the final observation's value) and one termination."""
    rng = np.random.default_rng(seed)
    done = np.zeros((envs, steps), np.uint8)
    done[0, 2], done[1, 4] = 1, 2  # terminated, truncated (csrc_free_kernels.step_end)
    batch = {
        "obs": rng.standard_normal((envs, steps + 1, 4)).astype(np.float32),
        "action": rng.integers(0, 3, (envs, steps + 1)),
        "logp": np.full((envs, steps + 1), -1.0, np.float32),
        "reward": (reward_scale * (1 + rng.random((envs, steps + 1)))).astype(np.float32),
        "done": np.concatenate([done, np.zeros((envs, 1), np.uint8)], axis=1),
        "final_obs": rng.standard_normal((envs, steps + 1, 4)).astype(np.float32),
    }
    return Uploads(CPU).of(batch)


def _values(model, obs: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(obs)[1]


@pytest.mark.unit
def test_moving_the_statistics_preserves_every_value_the_model_returns():
    model = _model(True)
    statistics, head = popart.value_statistics(model), popart.value_head(model)
    obs = torch.randn(64, 4)
    for targets in (torch.randn(40) * 50 + 100, torch.randn(40) * 3 - 20, torch.full((40,), 7.0)):
        values = _values(model, obs)
        before = popart.snapshot(statistics)
        popart.observe_targets(statistics, targets)
        after = popart.snapshot(statistics)
        assert not torch.equal(before[0], after[0]) and not torch.equal(before[1], after[1])
        popart.preserve_outputs(head, before, after)
        torch.testing.assert_close(_values(model, obs), values, rtol=1e-5, atol=1e-4)


@pytest.mark.unit
def test_the_head_gradient_is_the_normalised_losss_at_the_rescaled_head():
    """The loss is differentiated before the rescale; with the head's gradients times σ'/σ it is the gradient of
    ((v − μ')/σ' − n'(x))² at the rescaled parameters (PopArt's step), the trunk's unchanged."""
    model, obs, targets = _model(True), torch.randn(32, 4), torch.randn(32) * 20 + 60
    statistics, head = popart.value_statistics(model), popart.value_head(model)
    before = popart.snapshot(statistics)
    values = model(obs)[1]  # the forward, at the statistics and head before the update (σ (w·h + b) + μ)
    std = popart.observe_targets(statistics, targets)
    after = popart.snapshot(statistics)
    model.zero_grad()
    (((targets - values) / std) ** 2).mean().backward()  # at the parameters before the rescale
    ours = popart.rescaled_gradients(model, [g.clone() for g in gradients_of(model)], head, before, after)
    popart.preserve_outputs(head, before, after)
    model.zero_grad()
    normalised = model.value_head(model.encode(obs)).squeeze(-1)  # n'(x): the head's own output, in units of σ'
    (((targets - after[0]) / after[1] - normalised) ** 2).mean().backward()
    for mine, paper in zip(ours, gradients_of(model), strict=True):
        torch.testing.assert_close(mine, paper, rtol=1e-4, atol=1e-6)


@pytest.mark.unit
def test_vtrace_runs_in_raw_units_and_identity_statistics_change_nothing():
    """With statistics at the identity the loss and its gradients are the plain loss's; with any others, and a head
    that returns the same values, the value error is the plain one over σ² and the policy term over σ: the targets
    are the same raw V-trace targets."""
    plain, normalised = _model(False), _model(True)
    normalised.load_state_dict(plain.state_dict(), strict=False)
    statistics = popart.value_statistics(normalised)
    statistics.eps = 0.0  # σ = 1 exactly
    storage, algo = _storage(), AlgoConfig(value_coef=0.5, entropy_coef=0.0)

    def terms(model):
        model.zero_grad()
        loss, stats = impala_loss(model, storage, algo, CPU)
        loss.backward()
        return stats, [g.clone() for g in gradients_of(model)]

    (base, grads), (same, same_grads) = terms(plain), terms(normalised)
    assert (same.policy_loss, same.value_loss) == (base.policy_loss, base.value_loss)
    for a, b in zip(grads, same_grads, strict=True):
        assert torch.equal(a, b)
    before = popart.snapshot(statistics)
    statistics.mean.fill_(40.0)
    statistics.var.fill_(25.0)  # σ = 5
    popart.preserve_outputs(popart.value_head(normalised), before, popart.snapshot(statistics))
    scaled, _ = terms(normalised)
    assert scaled.value_loss == pytest.approx(base.value_loss / 25, rel=1e-4)
    assert scaled.policy_loss == pytest.approx(base.policy_loss / 5, rel=1e-4)


@pytest.mark.unit
def test_an_update_moves_the_statistics_by_its_targets_and_keeps_the_values():
    model = _model(True)
    rule = Impala(model, AlgoConfig(), CPU, step=None, seed=0, lag=None)
    obs = torch.randn(16, 4)
    values = _values(model, obs)
    rule.warm_up(_storage())
    assert popart.value_statistics(model).count.item() == 1  # the warm-up learns nothing
    rule.learn(_storage(), 0)
    statistics = popart.value_statistics(model)
    assert statistics.count.item() == 1 + 3 * 6  # every row's V-trace target, once
    assert statistics.mean.item() > 10  # rewards of 30-60 a step
    torch.testing.assert_close(_values(model, obs), values, rtol=1e-5, atol=1e-4)
    assert rule.advance().grads is not None


@pytest.mark.unit
def test_impala_takes_normalize_returns_and_auto_turns_it_on_with_a_built_in_model():
    assert load_config(None, ["engine.mode='async'"]).algo.normalize_returns is True
    assert load_config(None, ["engine.mode='async'", "algo.normalize_returns=false"]).algo.normalize_returns is False
    custom = load_config(None, ["engine.mode='async'", "model.name='tests.helpers.faulty_models:hangs_in_learner'"])
    assert custom.algo.normalize_returns is False


@pytest.mark.engine
def test_the_statistics_are_checkpointed_and_a_resumed_run_goes_on_from_them(tmp_path):
    overrides = ["engine.serial=true", "engine.envs=4", "algo.batch_slots=2", "algo.normalize_returns=true", *QUIET]
    run_dir = tmp_path / "run"
    fastrl.train("configs/cartpole_impala.toml", [*overrides, "run.total_frames=400"], run_dir=run_dir)
    first = load_checkpoint(run_dir)["model"]
    assert first["value_normalizer.count"].item() > 1
    fastrl.train(resume=run_dir, overrides=["run.total_frames=800"])
    resumed = load_checkpoint(run_dir)["model"]
    assert resumed["value_normalizer.count"].item() > first["value_normalizer.count"].item()
    policy = fastrl.load_policy(run_dir)
    assert torch.equal(policy.value_normalizer.mean, resumed["value_normalizer.mean"])


@pytest.mark.engine
def test_serial_popart_runs_are_bit_identical_across_executor_layouts(tmp_path):
    """async is nondeterministic by timing, but its serial schedule is not: the statistics and the rescaled head
    move only in the learner, by the batches it learns from, so the layout changes nothing."""
    overrides = ["engine.serial=true", "engine.envs=4", "algo.batch_slots=2", "run.total_frames=1000", *QUIET]
    models = []
    for executors in (1, 2):
        run_dir = tmp_path / str(executors)
        fastrl.train("configs/cartpole_impala.toml", [*overrides, f"engine.executors={executors}"], run_dir=run_dir)
        models.append(load_checkpoint(run_dir)["model"])
    one, two = models
    assert one["value_normalizer.count"].item() == 1 + 1000  # every target learned from, once
    assert one.keys() == two.keys() and all(torch.equal(one[k], two[k]) for k in one)


def _score(tmp_path, config: str, seed: int, *extra: str) -> float:
    overrides = [TIME_LIMITED, "run.total_frames=100000", f"run.seed={seed}", *QUIET, *extra]
    summary = fastrl.train(f"configs/{config}.toml", overrides, run_dir=tmp_path / f"{config}-{seed}")
    assert summary["env_errors"] == 0  # a masked action raises in this env
    return summary["final_return_mean"]


# 20 steps an episode cut by a time limit: the best policy earns 20, a uniform one within the mask 10. Without
# PopArt IMPALA stayed near 11 at 100K frames (PPO, cartpole_ppo's settings: 18.8).
@pytest.mark.slow  # ~1 minute on 2 cores
@pytest.mark.engine
@pytest.mark.timeout(900)
def test_impala_learns_the_time_limited_bandit_with_popart(tmp_path):
    assert _score(tmp_path, "cartpole_impala", 0, "algo.normalize_returns=true") >= 15
