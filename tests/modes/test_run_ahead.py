"""hts runs ahead: an env that finished rollout j begins j+1 before the learner's barrier j,
acting with θ_{j+1} from the second weight slot. A barrier that checkpoints or ends the run is
decided one barrier early and finds every env parked; a run stopped between barriers resumes.

That the schedule itself is HTS-RL's, bit for bit, is checked elsewhere: the gradient rule by
hand (test_hts_gradient.py), process layouts and timing (test_engine.py), exact resume
(test_resume.py).
"""
import pytest

import fastrl
import fastrl.learning.learner
from fastrl.config import load_config
from fastrl.learning.learner import Learner
from fastrl.modes import mode_of
from fastrl.process.faults import RunFailed
from fastrl.runs.checkpoint import CheckpointStore, load_checkpoint
from tests.helpers.runs import cartpole

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

ENVS, STEPS = 8, 5


class AheadLearner(Learner):
    """Records, at each barrier j, how many envs have already acted in rollout j+1."""

    seen: dict = {}

    def _barrier(self):
        j = self.rollout
        following = self.buffers.slots.storage(self.spec.slot_map.storage_slot(j + 1), ENVS)
        AheadLearner.seen[j] = int((following["version"][:, 0] == j + 1).sum())
        super()._barrier()


def test_envs_run_ahead_except_into_a_barrier_that_checkpoints_or_ends(tmp_path, monkeypatch):
    monkeypatch.setattr(fastrl.learning.learner, "Learner", AheadLearner)
    AheadLearner.seen = {}
    config, overrides = cartpole(tmp_path, "engine.serial=true", "run.total_frames=800",  # 20 rollouts
                                 "run.checkpoint_interval_frames=200", "run.keep_checkpoints=10", mode="hts")
    fastrl.train(config, overrides, run_dir=tmp_path / "run")
    parked = {4, 9, 14, 19}  # the barriers whose checkpoints are rollouts 5, 10, 15 and 20
    assert CheckpointStore(tmp_path / "run" / "checkpoints").rollouts() == [j + 1 for j in sorted(parked)]
    assert AheadLearner.seen == {j: 0 if j in parked else ENVS for j in range(20)}


def test_only_plain_hts_runs_ahead_and_it_publishes_two_weight_sets(tmp_path):
    modes = {}
    for mode in ("sync", "hts", "async", "gala"):
        algo = ["algo.name='impala'"] if mode == "async" else ["engine.learners=4"] if mode == "gala" else []
        config, overrides = cartpole(tmp_path, *algo, mode=mode)
        modes[mode] = mode_of(fastrl.api.resolve_config(config, overrides))
    assert [m.run_ahead for m in modes.values()] == [False, True, False, False]
    assert [m.weight_slots for m in modes.values()] == [1, 2, 1, 1]


def test_a_run_stopped_between_barriers_resumes_from_its_newest_parameters(tmp_path):
    config, overrides = cartpole(tmp_path, "env.id='tests.helpers.faulty_envs:cartpole'",
                                 "env.kwargs={fault='raise', at=23}",
                                 "engine.serial=true", "run.total_frames=10_000", mode="hts")
    run_dir = tmp_path / "run"
    with pytest.raises(RunFailed, match="step 23 failed on purpose"):
        fastrl.train(config, overrides, run_dir=run_dir)
    checkpoint = load_checkpoint(run_dir)
    assert checkpoint["kind"] == "stop" and not checkpoint["exact"]
    # θ is already the version after the rollout in flight and holds every gradient taken:
    # the resumed run acts with it from that rollout, with nothing pending
    assert checkpoint["version"] == checkpoint["rollout"] + 1
    resume = checkpoint["resume"]
    assert resume["version"] == resume["rollout"] == checkpoint["rollout"] and resume["pending_grads"] is None
    frames = checkpoint["frames"] + 2 * ENVS * STEPS  # 10 steps per env: fresh instances fail at their 23rd
    summary = fastrl.train(resume=run_dir, overrides=[f"run.total_frames={frames}"])
    assert summary["status"] == "complete" and summary["frames"] == frames
    assert load_config(run_dir / "config.toml").engine.mode == "hts"
