"""Every fault ends a run the same way: workers stopped, a checkpoint of the last good parameters,
no shared memory left (the autouse fixture), one message naming what failed and where.

Faults are injected: envs that fail on purpose (tests/helpers/faulty_envs.py), ``kill -9`` and
``SIGSTOP`` of a worker found in the run's pids.json.
"""
import json
import os
import signal
import threading

import pytest

import fastrl
from fastrl.process.faults import RunFailed
from tests.helpers.runs import assert_cleaned_up, cartpole, wait_for_pids

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

FAULTY = "env.id='tests.helpers.faulty_envs:cartpole'"
LONG = ["run.total_frames=10_000_000", "run.max_seconds=60"]  # ended by the fault, not the budget


def _fail(tmp_path, *overrides, mode="sync"):
    config, base = cartpole(tmp_path, *overrides, mode=mode)
    run_dir = tmp_path / "run"
    with pytest.raises(RunFailed) as info:
        fastrl.train(config, base, run_dir=run_dir)
    return str(info.value), run_dir


def _after_ready(run_dir, action):
    """Run ``action(pids)`` in a thread once every worker of the run is up."""
    seen = {}

    def go():
        seen.update(wait_for_pids(run_dir))
        action(seen)

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    return seen


def test_env_exception_names_the_env_step_and_traceback(tmp_path):
    message, run_dir = _fail(tmp_path, FAULTY, "env.kwargs={fault='raise', at=23}", "engine.executors=2", *LONG)
    assert "executor-" in message and "env 'tests.helpers.faulty_envs:cartpole' #" in message
    assert "raised RuntimeError: step 23 failed on purpose, in step(action=" in message
    assert "(rollout 4)" in message  # step 23 of each env is in rollout 4 (steps 20..24)
    assert 'faulty_envs.py", line' in message  # the env's own traceback
    assert "checkpoints/latest.pt" in message and f"--resume {run_dir}" in message
    checkpoint = assert_cleaned_up(run_dir)
    assert checkpoint["rollout"] == 4 and checkpoint["version"] == 4  # the last good state, from the learner
    assert (run_dir / "summary.json").read_text().count('"failed"') == 1


def test_env_exception_in_reset(tmp_path):
    message, run_dir = _fail(tmp_path, FAULTY, "env.kwargs={fault='raise_in_reset', at=2}", "engine.serial=true", *LONG)
    assert "raised RuntimeError: reset 2 failed on purpose, in reset()" in message
    assert_cleaned_up(run_dir)


def test_an_env_failing_its_first_reset_as_its_executor_starts_ends_the_run_named(tmp_path):
    env_id = "tests.helpers.faulty_envs:cartpole_failing_its_first_reset"
    message, run_dir = _fail(tmp_path, f"env.id='{env_id}'", "engine.executors=2", *LONG)
    assert f"env '{env_id}' #1 on executor-0 raised RuntimeError: reset 1 failed on purpose, in reset() at step 0 " \
           "of its episode;" in message  # before any rollout: none named
    assert_cleaned_up(run_dir)


