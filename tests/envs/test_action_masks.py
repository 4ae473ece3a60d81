"""Action masks (a Dict observation's ``action_mask`` part): a masked action is never sampled, in any mode or
layout, its logit gets no gradient and no NaN, eval and load_policy mask too, and a mask that fits no
action is named (envs: tests/helpers/masked_env.py, which raises on a masked action)."""
import numpy as np
import pytest
import torch

import fastrl
from csrc_free_kernels.action_sampling import sample_from_u, sample_from_u_reference
from fastrl.config import ConfigError
from fastrl.envs.actions import ActionSpec
from fastrl.envs.gym import GymEnv
from fastrl.models.action_mask import MASKED_LOGIT
from fastrl.models.distributions import distribution_for
from fastrl.process.faults import RunFailed
from fastrl.runs.checkpoint import load_checkpoint
from tests.helpers import masked_env
from tests.helpers.runs import cartpole

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

MASKED = "tests.helpers.masked_env:masked"


def _train(tmp_path, name, *overrides, env=MASKED, mode="sync"):
    config, base = cartpole(tmp_path, f"env.id='{env}'", *overrides, mode=mode)
    return fastrl.train(config, base, run_dir=tmp_path / name), tmp_path / name


def test_the_kernel_never_picks_a_masked_action_even_when_rounding_leaves_u_above_the_total():
    logits = np.array([[0.0, 0.3, MASKED_LOGIT, 0.1, MASKED_LOGIT]] * 6, np.float32)
    u = np.array([0.0, 0.3, 0.5, 0.7, 0.999999, np.nextafter(1.0, 0.0)])
    actions, logp = sample_from_u(logits, u, np.empty(6, np.int64), np.empty(6, np.float32))
    assert set(actions.tolist()) <= {0, 1, 3} and actions[-1] == 3 and np.isfinite(logp).all()
    reference, _ = sample_from_u_reference(logits, u)
    assert np.array_equal(actions, reference)
    unmasked = np.zeros((1, 3), np.float32)  # no mask: rounding still falls to the last action
    assert sample_from_u(unmasked, np.array([np.nextafter(1.0, 0.0)]), np.empty(1, np.int64),
                         np.empty(1, np.float32))[0][0] == 2


@pytest.mark.parametrize("spec", [ActionSpec.discrete(4), ActionSpec("multi_discrete", nvec=(3, 2))])
def test_masked_logits_have_finite_entropy_and_no_gradient(spec):
    head = torch.randn(5, spec.head_size)
    mask = torch.ones(5, spec.head_size, dtype=torch.bool)
    mask[:, 1] = False
    masked = head.requires_grad_(True).masked_fill(~mask, MASKED_LOGIT)
    actions = torch.zeros(5, dtype=torch.int64) if spec.kind == "discrete" else torch.zeros(5, 2, dtype=torch.int64)
    logp, entropy = distribution_for(spec).log_prob_entropy(masked, actions)
    (logp.sum() + entropy.sum()).backward()
    assert torch.isfinite(entropy).all() and torch.isfinite(logp).all()
    assert (head.grad[:, 1] == 0).all() and (head.grad[:, 0] != 0).all()
    # the entropy of the distribution over the allowed actions alone
    allowed = torch.cat([head.detach()[:, :1], head.detach()[:, 2:]], dim=1)
    spec_without = ActionSpec.discrete(3) if spec.kind == "discrete" else ActionSpec("multi_discrete", nvec=(2, 2))
    want = distribution_for(spec_without).log_prob_entropy(allowed, actions)[1]
    assert torch.allclose(entropy, want, atol=1e-6)


@pytest.mark.parametrize("mode, overrides", [
    ("sync", ["algo.name='a2c'"]),
    ("sync", ["algo.name='ppo'", "algo.minibatches=2"]),
    ("hts", ["algo.name='ppo'", "algo.minibatches=2"]),
    ("async", ["algo.name='impala'", "algo.batch_slots=4"]),
    ("sync", ["algo.name='ppo'", "algo.minibatches=2", "env.kwargs={multi=true}"]),
    ("sync", ["algo.name='ppo'", "algo.minibatches=2", "model.lstm=8", "env.kwargs={box_mask=true}"]),
])
def test_every_mode_trains_on_a_masked_env_that_raises_on_a_masked_action(tmp_path, mode, overrides):
    summary, run_dir = _train(tmp_path, "run", "engine.serial=true", "run.total_frames=1000", *overrides, mode=mode)
    assert summary["status"] == "complete" and summary["env_errors"] == 0


