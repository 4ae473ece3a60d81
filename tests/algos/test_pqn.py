"""PQN, added through the plug-in point alone: its ε-greedy kernel against a reference, its ε schedule, its Q(λ)
targets against the recursion of the paper, and what it inherits from the engine (bit-identical runs across
layouts, exact resume, its metrics); CartPole to 475 is tests/algos/test_learning.py's, in the slow tier."""

import json
import math

import numpy as np
import pytest
import torch

import fastrl
from csrc_free_kernels.epsilon_greedy import epsilon_greedy, epsilon_greedy_reference, epsilon_greedy_rows_kernel
from csrc_free_kernels.step_end import CONTINUES, TERMINATED, TRUNCATED
from fastrl.algos.pqn import PQN, EpsilonGreedy, PQNOptions, epsilon_at, q_network
from fastrl.algos.schedules import FrameClock
from fastrl.buffers.device_storage import Uploads
from fastrl.config import load_config
from fastrl.envs.actions import ActionSpec
from fastrl.runs.checkpoint import load_checkpoint
from tests.helpers.runs import model_digest

QUICK = ["run.progress=false", "run.tensorboard=false", "run.target_return=inf"]


# ---------------------------------------------------------------- acting


@pytest.mark.unit
@pytest.mark.parametrize("epsilon", [0.0, 0.05, 0.5, 1.0])
def test_the_kernel_is_the_reference(epsilon):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((257, 6)).astype(np.float32)
    q[:10, 3] = q[:10, 1] = 9.0  # ties: the first of the largest
    u = rng.random(257)
    actions, logp = epsilon_greedy(q, u, epsilon)
    want_actions, want_logp = epsilon_greedy_reference(q, u, epsilon)
    np.testing.assert_array_equal(actions, want_actions)
    np.testing.assert_allclose(logp, want_logp, rtol=1e-6)
    assert (actions[:10][u[:10] >= epsilon] == 1).all()


@pytest.mark.unit
def test_exploring_rows_spread_over_every_action_and_rows_do_not_see_each_other():
    q = np.zeros((4000, 4), np.float32)
    u = np.random.default_rng(1).random(4000)
    actions, _ = epsilon_greedy(q, u, 1.0)
    counts = np.bincount(actions, minlength=4)
    assert counts.min() > 900  # u / ε spread evenly over the actions
    rows, action, logp, value, stamp = (
        np.arange(4000)[::-1].copy(),
        *(np.zeros(4000, t) for t in (np.int64, np.float32, np.float32, np.int64)),
    )
    epsilon_greedy_rows_kernel(q, 1.0, 7, rows, u[::-1].copy(), action, logp, value, stamp)
    np.testing.assert_array_equal(action[::-1], actions)  # the same u, any order: the same action
    assert (stamp == 7).all() and (value == 0.0).all()


@pytest.mark.unit
@pytest.mark.parametrize("epsilon", [0.05, 1.0])
def test_exploring_rows_pick_only_allowed_actions_under_an_action_mask(epsilon):
    from fastrl.models.action_mask import MASKED_LOGIT

    rng = np.random.default_rng(2)
    q = rng.standard_normal((3000, 5)).astype(np.float32)
    q[:, [0, 2]] = MASKED_LOGIT  # allowed: 1, 3, 4
    q[:7] = MASKED_LOGIT  # rows whose mask allows nothing: every action, as the categorical sampler
    u = rng.random(3000)
    actions, logp = epsilon_greedy(q, u, epsilon)
    want_actions, want_logp = epsilon_greedy_reference(q, u, epsilon)
    np.testing.assert_array_equal(actions, want_actions)
    np.testing.assert_allclose(logp, want_logp, rtol=1e-6)
    assert set(actions[7:].tolist()) <= {1, 3, 4}
    if epsilon == 1.0:  # ε spread evenly over the 3 allowed, and over all 5 where none is
        assert np.bincount(actions[7:], minlength=5)[[1, 3, 4]].min() > 900
        np.testing.assert_allclose(np.exp(logp[7:]), 1 / 3, rtol=1e-6)
        np.testing.assert_allclose(np.exp(logp[:7]), 1 / 5, rtol=1e-6)
    unmasked = rng.standard_normal((500, 5)).astype(np.float32)  # no mask: action ⌊u/ε·A⌋ as before
    explored = u[:500] < epsilon
    assert (
        epsilon_greedy(unmasked, u[:500], epsilon)[0][explored]
        == np.minimum((u[:500] / epsilon * 5).astype(int), 4)[explored]
    ).all()


@pytest.mark.unit
def test_the_evaluation_policy_gives_a_masked_action_probability_zero():
    from fastrl.models.action_mask import MASKED_LOGIT

    sampler = EpsilonGreedy(ActionSpec.discrete(4), PQNOptions(epsilon_final=0.2), clock=None)
    head = torch.tensor([[0.5, MASKED_LOGIT, 2.0, MASKED_LOGIT], [0.1, 0.2, 0.3, 0.4]])
    logp, entropy = sampler.log_prob_entropy(head, torch.tensor([0, 3]))
    assert logp[0].exp().item() == pytest.approx(0.1) and logp[1].exp().item() == pytest.approx(0.85)
    masked_probs = torch.tensor([0.1, 0.0, 0.9, 0.0])
    want = -(masked_probs[[0, 2]] * masked_probs[[0, 2]].log()).sum()
    assert entropy[0].item() == pytest.approx(want.item()) and torch.isfinite(entropy).all()


