"""Algorithms as registered plug-ins: the registry's contract, the names a config may give, the modes each
algorithm learns in, the errors a broken plug-in gets before anything starts, and the metrics it declares."""
import json
from dataclasses import dataclass

import pytest

import fastrl
from fastrl.algos import registry
from fastrl.algos.a2c import A2CSync
from fastrl.algos.registry import ALGORITHMS, Algorithm, load_algorithm, register_algorithm
from fastrl.buffers import BufferPlan, RunBuffers
from fastrl.buffers.control import STAT_COLUMNS
from fastrl.buffers.slots import SlotShape
from fastrl.config import ConfigError, load_config
from fastrl.modes import algorithms_of, default_algorithm
from tests.helpers.runs import cartpole

# each test is of the fast tier (unit) but the one that trains with a registered algorithm (engine)


@pytest.mark.unit
def test_the_modes_take_what_the_registrations_say():
    assert algorithms_of("sync") == ("a2c", "ppo", "pqn", "none")
    assert algorithms_of("hts") == ("a2c", "ppo", "none")
    assert algorithms_of("async") == ("impala", "none")
    assert algorithms_of("gala") == ("a2c", "none")
    assert [default_algorithm(m) for m in ("sync", "hts", "async", "gala")] == ["ppo", "ppo", "impala", "a2c"]


@pytest.mark.unit
@pytest.mark.parametrize("overrides, message", [
    (["algo.name='pqn'", "engine.mode='hts'"], "algo.name = 'pqn' needs engine.mode = 'sync'"),
    (["algo.name='ppo'", "engine.mode='async'"], "engine.mode = 'async' learns with algo.name = 'impala'"),
    (["algo.name='dqn'"], "algo.name = 'dqn': allowed values are 'auto', 'a2c', 'ppo', 'impala', 'pqn', 'none', "
                          "or 'package.module:NAME'"),
    (["algo.name='a2c'", "algo.options={ x = 1 }"], r"algo.options = \{'x': 1\}: algo.name = 'a2c' takes no options"),
    (["algo.name='ppo'", "algo.options={ x = 1 }"], "unknown config key 'algo.options.x'"),
    (["algo.name='pqn'", "algo.options={ epsilon = 1 }"], "unknown config key 'algo.options.epsilon'"),
    (["algo.name='pqn'", "algo.options={ q_lambda = 2.0 }"], r"algo.options.q_lambda = 2.0: must be <= 1"),
    (["algo.name='pqn'", "algo.options.clip_schedulee='linear'"], "unknown config key 'algo.options.clip_schedulee'"),
])
def test_a_config_is_checked_against_its_algorithms_registration(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides)


@pytest.mark.unit
def test_a_plugin_name_is_not_imported_when_a_config_is_only_read():
    config = load_config(None, ["algo.name='no_such_package.anywhere:ALGO'", "algo.options={ anything = 1 }"])
    assert config.algo.name == "no_such_package.anywhere:ALGO"  # imported (and refused) when a run starts


@pytest.mark.unit
@pytest.mark.parametrize("name, message", [
    ("no_such_package.anywhere:ALGO", "cannot import 'no_such_package.anywhere': ModuleNotFoundError"),
    ("fastrl.algos.pqn:NOTHING", "module 'fastrl.algos.pqn' has no 'NOTHING'"),
    ("fastrl.algos.pqn:PQNOptions", "names type .*, not a fastrl Algorithm: a plug-in module defines NAME ="),
    ("fastrl.algos.pqn", "expected 'package.module:Name'"),
])
def test_a_broken_plugin_is_named_by_what_it_lacks(name, message):
    with pytest.raises(ConfigError, match=message):
        load_algorithm(name if ":" in name else name + ":")


@pytest.mark.unit
def test_a_plugin_name_that_does_not_import_ends_the_run_with_exit_2_before_anything_starts(tmp_path):
    from fastrl.cli import main

    assert main(["train", "configs/cartpole_sync.toml", "--run-dir", str(tmp_path / "run"),
                 "--set", "algo.name='no_such_package.anywhere:ALGO'"]) == 2
    assert not (tmp_path / "run").exists()


@dataclass
class _Options:
    size: int = 3


