"""Time limits are not terminations, end to end: what the executor stores at a truncated step,
every mode running on truncated episodes, determinism with them, and a value that learns r/(1−γ)."""
import pytest
import torch

import fastrl
from csrc_free_kernels.step_end import CONTINUES, TERMINATED, TRUNCATED
from fastrl.models.mlp import MLPPolicy
from fastrl.runs.checkpoint import load_checkpoint
from tests.helpers.runs import cartpole

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

ENV = "env.id='tests.helpers.time_limit_env:make'"


def _record_storages(monkeypatch, seen: list) -> None:
    """Keep a copy of every storage the (serial) learner learns from."""
    import fastrl.learning.learner
    from fastrl.learning.learner import Learner

    class Recording(Learner):
        def _barrier(self):
            first = self.spec.slot_map.storage_slot(self.rollout)
            seen.append({k: v.copy() for k, v in self.buffers.slots.storage(first, self.spec.envs).items()})
            super()._barrier()

    monkeypatch.setattr(fastrl.learning.learner, "Learner", Recording)


def test_a_truncated_step_keeps_its_final_observation(tmp_path, monkeypatch):
    seen = []
    _record_storages(monkeypatch, seen)
    config, base = cartpole(tmp_path, ENV, "env.kwargs={limit=3}", "engine.serial=true", "run.total_frames=80")
    fastrl.train(config, base, run_dir=tmp_path / "run")
    storage = seen[0]  # rollout 0, steps t = 0..4: the episode's 3rd step (t = 2) hits the limit
    assert (storage["done"][:, :5] == [CONTINUES, CONTINUES, TRUNCATED, CONTINUES, CONTINUES]).all()
    assert (storage["final_obs"][:, 2, 0] == 3.0).all()  # the final observation, before the reset
    assert (storage["obs"][:, 3, 0] == 0.0).all()  # what the reset put in its place
    assert (storage["obs"][:, :3, 0] == [0.0, 1.0, 2.0]).all()


def test_a_termination_at_the_limit_is_a_termination(tmp_path, monkeypatch):
    seen = []
    _record_storages(monkeypatch, seen)
    config, base = cartpole(tmp_path, ENV, "env.kwargs={limit=3, terminate_at=3}", "engine.serial=true",
                            "run.total_frames=40")
    fastrl.train(config, base, run_dir=tmp_path / "run")
    assert (seen[0]["done"][:, 2] == TERMINATED).all()


def test_the_slot_sizes_count_the_final_observations():
    """The /dev/shm check sizes the plan's layout, which holds final_obs beside obs."""
    from fastrl.buffers import BufferPlan
    from fastrl.buffers.slots import SlotShape

    shape = SlotShape(slots=32, steps=5, obs_shape=(4, 84, 84), obs_dtype="uint8")
    layout = BufferPlan(shape, n_params=10, learners=1, workers=3).layout()
    obs = layout.field("obs")
    assert layout.field("final_obs").nbytes == obs.nbytes == 32 * 6 * 4 * 84 * 84
    assert layout.nbytes >= sum(f.nbytes for f in layout.fields)


# every mode and algorithm on episodes truncated every 3 steps (most rollouts hold truncations)
@pytest.mark.parametrize("overrides", [
    ["engine.mode='sync'", "algo.name='a2c'"],
    ["engine.mode='hts'", "algo.name='a2c'"],
    ["engine.mode='sync'", "algo.name='ppo'"],
    ["engine.mode='hts'", "algo.name='ppo'"],
    ["engine.mode='async'", "algo.name='impala'", "algo.batch_slots=4"],
])
def test_every_mode_learns_on_truncated_episodes(tmp_path, overrides):
    config, base = cartpole(tmp_path, ENV, "env.kwargs={limit=3}", "engine.serial=true", "run.total_frames=800",
                            *overrides)
    summary = fastrl.train(config, base, run_dir=tmp_path / "run")
    assert summary["status"] == "complete" and summary["frames"] >= 800


def test_gala_learns_on_truncated_episodes(tmp_path):
    config, base = cartpole(tmp_path, ENV, "env.kwargs={limit=3}", "engine.mode='gala'", "engine.learners=2",
                            "run.total_frames=400")
    summary = fastrl.train(config, base, run_dir=tmp_path / "run")
    assert summary["status"] == "complete"


# hts, where envs run ahead of the learner, is where timing could leak in; sync is slow-marked
# to keep the default run within its time budget (as in test_engine.py)
@pytest.mark.parametrize("mode", [pytest.param("sync", marks=pytest.mark.slow), "hts"])
def test_truncations_keep_parameters_independent_of_the_process_layout(tmp_path, mode):
    common = [ENV, "env.kwargs={limit=3}", "run.total_frames=800", "engine.step_delay_s=0.001"]
    params = []
    for name, layout in (("serial", ["engine.serial=true"]), ("processes", ["engine.executors=2", "engine.actors=2"])):
        config, base = cartpole(tmp_path, *common, *layout, mode=mode)
        fastrl.train(config, base, run_dir=tmp_path / name)
        params.append(load_checkpoint(tmp_path / name)["model"])
    for key in params[0]:
        assert torch.equal(params[0][key], params[1][key]), key


def test_a_constant_reward_cut_by_a_time_limit_learns_its_infinite_horizon_value(tmp_path):
    """Reward 1 every step, one state, episodes truncated after 20 steps, γ = 0.9: the value is
    1 / (1 − 0.9) = 10. Without bootstrapping the cut, the returns of the rollout that ends each
    episode are truncated sums, (1 − 0.9^k) / 0.1 with k the steps left, and the value settles
    near 5.9 (5.8 measured with the code before time limits were bootstrapped). No gradient
    clipping: it would shrink the rare large corrections of the cut rollouts more than the
    frequent small ones, and move the fixed point away from the mean target."""
    config, base = cartpole(tmp_path, ENV, "env.kwargs={limit=20, observe='constant'}", "engine.serial=true",
                            "algo.name='a2c'", "algo.gamma=0.9", "algo.lr=3e-3", "algo.max_grad_norm=0",
                            "model.hidden=[16]", "run.total_frames=40000")
    fastrl.train(config, base, run_dir=tmp_path / "run")
    model = MLPPolicy((1,), 2, hidden=(16,))
    model.load_state_dict(load_checkpoint(tmp_path / "run")["model"])
    with torch.no_grad():
        _, value = model(torch.ones(1, 1))
    assert abs(float(value) - 10.0) < 0.5, float(value)
