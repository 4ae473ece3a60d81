"""``engine.reset_ahead``: an executor about to wait starts an env's next episode in a spare instance; the run's
bits are the same with it on or off (``fastrl.sampling.reset_ahead``)."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import numpy as np
import pytest

import fastrl
from fastrl.config import Config, ConfigError
from fastrl.sampling.reset_ahead import AUTO_MIN_RESET_S, SpareEpisodes, cores_idle_in_waits, wanted
from tests.helpers.runs import model_digest

# 4 envs of 40-step episodes in 16-step rollouts over 2 executors: every env ends episodes while the learner's
# updates keep the executors waiting at the barriers
CRAFTER_SHORT = ["model.compile=false", "run.progress=false", "run.tensorboard=false", "env.kwargs={length=40}",
                 "engine.envs=4", "engine.executors=2", "engine.rollout=16", "algo.minibatches=2", "algo.epochs=1",
                 "run.total_frames=640"]


class _Adapter:
    """An adapter whose first observation is its reset seed, and whose reset fails for one seed."""

    resets_from_seed = True

    def __init__(self, failing_seed: int = -1):
        self.failing_seed, self.closed = failing_seed, False

    def reset(self, seed: int, out: np.ndarray) -> None:
        if seed == self.failing_seed:
            raise RuntimeError("no world for this seed")
        out[...] = seed

    def close(self) -> None:
        self.closed = True


@pytest.mark.unit
def test_auto_resets_ahead_only_slow_resets_of_adapters_that_declare_their_seed_fixes_the_episode():
    declared, undeclared = _Adapter(), object()
    slow, fast = [AUTO_MIN_RESET_S * 10] * 3, [AUTO_MIN_RESET_S / 10] * 3
    assert wanted("auto", [declared], slow, True) and not wanted("auto", [declared], fast, True)
    assert not wanted("auto", [declared], slow, False)  # its waits are a CPU learner's: no core to spare
    assert wanted(True, [declared], fast, False) and not wanted(False, [declared], slow, True)
    assert not wanted("auto", [declared, undeclared], slow, True) and not wanted(True, [undeclared], slow, True)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("algo", "device", "cores", "idle"),
    [("ppo", "cpu", 2, False), ("ppo", "cpu", 16, True), ("none", "cpu", 2, True), ("ppo", "cuda", 2, True)],
)
def test_auto_resets_ahead_where_an_executors_wait_leaves_its_core_idle(monkeypatch, algo, device, cores, idle):
    config = Config()
    config.algo.name, config.engine.device = algo, device
    config.engine.executors, config.engine.actors, config.engine.inline_actors = 2, 2, True
    config.engine.learner_threads = 2
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    assert cores_idle_in_waits(SimpleNamespace(config=config)) is idle


@pytest.mark.unit
def test_a_spare_takes_the_envs_place_only_for_the_seed_it_was_reset_with():
    made = []
    spares = SpareEpisodes(lambda i: made.append(_Adapter(failing_seed=13)) or made[-1], np.zeros(3), 2)
    next_seeds, lengths = [11, 12], [5, 9]
    assert spares.next_to_build(next_seeds, lengths) == 1  # the longer episode ends first, likely
    spares.build(1, 12)
    assert spares.next_to_build(next_seeds, lengths) == 0
    spares.build(0, 11)
    assert spares.next_to_build(next_seeds, lengths) is None  # every env has its next episode ready
    out, finished = np.zeros(3), _Adapter(failing_seed=13)
    assert spares.take(1, 99, out, finished) is None and not out.any()  # reset with another seed: not this episode
    assert spares.take(1, 12, out, finished) is made[0] and (out == 12).all()
    assert spares.spares[1] is finished and spares.next_to_build([11, 13], lengths) == 1
    with pytest.raises(RuntimeError):  # the env's own reset in place meets the failure, where env.on_error rules
        spares.build(1, 13)
    assert spares.next_to_build([11, 13], lengths) is None  # a refused seed is not tried again
    assert spares.take(1, 13, out, _Adapter()) is None
    spares.close()
    assert finished.closed and made[1].closed


@pytest.mark.engine
def test_crafter_gives_the_same_bits_with_episodes_reset_ahead_or_in_place(tmp_path):
    digests, ahead = set(), {}
    for setting in ("true", "false"):
        run_dir = tmp_path / setting
        summary = fastrl.train("configs/crafter_ppo.toml", [*CRAFTER_SHORT, f"engine.reset_ahead={setting}"],
                               run_dir=run_dir)
        assert summary["status"] == "complete"
        digests.add(model_digest(run_dir))
        ahead[setting] = summary["episodes_reset_ahead"]
        lines = [json.loads(text) for text in (run_dir / "metrics.jsonl").read_text().splitlines()]
        assert lines[-1]["episodes"] == summary["episodes"] >= 8
    assert len(digests) == 1
    assert ahead["true"] > 0 and ahead["false"] == 0


@pytest.mark.engine
def test_cartpole_reset_ahead_by_hand_gives_the_same_bits_and_resumes_exactly(tmp_path):
    overrides = ["run.progress=false", "run.tensorboard=false", "engine.executors=2", "run.total_frames=4096"]
    fastrl.train("configs/cartpole_ppo.toml", [*overrides, "engine.reset_ahead=false"], run_dir=tmp_path / "off")
    on = [*overrides, "engine.reset_ahead=true"]
    summary = fastrl.train("configs/cartpole_ppo.toml", on, run_dir=tmp_path / "on")
    assert summary["episodes_reset_ahead"] > 0
    half = tmp_path / "half"  # stopped and resumed where spares were ready: the seeds drawn ahead are saved
    fastrl.train("configs/cartpole_ppo.toml", [*on, "run.total_frames=2048"], run_dir=half)
    fastrl.train(resume=half, overrides=["run.total_frames=4096"])
    assert model_digest(tmp_path / "off") == model_digest(tmp_path / "on") == model_digest(half)


@pytest.mark.engine
def test_reset_ahead_is_refused_before_work_for_an_env_whose_seed_does_not_fix_its_episodes(tmp_path):
    with pytest.raises(ConfigError, match=r"engine.reset_ahead = true.*resets_from_seed"):
        fastrl.train("configs/pong_sync.toml", ["engine.reset_ahead=true", "run.total_frames=512"],
                     run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()