def test_on_error_reset_resets_the_env_counts_and_goes_on(tmp_path):
    config, base = cartpole(tmp_path, FAULTY, "env.kwargs={fault='raise', every=7}", "env.on_error='reset'",
                            "engine.serial=true", "run.total_frames=800")
    summary = fastrl.train(config, base, run_dir=tmp_path / "run")
    assert summary["status"] == "complete" and summary["frames"] == 800
    assert summary["env_errors"] == 8 * (100 // 7)  # 8 envs, 100 steps each, an error every 7th
    assert '"env_errors": ' in (tmp_path / "run" / "metrics.jsonl").read_text()


def test_on_error_reset_marks_the_failed_step_done(tmp_path, monkeypatch):
    """The failed step ends the partial episode for learning: done, reward 0, no bootstrap across it."""
    import fastrl.learning.learner
    from fastrl.learning.learner import Learner

    seen = []

    class Recording(Learner):
        def _barrier(self):
            storage = self.buffers.slots.storage(self.spec.slot_map.storage_slot(self.rollout), self.spec.envs)
            seen.append((storage["done"][:, : self.spec.steps].copy(), storage["reward"][:, : self.spec.steps].copy()))
            super()._barrier()

    monkeypatch.setattr(fastrl.learning.learner, "Learner", Recording)
    config, base = cartpole(tmp_path, FAULTY, "env.kwargs={fault='raise', every=7}", "env.on_error='reset'",
                            "engine.serial=true", "run.total_frames=80")  # 2 rollouts of 5 steps
    fastrl.train(config, base, run_dir=tmp_path / "run")
    done, reward = seen[1]  # rollout 1 holds steps 6..10: the 7th step is t = 1
    assert (done[:, 1] == 1).all() and (reward[:, 1] == 0).all()


@pytest.mark.parametrize("victim", ["executor-1", "actor-0", "learner-0"])
def test_a_killed_worker_ends_the_run_within_seconds(tmp_path, victim):
    run_dir = tmp_path / "run"
    pids = _after_ready(run_dir, lambda p: os.kill(p["workers"][victim], signal.SIGKILL))
    message, _ = _fail(tmp_path, "engine.executors=2", *LONG)
    assert f"{victim} (pid {pids['workers'][victim]}) was killed by SIGKILL" in message
    checkpoint = assert_cleaned_up(run_dir, pids)
    assert json.loads((run_dir / "summary.json").read_text())["train_s"] < 15  # in seconds, not at max_seconds
    if victim == "learner-0":  # the main process wrote it from the last published weights
        assert checkpoint["kind"] == "shared-params" and checkpoint["optimizer"] is None
        more = checkpoint["frames"] + 80
        summary = fastrl.train(resume=run_dir, overrides=["engine.serial=true", f"run.total_frames={more}"])
        assert summary["frames"] == more  # it goes on from there, with a fresh optimizer
    else:
        assert checkpoint["kind"] in ("stop", "barrier") and checkpoint["optimizer"] is not None


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_learner_has_published_its_weights_when_it_reports_ready(tmp_path, monkeypatch, mode):
    """The kill above may land the instant every worker is ready: by then the weights the main process saves
    must be there (a whole set: even sequence counter, version 0), not first written in start()."""
    from fastrl.buffers.params import SEQ
    from fastrl.learning import async_learner, learner

    seen = []
    cls = async_learner.AsyncLearner if mode == "async" else learner.Learner

    class Recording(cls):  # type: ignore[misc, valid-type]
        def start(self):
            seen.append((int(self.weights[0].header[SEQ]), self.weights[0].version, bool(self.control.ready.all())))
            super().start()

    monkeypatch.setattr(async_learner if mode == "async" else learner, cls.__name__, Recording)
    extra = ["algo.name='impala'", "algo.batch_slots=4"] if mode == "async" else []
    config, base = cartpole(tmp_path, "engine.serial=true", "run.total_frames=80", *extra, mode=mode)
    fastrl.train(config, base, run_dir=tmp_path / "run")
    seq, version, ready = seen[0]
    assert ready and seq > 0 and seq % 2 == 0 and version == 0


def test_a_hung_env_step_is_named_by_the_watchdog(tmp_path):
    message, run_dir = _fail(tmp_path, FAULTY, "env.kwargs={fault='hang', at=30}", "reliability.watchdog_s=1.5", *LONG)
    assert "executor-0 (pid " in message and "has made no progress for" in message
    assert "stuck in env 'tests.helpers.faulty_envs:cartpole' #" in message and "in the step of action" in message
    assert "executor-0's stack:" in message and 'faulty_envs.py", line' in message  # where it is stuck
    checkpoint = assert_cleaned_up(run_dir)
    assert checkpoint["kind"] in ("stop", "barrier")


def test_a_stuck_learner_is_named_and_its_published_weights_are_saved(tmp_path):
    message, run_dir = _fail(tmp_path, "model.name='tests.helpers.faulty_models:hangs_in_learner'",
                             "reliability.watchdog_s=1.5", *LONG)
    assert "learner-0 (pid " in message and "has made no progress" in message and "not inside an env call" in message
    assert "learner-0's stack:" in message and 'faulty_models.py", line' in message
    checkpoint = assert_cleaned_up(run_dir)
    assert checkpoint["kind"] == "shared-params"


def test_a_frozen_actor_is_caught_by_the_watchdog(tmp_path):
    run_dir = tmp_path / "run"
    pids = _after_ready(run_dir, lambda p: os.kill(p["workers"]["actor-0"], signal.SIGSTOP))
    message, _ = _fail(tmp_path, "reliability.watchdog_s=1.5", *LONG)
    assert f"actor-0 (pid {pids['workers']['actor-0']}) has made no progress" in message
    assert "not inside an env call" in message
    assert_cleaned_up(run_dir, pids)


def test_a_non_finite_loss_stops_before_the_bad_update(tmp_path):
    message, run_dir = _fail(tmp_path, FAULTY, "env.kwargs={fault='huge_reward', at=13}", "engine.serial=true", *LONG)
    assert "non-finite loss" in message and "on the data of rollout 2" in message
    checkpoint = assert_cleaned_up(run_dir)
    assert checkpoint["version"] == 2 and checkpoint["updates"] == 2  # rollouts 0 and 1 learned, not 2


@pytest.mark.parametrize("mode", ["sync", "hts"])
def test_non_finite_parameters_are_restored_and_never_published(tmp_path, mode):
    message, run_dir = _fail(tmp_path, "algo.lr=3e38", *LONG, mode=mode)  # the first step overflows to inf
    assert "non-finite parameters after an optimizer step" in message
    checkpoint = assert_cleaned_up(run_dir)
    assert checkpoint["updates"] == 0


def test_a_full_queue_ends_the_run_with_a_clear_message(tmp_path, monkeypatch):
    import fastrl.sampling.channels

    monkeypatch.setattr(fastrl.sampling.channels, "QUEUE_BYTES", 64)  # smaller than one batch of requests
    message, run_dir = _fail(tmp_path, "engine.serial=true", "reliability.queue_timeout_s=0.2", *LONG)
    assert "a queue stayed full for reliability.queue_timeout_s = 0.2 s" in message
    assert_cleaned_up(run_dir)


def test_the_watchdog_names_the_worker_stuck_longest():
    """A frozen actor soon stalls the executor waiting for its actions: the one that stopped first is named."""
    import time
    from types import SimpleNamespace

    import numpy as np

    from fastrl.buffers.control import ACTIVITY_COLUMNS, Activity, Phase
    from fastrl.process.watchdog import stale_worker

    now = time.monotonic()
    activity = np.zeros((4, ACTIVITY_COLUMNS), np.int64)
    control = SimpleNamespace(heartbeat=np.array([now - 1.6, now - 0.1, now - 1.9, now - 0.2]), activity=activity)
    assert stale_worker(control, 1.5) == 2
    assert stale_worker(SimpleNamespace(heartbeat=np.array([now, now])), 1.5) is None
    # executor 0 began to wait on actor 2 a moment before the actor froze: the actor is the cause
    control.heartbeat[:] = [now - 2.0, now - 0.1, now - 1.8, now - 0.2]
    assert stale_worker(control, 1.5, executors=2) == 2
    activity[0, Activity.PHASE] = Phase.STEP  # ... unless the executor is inside an env call: a hung env
    assert stale_worker(control, 1.5, executors=2) == 0


@pytest.mark.unit
def test_a_step_too_long_for_its_norm_is_still_finite_and_kept():
    """The check reads the step's distance first; one that overflows float32 (a step of 1e20 on every
    parameter) is looked at element-wise and kept, since every parameter is finite; one to inf is still undone."""
    import numpy as np
    import torch

    from fastrl.buffers.control import STAT_COLUMNS, Stat
    from fastrl.errors import NonFiniteError
    from fastrl.learning.checked_step import CheckedStep

    net = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(net.parameters(), lr=100.0)
    stats = np.zeros(STAT_COLUMNS)
    step = CheckedStep(optimizer, 0.0, stats, lambda grads: None, lambda: 1.0, deferred=False)
    step(net, [torch.full_like(p, 1e18) for p in net.parameters()])  # a finite gradient norm, a step of 1e20
    assert all(torch.isfinite(p).all() for p in net.parameters())
    assert stats[Stat.UPDATE_NORM] == float("inf")  # the distance overflowed; the parameters did not
    kept = [p.detach().clone() for p in net.parameters()]
    optimizer.param_groups[0]["lr"] = 1e21  # a finite gradient of 1e18 then moves every parameter to inf
    with pytest.raises(NonFiniteError, match="non-finite parameters"):
        step(net, [torch.full_like(p, 1e18) for p in net.parameters()])
    assert all(torch.equal(p, k) for p, k in zip(net.parameters(), kept))  # restored
