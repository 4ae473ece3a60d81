"""PPO's loss against a direct per-row computation, and its clipping behaviour."""
import numpy as np
import pytest
import torch

from fastrl.algos.ppo import PPOBatch, minibatch_indices, ppo_loss

pytestmark = pytest.mark.unit  # the fast tier: no engine run


class Table(torch.nn.Module):
    """logits and value are free parameters per row: the loss's gradient is easy to reason about."""

    def __init__(self, logits, values):
        super().__init__()
        self.logits = torch.nn.Parameter(torch.tensor(logits, dtype=torch.float32))
        self.values = torch.nn.Parameter(torch.tensor(values, dtype=torch.float32))

    def forward(self, obs):
        return self.logits[obs], self.values[obs]


def _batch(rng, rows=6, actions=3, logp_shift=0.0):
    logits = rng.normal(size=(rows, actions))
    values = rng.normal(size=rows)
    model = Table(logits, values)
    act = rng.integers(actions, size=rows)
    logp = torch.log_softmax(torch.tensor(logits, dtype=torch.float32), -1)[torch.arange(rows), torch.tensor(act)]
    batch = PPOBatch(
        obs=torch.arange(rows), actions=torch.tensor(act), old_logp=logp.detach() - logp_shift,
        old_values=torch.tensor(values + rng.normal(size=rows) * 0.1, dtype=torch.float32),
        advantages=torch.tensor(rng.normal(size=rows), dtype=torch.float32),
        returns=torch.tensor(rng.normal(size=rows), dtype=torch.float32),
    )
    return model, batch, logits, values, act


def _reference(logits, values, act, batch, clip, value_clip, vc, ec):
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    logp = np.log(p[np.arange(len(act)), act])
    adv = batch.advantages.numpy().astype(np.float64)
    ratio = np.exp(logp - batch.old_logp.numpy())
    pl = -np.mean(np.minimum(ratio * adv, np.clip(ratio, 1 - clip, 1 + clip) * adv))
    ret, old_v = batch.returns.numpy(), batch.old_values.numpy()
    err = (values - ret) ** 2
    if value_clip > 0:
        err = np.maximum(err, (old_v + np.clip(values - old_v, -value_clip, value_clip) - ret) ** 2)
    ent = -(p * np.log(p)).sum(-1).mean()
    return pl + vc * 0.5 * err.mean() - ec * ent


@pytest.mark.parametrize("shift, value_clip", [(0.0, 0.0), (0.5, 0.2), (-0.5, 0.2)])
def test_loss_matches_a_direct_computation(shift, value_clip):
    rng = np.random.default_rng(0)
    model, batch, logits, values, act = _batch(rng, logp_shift=shift)
    loss, stats = ppo_loss(model, batch, clip=0.2, value_clip=value_clip, value_coef=0.5, entropy_coef=0.01,
                           normalize_advantages=False)
    expected = _reference(logits, values, act, batch, 0.2, value_clip, 0.5, 0.01)
    assert loss.item() == pytest.approx(expected, rel=1e-5, abs=1e-6)
    assert 0.0 <= stats.clip_fraction <= 1.0
    if shift == 0.0:
        assert stats.clip_fraction == 0.0 and abs(stats.approx_kl) < 1e-6


def test_a_clipped_ratio_gives_no_policy_gradient():
    rng = np.random.default_rng(1)
    model, batch, *_ = _batch(rng, logp_shift=2.0)  # ratio = e^2, far outside 1 ± 0.2
    batch.advantages = torch.ones_like(batch.advantages)  # positive advantage: the clip binds
    loss, stats = ppo_loss(model, batch, clip=0.2, value_clip=0.0, value_coef=0.0, entropy_coef=0.0,
                           normalize_advantages=False)
    loss.backward()
    assert stats.clip_fraction == 1.0
    assert torch.count_nonzero(model.logits.grad) == 0


def test_minibatches_cover_every_row_once():
    parts = minibatch_indices(10, 3, np.random.default_rng(0))
    assert sorted(np.concatenate(parts).tolist()) == list(range(10))
    assert [len(p) for p in parts] == [4, 3, 3]
    with pytest.raises(ValueError, match="minibatches must be in 1..10"):
        minibatch_indices(10, 11, np.random.default_rng(0))
