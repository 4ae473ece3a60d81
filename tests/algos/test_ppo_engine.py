"""PPO in the engine: which parameters the epochs start from, on which data, with which permutation.

``sync``: θ_{j+1} = epochs(θ_j, D(θ_j)). ``hts``: θ_1 = θ_0 and θ_{j+2} = epochs(θ_{j+1}, D(θ_j)):
the epochs on D(θ_j) start from the parameters the envs were released with at barrier j and
their result is published at barrier j+1 (lag exactly 1). Recomputed here from the recorded
rollouts with plain SGD, the numpy GAE reference (on the values the actors wrote, bootstrapped by
the epochs' start parameters) and the permutation seeded by (seed, rollout).
"""
import json

import numpy as np
import pytest
import torch

import fastrl
import fastrl.learning.learner
from csrc_free_kernels.gae import gae_reference
from fastrl.algos.ppo import PPO_STREAM, PPOBatch, minibatch_indices, ppo_loss
from fastrl.runs.checkpoint import load_checkpoint
from tests.helpers.recording import LinearPolicy, RecordingLearner

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

LR, GAMMA, LAM, VALUE_COEF, ENTROPY_COEF = 0.05, 0.9, 0.8, 0.5, 0.01
ENVS, STEPS, ROLLOUTS, EPOCHS, MINIBATCHES, SEED = 4, 3, 5, 2, 3, 7
CLIP, CLIP_FINAL = 0.3, 0.02  # algo.clip_schedule = 'linear' over the run: the epochs on rollout j clip at clip_at(j)


def clip_at(counted: int) -> float:
    """The clip range of epochs that run when the learner's frame counter has ``counted`` rollouts: sync's epochs
    on D(θ_j) count j, hts's count j + 1 (the counters move with θ_{j+1}, published before them)."""
    return CLIP + (CLIP_FINAL - CLIP) * counted / ROLLOUTS


def ppo_epochs(theta: dict, data: dict, rollout: int, lag: int = 0, target_kl: float = 0.0, taken=None) -> dict:
    """The epochs from θ on D; with ``target_kl``, stopped before the first minibatch whose KL from the acting
    policy is past 1.5 x it (the number of steps taken appended to ``taken``)."""
    net = LinearPolicy((4,), 2)
    net.load_state_dict({k: torch.tensor(v, dtype=torch.float32) for k, v in theta.items()})
    obs = torch.from_numpy(data["obs"]).float()
    with torch.no_grad():  # the actors' values of the rollout, the epochs' start θ's of the row it ends on
        bootstrap = net(obs[:, STEPS])[1]
    values = torch.cat([torch.from_numpy(data["value"][:, :STEPS]), bootstrap[:, None]], dim=1)
    adv = torch.from_numpy(gae_reference(data["reward"][:, :STEPS], data["done"][:, :STEPS], values.numpy(),
                                         GAMMA, LAM))
    flat = PPOBatch(
        obs=obs[:, :STEPS].reshape(-1, 4), actions=torch.from_numpy(data["action"][:, :STEPS]).reshape(-1),
        old_logp=torch.from_numpy(data["logp"][:, :STEPS]).reshape(-1), old_values=values[:, :STEPS].reshape(-1),
        advantages=adv.reshape(-1), returns=(adv + values[:, :STEPS]).reshape(-1),
    )
    rng = np.random.default_rng([SEED, PPO_STREAM, rollout])
    plan = [index for _ in range(EPOCHS) for index in minibatch_indices(ENVS * STEPS, MINIBATCHES, rng)]
    steps = 0
    for index in plan:
        fields = (getattr(flat, f) for f in PPOBatch.__dataclass_fields__)
        batch = PPOBatch(*(None if field is None else field[torch.from_numpy(index)] for field in fields))
        loss, stats = ppo_loss(net, batch, clip_at(rollout + lag), 0.0, VALUE_COEF, ENTROPY_COEF, True)
        if target_kl and float(stats.approx_kl) > 1.5 * target_kl:
            break
        steps += 1
        grads = torch.autograd.grad(loss, list(net.parameters()))
        with torch.no_grad():
            for p, g in zip(net.parameters(), grads):
                p -= LR * g
    if taken is not None:
        taken.append(steps)
    return {k: v.detach().double().numpy() for k, v in net.state_dict().items()}


def _close(a: dict, b: dict, what: str) -> None:
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-4, atol=1e-5, err_msg=f"{what} {k}")


