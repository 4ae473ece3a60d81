"""hts applies the gradient taken at θ_{j-1} on D(θ_{j-1}) to θ_j (HTS-RL eq. 6), checked by hand.

A linear softmax policy on CartPole, plain SGD and no clipping, so each update is
θ ← θ - lr * g with g the A2C gradient, which we compute here analytically in numpy.
"""

import numpy as np
import pytest

import fastrl
import fastrl.learning.learner
from fastrl.runs.checkpoint import load_checkpoint
from tests.helpers.recording import RecordingLearner

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

LR, GAMMA, VALUE_COEF, ENTROPY_COEF = 0.05, 0.9, 0.5, 0.1
ENVS, STEPS, ROLLOUTS = 4, 3, 4


def a2c_gradient(theta: dict, data: dict) -> dict:
    """The A2C loss gradient for the linear policy, derived by hand."""
    W, b, v, c = theta["pi.weight"], theta["pi.bias"], theta["v.weight"][0], theta["v.bias"][0]
    x = data["obs"].astype(np.float64)  # [N, T+1, 4]
    z = x @ W.T + b
    values = x @ v + c
    z = z[:, :STEPS]
    pi = np.exp(z - z.max(-1, keepdims=True))
    pi /= pi.sum(-1, keepdims=True)
    log_pi = np.log(pi)
    entropy = -(pi * log_pi).sum(-1, keepdims=True)
    returns = np.zeros((ENVS, STEPS))
    ret = values[:, STEPS]
    for t in reversed(range(STEPS)):
        ret = data["reward"][:, t] + GAMMA * (1 - data["done"][:, t]) * ret
        returns[:, t] = ret
    adv = returns - values[:, :STEPS]
    onehot = np.eye(W.shape[0])[data["action"][:, :STEPS]]
    count = ENVS * STEPS
    dz = (-adv[..., None] * (onehot - pi) + ENTROPY_COEF * pi * (log_pi + entropy)) / count
    dvalue = -2 * VALUE_COEF * adv / count
    xs = x[:, :STEPS]
    return {
        "pi.weight": np.einsum("nta,ntd->ad", dz, xs),
        "pi.bias": dz.sum((0, 1)),
        "v.weight": np.einsum("nt,ntd->d", dvalue, xs)[None],
        "v.bias": np.array([dvalue.sum()]),
    }


def sgd(theta, grad):
    return {k: theta[k] - LR * grad[k] for k in theta}


def test_hts_learns_with_the_gradient_of_the_behaviour_parameters(tmp_path, monkeypatch):
    monkeypatch.setattr(fastrl.learning.learner, "Learner", RecordingLearner)
    RecordingLearner.records = []
    overrides = [
        "env.id='CartPole-v1'", "engine.mode='hts'", "engine.serial=true", f"engine.envs={ENVS}",
        f"engine.rollout={STEPS}", f"run.total_frames={ENVS * STEPS * ROLLOUTS}", "run.progress=false",
        f"run.dir='{tmp_path}'", "model.name='tests.helpers.recording:linear_policy'", "algo.optimizer='sgd'",
        f"algo.lr={LR}", "algo.max_grad_norm=0", f"algo.gamma={GAMMA}", f"algo.value_coef={VALUE_COEF}",
        f"algo.entropy_coef={ENTROPY_COEF}", "algo.name='a2c'", "algo.lr_schedule='constant'",
    ]
    fastrl.train({}, overrides, run_dir=tmp_path / "run")
    records = RecordingLearner.records
    assert len(records) == ROLLOUTS
    data = [d for d, _ in records]
    theta = [p for _, p in records]  # θ_j: the parameters at barrier j, which acted in rollout j

    for j, d in enumerate(data):
        assert (d["version"][:, :STEPS] == j).all()
    expected = [theta[0], theta[0]]  # θ_1 = θ_0: no D(θ_{-1})
    for j in range(1, ROLLOUTS):
        expected.append(sgd(expected[j], a2c_gradient(expected[j - 1], data[j - 1])))
    final = sgd(expected[ROLLOUTS], a2c_gradient(expected[ROLLOUTS - 1], data[ROLLOUTS - 1]))

    for j in range(ROLLOUTS):
        for k in theta[j]:
            np.testing.assert_allclose(theta[j][k], expected[j][k], rtol=1e-5, atol=1e-6, err_msg=f"θ_{j} {k}")
    saved = {k: v.double().numpy() for k, v in load_checkpoint(tmp_path / "run")["model"].items()}
    for k in saved:
        np.testing.assert_allclose(saved[k], final[k], rtol=1e-5, atol=1e-6)

    # The check can tell the two rules apart: the gradient at θ_j instead of θ_{j-1} is far off.
    wrong = sgd(expected[2], a2c_gradient(expected[2], data[1]))
    assert max(np.abs(wrong[k] - expected[3][k]).max() for k in wrong) > 1e-4
