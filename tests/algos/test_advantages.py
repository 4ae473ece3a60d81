"""``returns_and_advantages``, the one call a rule makes for a storage's returns and advantages: each ``done`` code
as a plain numpy recursion reads it (a truncation bootstrapped from the model's value of its final observation),
the values given or the model's own, and a recurrent model's final observations read with the state after their
row."""

import numpy as np
import pytest
import torch

from csrc_free_kernels.step_end import TERMINATED, TRUNCATED
from fastrl.algos.advantages import returns_and_advantages
from fastrl.algos.update_rule import forward_storage
from fastrl.buffers.device_storage import Uploads
from fastrl.models.registry import build_model
from tests.helpers.returns_reference import returns_and_advantages_reference

pytestmark = pytest.mark.unit  # the fast tier: no engine run

GAMMA, N, T = 0.9, 4, 7
CPU = torch.device("cpu")


def _storage(seed: int = 0, lstm: int = 0) -> dict[str, np.ndarray]:
    """[N, T + 1] rows, every env with a truncation and a termination somewhere (env 0: one at the last step)."""
    rng = np.random.default_rng(seed)
    done = np.zeros((N, T + 1), np.uint8)
    done[0, [2, T - 1]] = TRUNCATED, TRUNCATED
    done[1, [1, 4]] = TERMINATED, TRUNCATED
    done[2, [3, 5]] = TRUNCATED, TERMINATED
    done[3, 0] = TRUNCATED
    storage = {
        "obs": rng.standard_normal((N, T + 1, 3)).astype(np.float32),
        "final_obs": rng.standard_normal((N, T + 1, 3)).astype(np.float32),
        "action": rng.integers(0, 2, (N, T + 1)),
        "reward": rng.standard_normal((N, T + 1)).astype(np.float32),
        "value": rng.standard_normal((N, T + 1)).astype(np.float32),
        "done": done,
    }
    if lstm:
        storage["hidden"] = rng.standard_normal((N, T + 1, 2 * lstm)).astype(np.float32)
    return storage


def _reference(storage, values: np.ndarray, final: np.ndarray, lam: float | None) -> tuple[np.ndarray, np.ndarray]:
    return returns_and_advantages_reference(storage["reward"][:, :T], storage["done"][:, :T], values, final, GAMMA, lam)


def _final_values(model, storage, after=None) -> np.ndarray:
    """V of each truncated step's final observation, one row at a time."""
    final = np.full((N, T), np.nan)
    with torch.no_grad():
        for env, t in zip(*np.nonzero(storage["done"][:, :T] == TRUNCATED)):
            obs = torch.from_numpy(storage["final_obs"][env, t][None])
            out = model(obs) if after is None else model(obs, after[env, t][None])
            final[env, t] = float(out[1][0])
    return final


@pytest.mark.parametrize("lam", [None, 0.0, 0.8, 1.0])
def test_returns_and_advantages_bootstrap_each_time_limit_as_the_recursion_does(lam):
    torch.manual_seed(0)
    model = build_model("mlp", (3,), "float32", 2, hidden=[8])
    storage = _storage()
    with torch.no_grad():
        values = model(torch.from_numpy(storage["obs"]).flatten(0, 1))[1].reshape(N, T + 1).numpy()
    want_returns, want_advantages = _reference(storage, values, _final_values(model, storage), lam)
    returns, advantages = returns_and_advantages(model, Uploads(CPU).of(storage), GAMMA, lam)  # the model's values
    assert returns.dtype == advantages.dtype == torch.float32 and returns.shape == (N, T)
    np.testing.assert_allclose(returns.numpy(), want_returns, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(advantages.numpy(), want_advantages, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("lam", [None, 0.95])
def test_the_values_given_are_the_ones_used_as_tensor_or_array(lam):
    """The values the actors wrote (an array), row T the learner's: its rows are V; truncations still the model's."""
    torch.manual_seed(1)
    model = build_model("mlp", (3,), "float32", 2, hidden=[8])
    storage = _storage(1)
    values = storage["value"].copy()
    want = _reference(storage, values, _final_values(model, storage), lam)
    for given in (values, torch.from_numpy(values).requires_grad_()):
        got = returns_and_advantages(model, Uploads(CPU).of(storage), GAMMA, lam, values=given)
        assert not any(x.requires_grad for x in got)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=1e-5)


def test_a_recurrent_models_final_observations_are_read_with_the_state_after_their_row():
    torch.manual_seed(2)
    model = build_model("mlp", (3,), "float32", 2, hidden=[8], lstm=4)
    storage = _storage(2, lstm=4)
    on = Uploads(CPU).of(storage)
    with torch.no_grad():
        _, values, after = forward_storage(model, on.tensor("obs"), on)
    want = _reference(storage, values.numpy(), _final_values(model, storage, after), 0.9)
    for kwargs in ({}, {"values": values, "after": after}):  # replayed here, or given
        got = returns_and_advantages(model, Uploads(CPU).of(storage), GAMMA, 0.9, **kwargs)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="pass after="):  # without them the final observations would be misread
        returns_and_advantages(model, Uploads(CPU).of(storage), GAMMA, 0.9, values=values)


def test_values_of_the_wrong_shape_are_refused():
    model = build_model("mlp", (3,), "float32", 2, hidden=[8])
    with pytest.raises(ValueError, match=r"must be \[N, T \+ 1\]"):
        returns_and_advantages(model, Uploads(CPU).of(_storage()), GAMMA, 0.9, values=np.zeros((N, T), np.float32))