@pytest.mark.unit
@pytest.mark.parametrize("fields, message", [
    ({"name": "bad:name"}, "its name must be a plain word"),
    ({"name": "auto"}, "its name must be a plain word"),
    ({"lags": (2,)}, "lags must name the policy lags it learns at"),
    ({"lags": ()}, "lags must name the policy lags it learns at"),
    ({"metrics": ("a", "a")}, "metrics must be distinct names other than the losses"),
    ({"metrics": ("entropy",)}, "metrics must be distinct names other than the losses"),
    ({"metrics": "abc"}, "metrics must be distinct names other than the losses"),
    ({"options": {"size": 3}}, "options must be a dataclass of its hyper-parameters"),
    ({"rule": 3}, "rule must be its UpdateRule class"),
    ({"sampler": 3}, "sampler must be a factory"),
])
def test_a_registration_that_breaks_the_contract_is_refused_naming_the_field(fields, message):
    base = {"name": "contract_probe", "rule": "fastrl.algos.update_rule:Collect", "lags": (0,)}
    with pytest.raises(ConfigError, match=message):
        register_algorithm(Algorithm(**{**base, **fields}))
    assert "contract_probe" not in registry.names()


@pytest.mark.unit
def test_a_name_is_registered_once():
    first = register_algorithm(Algorithm("once_probe", "fastrl.algos.update_rule:Collect", lags=(0,), options=_Options))
    assert register_algorithm(first) is first  # the same registration again: harmless (a module imported twice)
    with pytest.raises(ConfigError, match="an algorithm named 'once_probe' is registered already"):
        register_algorithm(Algorithm("once_probe", "fastrl.algos.update_rule:Collect", lags=(1,)))
    assert fastrl.register_algorithm is register_algorithm and fastrl.Algorithm is Algorithm


@pytest.mark.unit
def test_the_plan_gives_each_declared_metric_a_named_column_after_the_layers():
    """The core allocates the registration's metrics by name (no column is any algorithm's own), after the layers'
    stats, so that a layer finds its own columns from the layers' names alone."""
    ppo = load_algorithm("ppo").metrics
    plan = BufferPlan(SlotShape(1, 1, (3,), "float32"), 8, 1, 1, layer_stats=("a", "b"), metrics=ppo)
    buffers = RunBuffers.create(plan)
    try:
        control = buffers.control
        assert control.stat_column("a") == STAT_COLUMNS and control.stat_column("b") == STAT_COLUMNS + 1
        assert control.metric_columns == {name: STAT_COLUMNS + 2 + k for k, name in enumerate(ppo)}
        assert control.learner_stats.shape == (1, STAT_COLUMNS + 2 + len(ppo))
    finally:
        buffers.close()
        buffers.arena.unlink()
    assert ppo == ("clip", "clip_fraction", "approx_kl", "epochs_done")
    assert load_algorithm("pqn").metrics == ("epsilon", "q_mean")
    assert load_algorithm("a2c").metrics == load_algorithm("impala").metrics == ()


class _FigureRule(A2CSync):
    """A2C reporting figures of its own: one its loss measures, one it schedules (as PPO's clip range is)."""

    def schedule(self, frames, total_frames, share):
        self.progress = frames / total_frames

    def scheduled_metrics(self):
        return {"progress": getattr(self, "progress", -1.0)}

    def _loss(self, net, storage):
        loss, stats = super()._loss(net, storage)
        stats.metrics["twice_the_value_loss"] = 2 * stats.value_loss
        return loss, stats


@pytest.mark.engine
def test_a_registered_algorithms_declared_metrics_reach_every_metrics_line(tmp_path, scoped_registries):
    """A plug-in declares the figures its rule reports beside the losses; each gets its own column and key, in its
    registration's order after the shared keys, with what the rule last reported (more than the 8 columns there
    once were)."""
    scoped_registries(ALGORITHMS)
    names = ("twice_the_value_loss", "progress", *(f"unused_{k}" for k in range(8)))
    register_algorithm(Algorithm("figure_probe", _FigureRule, lags=(0,), metrics=names))
    config, overrides = cartpole(tmp_path, "engine.serial=true", "algo.name='figure_probe'")
    summary = fastrl.train(config, overrides, run_dir=tmp_path / "run")
    assert summary["status"] == "complete" and summary["frames"] == 800
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    last = lines[-1]
    assert list(last)[-len(names):] == list(names)  # after the shared keys, in the declaration's order
    assert last["twice_the_value_loss"] == pytest.approx(2 * last["value_loss"])
    assert last["progress"] == pytest.approx(760 / 800)  # the frames learned before the last update, by its schedule
    assert all(last[f"unused_{k}"] == 0.0 for k in range(8))  # declared, never reported: left at 0