def _recorded_run(tmp_path, monkeypatch, mode: str, *extra: str) -> None:
    monkeypatch.setattr(fastrl.learning.learner, "Learner", RecordingLearner)
    RecordingLearner.records = []
    overrides = [
        "env.id='CartPole-v1'", f"engine.mode='{mode}'", "engine.serial=true", f"engine.envs={ENVS}",
        f"engine.rollout={STEPS}", f"run.total_frames={ENVS * STEPS * ROLLOUTS}", "run.progress=false",
        "run.target_return=inf",
        f"run.seed={SEED}", f"run.dir='{tmp_path}'", "model.name='tests.helpers.recording:linear_policy'",
        "algo.name='ppo'", "algo.optimizer='sgd'", f"algo.lr={LR}", "algo.max_grad_norm=0", f"algo.gamma={GAMMA}",
        f"algo.options.gae_lambda={LAM}", f"algo.options.clip={CLIP}", "algo.options.clip_schedule='linear'",
        f"algo.options.clip_final={CLIP_FINAL}", f"algo.value_coef={VALUE_COEF}",
        f"algo.entropy_coef={ENTROPY_COEF}", f"algo.epochs={EPOCHS}", f"algo.minibatches={MINIBATCHES}",
        "algo.lr_schedule='constant'", "algo.options.value_clip=0.0", *extra,
    ]
    fastrl.train({}, overrides, run_dir=tmp_path / "run")


@pytest.mark.parametrize("mode", ["sync", "hts"])
def test_ppo_epochs_start_from_the_right_parameters_on_the_right_data(tmp_path, monkeypatch, mode):
    _recorded_run(tmp_path, monkeypatch, mode)
    data = [d for d, _ in RecordingLearner.records]
    theta = [p for _, p in RecordingLearner.records]  # θ_j: at barrier j, the parameters that acted in rollout j
    assert len(data) == ROLLOUTS
    saved = {k: v.double().numpy() for k, v in load_checkpoint(tmp_path / "run")["model"].items()}
    if mode == "sync":
        for j in range(ROLLOUTS - 1):
            _close(theta[j + 1], ppo_epochs(theta[j], data[j], j), f"θ_{j + 1}")
        _close(saved, ppo_epochs(theta[-1], data[-1], ROLLOUTS - 1), "final")
    else:
        _close(theta[1], theta[0], "θ_1")
        for j in range(ROLLOUTS - 2):
            _close(theta[j + 2], ppo_epochs(theta[j + 1], data[j], j, lag=1), f"θ_{j + 2}")
        last_published = ppo_epochs(theta[-1], data[-2], ROLLOUTS - 2, lag=1)  # θ_R, released at the last barrier
        # the last rollout is used too
        _close(saved, ppo_epochs(last_published, data[-1], ROLLOUTS - 1, lag=1), "final")
        # the check tells the rules apart: epochs from θ_j instead of θ_{j+1} land elsewhere
        wrong = ppo_epochs(theta[1], data[1], 1, lag=1)
        assert max(np.abs(wrong[k] - theta[3][k]).max() for k in wrong) > 1e-4


def test_target_kl_stops_the_epochs_before_the_first_minibatch_past_it(tmp_path, monkeypatch):
    target = 0.0003  # stops some updates part-way and lets others run every epoch (asserted)
    _recorded_run(tmp_path, monkeypatch, "sync", f"algo.options.target_kl={target}")
    data = [d for d, _ in RecordingLearner.records]
    theta = [p for _, p in RecordingLearner.records]
    taken: list[int] = []
    for j in range(ROLLOUTS - 1):
        _close(theta[j + 1], ppo_epochs(theta[j], data[j], j, target_kl=target, taken=taken), f"θ_{j + 1}")
    saved = {k: v.double().numpy() for k, v in load_checkpoint(tmp_path / "run")["model"].items()}
    _close(saved, ppo_epochs(theta[-1], data[-1], ROLLOUTS - 1, target_kl=target, taken=taken), "final")
    assert min(taken) < EPOCHS * MINIBATCHES and max(taken) > 0, taken
    # the un-stopped rule lands elsewhere: the stop is what the engine did
    full = ppo_epochs(theta[0], data[0], 0) if taken[0] < EPOCHS * MINIBATCHES else None
    if full is not None:
        assert max(np.abs(full[k] - theta[1][k]).max() for k in full) > 1e-4
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert {line["epochs_done"] for line in lines if "epochs_done" in line} <= {
        steps / MINIBATCHES for steps in taken
    }