@pytest.mark.slow
def test_masked_learning_finds_the_allowed_target(tmp_path):
    summary, _ = _train(tmp_path, "run", "engine.serial=true", "algo.name='ppo'", "algo.minibatches=2",
                        "algo.lr=0.003", "run.total_frames=30000")
    # the first allowed action earns 1 a step (10 an episode); a uniform choice among the allowed ~5
    assert summary["final_return_mean"] > 8.0, summary


@pytest.mark.parametrize("mode", [pytest.param("sync", marks=pytest.mark.slow), "hts"])  # hts: where timing could leak
def test_masked_runs_do_not_depend_on_the_process_layout(tmp_path, mode):
    params = []
    for name, layout in (("one", ["engine.executors=1", "engine.actors=1"]),
                         ("two", ["engine.executors=2", "engine.actors=2", "engine.step_delay_s=0.0005"])):
        _train(tmp_path, name, "algo.name='ppo'", "algo.minibatches=2", "run.total_frames=1200", *layout, mode=mode)
        params.append(load_checkpoint(tmp_path / name)["model"])
    for key in params[0]:
        assert torch.equal(params[0][key], params[1][key]), key


def test_eval_and_load_policy_mask_too(tmp_path):
    _, run_dir = _train(tmp_path, "run", "engine.serial=true", "algo.name='ppo'", "algo.minibatches=2")
    policy = fastrl.load_policy(run_dir, trust_code=True)  # its env is a module:factory
    env = GymEnv("m", masked_env.masked())
    rows = np.zeros((8, *env.obs_shape), np.float32)
    for i in range(8):
        env.reset(i, rows[i])
    with torch.no_grad():
        logits, _ = policy(torch.from_numpy(rows))
    part = next(p for p in env.obs_layout.parts if p.name == "action_mask")
    mask = rows[:, part.offset // 4: part.offset // 4 + 4]
    assert ((logits == MASKED_LOGIT) == (mask == 0)).all() and (mask == 0).any()
    result = fastrl.evaluate(run_dir, episodes=3, greedy=False, trust_code=True)  # the env raises on a masked action
    assert result["episodes"] == 3


def test_an_all_zero_mask_ends_the_run_naming_the_env_and_step(tmp_path):
    with pytest.raises(RunFailed, match=r"tests.helpers.masked_env:masked' #\d+ .*all-zero 'action_mask': no action is "
                                        r"allowed, in step\(action=\d\) at step 2 of its episode"):
        _train(tmp_path, "run", "env.kwargs={zero_at=3}", "run.total_frames=800")


def test_masks_that_fit_no_action_space_are_refused_before_the_run(tmp_path):
    with pytest.raises(ConfigError, match="Box \\(continuous\\) actions cannot be masked"):
        _train(tmp_path, "box", env="tests.helpers.masked_env:masked_box")
    with pytest.raises(ConfigError, match="'action_mask' has 5 columns; the action space has 4 actions"):
        _train(tmp_path, "size", "env.kwargs={extra_columns=1}")
    assert not (tmp_path / "box").exists() and not (tmp_path / "size").exists()


@pytest.mark.parametrize("multi", [False, True])
def test_an_env_that_raises_on_an_illegal_first_move_starts(tmp_path, multi):
    """The start-up probe steps each env once before any actor acts: with an allowed action (action 0 is
    masked at every step here, and the env raises on a masked action)."""
    config, base = cartpole(tmp_path, f"env.id='{MASKED.replace(':masked', ':first_masked')}'",
                            f"env.kwargs={{multi={str(multi).lower()}}}", "engine.serial=true", "run.total_frames=80")
    assert fastrl.train(config, base, run_dir=tmp_path / "run")["status"] == "complete"
