"""``algo.optimizer = "rmsprop_tf"``: TF's RMSprop formula, how it differs from torch's, resume, config, a run."""
import io
import json
import math

import numpy as np
import pytest
import torch

import fastrl
from fastrl.algos.optimizers import RMSpropTF
from fastrl.config import ConfigError, load_config
from fastrl.runs.checkpoint import load_checkpoint

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

LR, ALPHA, EPS = 7e-4, 0.99, 1e-5
SHAPES = [(3, 4), (5,), (2, 3, 2), (1,)]


def _params(seed: int = 0) -> list[torch.Tensor]:
    """Float64 parameters of different shapes, so the comparisons below see the formula, not rounding."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g, dtype=torch.float64, requires_grad=True) for shape in SHAPES]


def _grads(steps: int, seed: int = 1) -> list[list[torch.Tensor]]:
    """Hand-made gradients per step: mixed signs and scales (1e-3 .. 10) so both the g^2 and the eps terms count."""
    g = torch.Generator().manual_seed(seed)
    return [[torch.randn(shape, generator=g, dtype=torch.float64) * 10.0 ** torch.randint(-3, 2, shape, generator=g)
             for shape in SHAPES] for _ in range(steps)]


def _run(optimizer: torch.optim.Optimizer, params: list[torch.Tensor], grads) -> None:
    for step in grads:
        for p, g in zip(params, step):
            p.grad = g.clone()
        optimizer.step()


def test_matches_tensorflows_formula_over_several_steps():
    params, grads = _params(), _grads(6)
    start = [p.detach().numpy().copy() for p in params]
    _run(RMSpropTF(params, lr=LR, alpha=ALPHA, eps=EPS), params, grads)
    for i, p in enumerate(params):
        # tf.train.RMSPropOptimizer (momentum 0, not centered): ms starts at one, eps under the root
        w, ms = start[i].copy(), np.ones_like(start[i])
        for step in grads:
            g = step[i].numpy()
            ms = ALPHA * ms + (1 - ALPHA) * g * g
            w = w - LR * g / np.sqrt(ms + EPS)
        # compare the displacement, not the weights: an update is ~1e-3 of a weight
        np.testing.assert_allclose(p.detach().numpy() - start[i], w - start[i], rtol=1e-6, atol=0)


def test_first_step_moves_by_lr_times_g_where_torchs_moves_by_ten_lr():
    """Torch's square average starts at 0: its first step is lr g / (sqrt(0.01 g^2) + eps) ~ 10 lr for any g.
    TF's starts at 1: lr g / sqrt(0.99 + 0.01 g^2 + eps) ~ lr g. Checked to 1e-9, so eps outside the root
    (a 5e-6 relative change here) fails too."""
    g = torch.tensor([1e-3, -0.1, 0.5, -2.0, 10.0], dtype=torch.float64)
    moved = {}
    for name, make in {"tf": RMSpropTF, "torch": torch.optim.RMSprop}.items():
        p = torch.zeros_like(g, requires_grad=True)
        _run(make([p], lr=LR, alpha=ALPHA, eps=EPS), [p], [[g]])
        moved[name] = p.detach()
    expected_tf = -LR * g / torch.sqrt(ALPHA + (1 - ALPHA) * g * g + EPS)
    expected_torch = -LR * g / (torch.sqrt((1 - ALPHA) * g * g) + EPS)
    torch.testing.assert_close(moved["tf"], expected_tf, rtol=1e-9, atol=0)
    torch.testing.assert_close(moved["torch"], expected_torch, rtol=1e-9, atol=0)
    assert (moved["torch"].abs() > 9 * LR).all()  # every weight ~10 lr, even for g = 1e-3
    assert (moved["tf"].abs() <= LR * g.abs() / math.sqrt(ALPHA)).all()  # at most ~1.005 lr |g|
    assert moved["tf"][0].abs() < 2e-3 * LR  # a small gradient makes a small step


def test_state_dict_round_trip_resumes_bit_for_bit():
    grads = _grads(5)
    straight = _params()
    _run(RMSpropTF(straight, lr=LR, alpha=ALPHA, eps=EPS), straight, grads)

    first = _params()
    optimizer = RMSpropTF(first, lr=LR, alpha=ALPHA, eps=EPS)
    _run(optimizer, first, grads[:3])
    saved = io.BytesIO()  # through torch.save, as a checkpoint stores it
    torch.save({"params": [p.detach() for p in first], "optimizer": optimizer.state_dict()}, saved)
    saved.seek(0)
    checkpoint = torch.load(saved, weights_only=True)

    resumed = [p.clone().requires_grad_() for p in checkpoint["params"]]
    optimizer = RMSpropTF(resumed, lr=1.0)  # the hyperparameters come back from the state too
    optimizer.load_state_dict(checkpoint["optimizer"])
    _run(optimizer, resumed, grads[3:])
    for a, b in zip(resumed, straight):
        assert torch.equal(a, b)
    assert all(optimizer.state[p]["step"] == 5 for p in resumed)


def test_config_accepts_rmsprop_tf_and_refuses_a_misspelling():
    assert load_config(None, ["algo.optimizer='rmsprop_tf'"]).algo.optimizer == "rmsprop_tf"
    with pytest.raises(ConfigError, match=r"algo.optimizer = 'rmsproptf': allowed values are "
                                          r"'rmsprop', 'rmsprop_tf', 'adam', 'radam', 'sgd'"):
        load_config(None, ["algo.optimizer='rmsproptf'"])


@pytest.mark.timeout(120)
def test_cartpole_a2c_trains_with_rmsprop_tf(tmp_path, monkeypatch):
    steps = []
    step = RMSpropTF.step
    monkeypatch.setattr(RMSpropTF, "step", lambda self, closure=None: steps.append(1) or step(self, closure))
    summary = fastrl.train("configs/cartpole_sync.toml",
                           ["run.progress=false", f"run.dir='{tmp_path}'", "engine.serial=true",
                            "algo.optimizer='rmsprop_tf'", "run.total_frames=20000"],
                           run_dir=tmp_path / "run")
    assert summary["status"] == "complete" and summary["frames"] == 20000
    assert len(steps) == 20000 // (8 * 5)  # the learner's optimizer was ours, one step per update
    last = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    assert all(math.isfinite(last[key]) for key in ("policy_loss", "value_loss", "entropy"))
    state = load_checkpoint(tmp_path / "run")["optimizer"]["state"]
    assert state and all(s["step"] == len(steps) for s in state.values())
