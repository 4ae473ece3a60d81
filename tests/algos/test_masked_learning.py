"""Every algorithm that accepts action masks learns a masked env as its unmasked twin does
(``tests.helpers.masked_env:bandit``: the obs names the rewarded action, the mask allows it and one other, a
masked action raises; ``masked=false`` is the twin with every action allowed), and the behaviour log-probs the
actors store are the learner's at the same parameters, masks included."""

import pytest
import torch

import fastrl
import fastrl.algos.a2c as a2c
from fastrl.algos.update_rule import forward_storage

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

BANDIT = "env.id='tests.helpers.masked_env:bandit'"
QUIET = ["run.progress=false", "run.tensorboard=false", "run.target_return=inf"]

# each algorithm in each mode it takes, by the shipped CartPole config that runs it
SHIPPED = {
    ("a2c", "sync"): "cartpole_sync",
    ("a2c", "hts"): "cartpole_hts",
    ("a2c", "gala"): "cartpole_gala",
    ("ppo", "sync"): "cartpole_ppo",
    ("ppo", "hts"): "cartpole_hts_ppo",
    ("impala", "async"): "cartpole_impala",
    ("pqn", "sync"): "cartpole_pqn",
}


def test_every_learning_algorithm_and_mode_has_a_config_here():
    from fastrl.algos.registry import BUILT_IN, load_algorithm

    wanted = set()
    for algorithm in map(load_algorithm, BUILT_IN):
        if algorithm.learns:
            wanted |= {(algorithm.name, mode) for mode in _modes(algorithm)}
    assert wanted == set(SHIPPED)


def _modes(algorithm) -> set[str]:
    lags = {0: "sync", 1: "hts", None: "async"}
    modes = {lags[lag] for lag in algorithm.lags}
    return modes | ({"gala"} if algorithm.gala else set())


def _score(tmp_path, config: str, masked: bool, frames: int, *extra: str) -> float:
    overrides = [BANDIT, f"env.kwargs={{masked={str(masked).lower()}}}", f"run.total_frames={frames}", *QUIET, *extra]
    if config == "cartpole_pqn":  # ε anneals over 250K frames for CartPole: over the bandit's first 30K here
        overrides.append("algo.options.epsilon_anneal_frames=30000")
    summary = fastrl.train(f"configs/{config}.toml", overrides, run_dir=tmp_path / f"{config}-{masked}")
    assert summary["env_errors"] == 0  # a masked action raises in this env
    learners = summary.get("learners")
    return min(entry["return_mean"] for entry in learners) if learners else summary["final_return_mean"]


# 20 steps an episode: the best policy earns 20; a uniform one 10 within the mask, 4 without
@pytest.mark.slow  # ~6 minutes on 2 cores: fourteen runs of 100K frames
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("algorithm, mode", list(SHIPPED))
def test_each_algorithm_in_each_mode_learns_the_masked_bandit_as_its_unmasked_twin(tmp_path, algorithm, mode):
    masked = _score(tmp_path, SHIPPED[algorithm, mode], True, 100_000)
    unmasked = _score(tmp_path, SHIPPED[algorithm, mode], False, 100_000)
    assert masked >= 15 and unmasked >= 15, (masked, unmasked)


def test_impala_learns_the_masked_bandit(tmp_path):
    """The async default tier's case: a global gradient clip of 0.5 kept IMPALA at a uniform choice (~10)."""
    assert _score(tmp_path, "cartpole_impala", True, 50_000) >= 15


@pytest.mark.parametrize("env", ["bandit", pytest.param("masked", marks=pytest.mark.slow)])
def test_the_stored_behaviour_log_probs_are_the_learners_with_masks(tmp_path, monkeypatch, env):
    """sync: the learner's first forward of a rollout runs at the parameters the actors sampled it with, so the
    log-probs it computes for the stored actions are the stored ones, masked; unmasked they would differ."""
    gaps, unmasked_gaps = [], []
    original = a2c.a2c_loss

    def compared(model, storage, algo, device, distribution=a2c.CATEGORICAL, entropy_coef=None):
        if storage["obs"].any():  # not the warm-up's zero storage
            steps = storage["action"].shape[1] - 1
            stored = torch.from_numpy(storage["logp"][:, :steps])
            with torch.no_grad():
                gaps.append(_gap(model, storage, distribution, steps, stored))
                mask, model.action_mask = model.action_mask, _NoMask()
                unmasked_gaps.append(_gap(model, storage, distribution, steps, stored))
                model.action_mask = mask
        return original(model, storage, algo, device, distribution, entropy_coef)

    monkeypatch.setattr(a2c, "a2c_loss", compared)
    env_id = "tests.helpers.masked_env:bandit" if env == "bandit" else "tests.helpers.masked_env:masked"
    fastrl.train(
        "configs/cartpole_sync.toml",
        [f"env.id='{env_id}'", "engine.serial=true", "run.total_frames=2000", *QUIET],
        run_dir=tmp_path / "run",
    )
    assert len(gaps) >= 10
    assert max(gaps) < 1e-5, gaps
    assert min(unmasked_gaps) > 0.1  # the masks mattered: without them the log-probs are another policy's


def _gap(model, storage, distribution, steps: int, stored: torch.Tensor) -> float:
    logits, _, _ = forward_storage(model, storage.tensor("obs"), storage)
    actions = storage.tensor("action")[:, :steps]
    logp, _ = distribution.log_prob_entropy(logits[:, :steps], actions)
    return float((logp - stored).abs().max())


class _NoMask:
    def apply(self, head, obs):
        return head
