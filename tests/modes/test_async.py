"""async mode (IMPALA): runs end to end, measures its lag, loses no slot, checkpoints and resumes.

async is nondeterministic by design (timing decides which slots make a batch), so nothing here
compares parameters between runs; the lag is measured, never asserted to a fixed value.
"""
import json
from queue import Empty

import pytest
import torch

import fastrl
import fastrl.learning.async_learner
import fastrl.sampling.executor
from fastrl.config import ConfigError
from fastrl.learning.async_learner import AsyncLearner
from fastrl.runs.checkpoint import load_checkpoint
from fastrl.sampling.channels import decode_full
from fastrl.sampling.executor import Executor
from tests.helpers.runs import cartpole

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

ASYNC = ["algo.name='impala'", "algo.batch_slots=4", "engine.rollout=10"]


def _train(tmp_path, name, *overrides):
    config, base = cartpole(tmp_path, *ASYNC, *overrides, mode="async")
    return fastrl.train(config, base, run_dir=tmp_path / name), tmp_path / name


def _metrics(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_async_impala_runs_in_processes_and_logs_a_positive_lag(tmp_path):
    summary, run_dir = _train(tmp_path, "run", "engine.envs=16", "engine.executors=2", "engine.actors=2",
                              "run.total_frames=6000", "run.log_interval_s=0.2")
    assert summary["status"] == "complete" and summary["frames"] >= 6000
    lines = [line for line in _metrics(run_dir) if line["updates"] > 0]
    assert lines and max(line["policy_lag_max"] for line in lines) > 0  # 16 envs feed batches of 4
    assert all(0 <= line["policy_lag_mean"] <= line["policy_lag_max"] for line in lines)
    checkpoint = load_checkpoint(run_dir)
    assert checkpoint["kind"] == "final" and not checkpoint["exact"] and checkpoint["env_states"] is None
    assert checkpoint["updates"] == summary["updates"] > 0


def _drain(queue) -> list[int]:
    try:
        return queue.get_many(block=False)
    except Empty:
        return []


def test_async_serial_returns_every_slot(tmp_path, monkeypatch):
    """At the end each slot is exactly once in the free queue, the full queue, an env or a half batch."""
    executors, seen = [], {}

    class Tracked(Executor):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            executors.append(self)

    class Counting(AsyncLearner):
        def shutdown(self):
            seen.update(free=_drain(self.channels.free), full=_drain(self.channels.full), batch=list(self.batch),
                        slots=self.buffers.slots.shape.slots)
            super().shutdown()

    monkeypatch.setattr(fastrl.sampling.executor, "Executor", Tracked)
    monkeypatch.setattr(fastrl.learning.async_learner, "AsyncLearner", Counting)
    summary, _ = _train(tmp_path, "serial", "engine.serial=true", "engine.executors=2", "run.total_frames=2000")
    assert summary["status"] == "complete"
    held = [int(ex.row[i]) // (ex.steps + 1) for ex in executors for i in range(len(ex.env_list))
            if i not in ex.cycle.waiting]
    full = [decode_full(message, 8)[0] for message in seen["full"] + seen["batch"]]  # (slot, env) messages
    everything = sorted(seen["free"] + full + held)
    assert seen["slots"] == 8 + 2 * 4
    assert everything == list(range(seen["slots"])), "a slot was lost or handed out twice"


def test_async_checkpoint_resumes_with_counters_and_parameters(tmp_path):
    _, run_dir = _train(tmp_path, "run", "run.total_frames=1200")
    first = load_checkpoint(run_dir)
    summary = fastrl.train(resume=run_dir, overrides=["run.total_frames=2400"])
    assert summary["status"] == "complete" and summary["frames"] >= 2400
    resumed = load_checkpoint(run_dir)
    assert resumed["updates"] > first["updates"] and resumed["version"] > first["version"]
    assert any(not torch.equal(resumed["model"][k], first["model"][k]) for k in first["model"])


@pytest.mark.parametrize(("mode", "algo", "message"), [
    ("async", "a2c", "engine.mode = 'async' learns with algo.name = 'impala'"),
    ("sync", "impala", "algo.name = 'impala' needs engine.mode = 'async'"),
    ("gala", "impala", "algo.name = 'impala' needs engine.mode = 'async'"),
])
def test_async_and_impala_go_together(mode, algo, message):
    with pytest.raises(ConfigError, match=message):
        fastrl.load_config(None, [f"engine.mode='{mode}'", f"algo.name='{algo}'"])