@pytest.mark.unit
def test_epsilon_moves_with_the_acting_weights_version_as_the_learners_schedules_do():
    options = PQNOptions(epsilon_start=1.0, epsilon_final=0.1, epsilon_anneal_frames=1000)
    clock = FrameClock(frames_per_update=100, total_frames=10_000)
    assert [epsilon_at(options, clock, v) for v in (0, 5, 10, 50)] == pytest.approx([1.0, 0.55, 0.1, 0.1])
    default = PQNOptions(epsilon_final=0.0)  # anneal over a tenth of the run
    assert epsilon_at(default, clock, 5) == pytest.approx(0.5)
    shared = FrameClock(frames_per_update=100, total_frames=10_000, share=2)  # half the frames: half the anneal
    assert epsilon_at(options, shared, 5) == pytest.approx(0.1)


# ---------------------------------------------------------------- targets


def _rule(q_lambda: float, gamma: float = 0.9) -> PQN:
    config = load_config(None, ["algo.name='pqn'", f"algo.gamma={gamma}", "algo.epochs=1", "algo.minibatches=1"])
    torch.manual_seed(0)
    model = q_network((3,), 2, hidden=(8,))
    return PQN(model, config.algo, torch.device("cpu"), lambda *a: 0.0, 0, lag=0, options=PQNOptions(q_lambda=q_lambda))


@pytest.mark.unit
@pytest.mark.parametrize("q_lambda", [0.0, 0.65, 1.0])
def test_q_lambda_targets_are_the_recursion_stopped_at_episode_ends(q_lambda):
    """G_t = r_t + γ(1 - d_t)[λ G_{t+1} + (1 - λ) V_{t+1}], V = max Q of the acting weights, G_T's bootstrap
    the learner's max Q of row T; at a truncation r_t + γ V(final observation)."""
    rule, gamma, steps = _rule(q_lambda), 0.9, 6
    rng = np.random.default_rng(q_lambda.hex().__hash__() % 1000)
    storage = {
        "obs": rng.standard_normal((2, steps + 1, 3)).astype(np.float32),
        "final_obs": rng.standard_normal((2, steps + 1, 3)).astype(np.float32),
        "action": rng.integers(0, 2, (2, steps + 1)),
        "reward": rng.standard_normal((2, steps + 1)).astype(np.float32),
        "value": rng.standard_normal((2, steps + 1)).astype(np.float32),
        "done": np.zeros((2, steps + 1), np.uint8),
    }
    storage["done"][0, 2], storage["done"][1, 4] = TERMINATED, TRUNCATED
    _, _, targets = rule._targets(Uploads(torch.device("cpu")).of(storage))
    with torch.no_grad():
        bootstrap = rule.model(torch.from_numpy(storage["obs"][:, steps]))[1].numpy()
        final = rule.model(torch.from_numpy(storage["final_obs"][1, 4][None]))[1].item()
    want = np.zeros((2, steps))
    for env in range(2):
        g = float(bootstrap[env])
        for t in reversed(range(steps)):
            done, r = storage["done"][env, t], float(storage["reward"][env, t])
            nxt = float(storage["value"][env, t + 1]) if t + 1 < steps else float(bootstrap[env])
            if done == TERMINATED:
                g = r
            elif done == TRUNCATED:
                g = r + gamma * final
            else:
                assert done == CONTINUES
                g = r + gamma * (q_lambda * g + (1 - q_lambda) * nxt) if t + 1 < steps else r + gamma * nxt
            want[env, t] = g
    np.testing.assert_allclose(targets.numpy().reshape(2, steps), want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- what it inherits




@pytest.mark.engine
def test_pqn_is_bit_identical_across_layouts_and_reports_its_metrics(tmp_path):
    digests = []
    for executors, actors, inline in ((1, 1, "false"), (2, 2, "true")):  # the queues; inline pairs (test_engine: both)
        run_dir = tmp_path / f"{executors}x{actors}{inline}"
        layout = [f"engine.executors={executors}", f"engine.actors={actors}", f"engine.inline_actors={inline}"]
        summary = fastrl.train(
            "configs/cartpole_pqn.toml",
            [*QUICK, "run.total_frames=2048", *layout, "engine.step_delay_s=0.001"],
            run_dir=run_dir,
        )
        assert summary["status"] == "complete"
        digests.append(model_digest(run_dir))
    assert len(set(digests)) == 1
    line = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    assert 0.05 < line["epsilon"] < 1.0 and math.isfinite(line["q_mean"])
    assert line["policy_loss"] == 0.0 and line["value_loss"] > 0  # its TD loss is its value loss


@pytest.mark.engine
def test_pqn_stopped_at_a_checkpoint_resumes_exactly(tmp_path):
    fixed = [*QUICK, "algo.lr_anneal_frames=500_000"]  # the lr's horizon apart from run.total_frames, on both sides
    whole = tmp_path / "whole"
    fastrl.train("configs/cartpole_pqn.toml", [*fixed, "run.total_frames=4096", "engine.serial=true"], run_dir=whole)
    half = tmp_path / "half"
    fastrl.train("configs/cartpole_pqn.toml", [*fixed, "run.total_frames=2048"], run_dir=half)
    assert load_checkpoint(half)["exact"]
    summary = fastrl.train(resume=half, overrides=["run.total_frames=4096", "engine.executors=1"])
    assert summary["frames"] == 4096
    assert model_digest(half) == model_digest(whole)
