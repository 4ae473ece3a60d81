"""Algorithms as registered plug-ins: the registry's contract, the names a config may give, the modes each
algorithm learns in, and the errors a broken plug-in gets before anything starts."""
from dataclasses import dataclass

import pytest

import fastrl
from fastrl.algos import registry
from fastrl.algos.registry import Algorithm, load_algorithm, metric_keys, register_algorithm
from fastrl.buffers.control import Stat
from fastrl.config import ConfigError, load_config
from fastrl.modes import algorithms_of, default_algorithm

pytestmark = pytest.mark.unit


def test_the_modes_take_what_the_registrations_say():
    assert algorithms_of("sync") == ("a2c", "ppo", "pqn", "none")
    assert algorithms_of("hts") == ("a2c", "ppo", "none")
    assert algorithms_of("async") == ("impala", "none")
    assert algorithms_of("gala") == ("a2c", "none")
    assert [default_algorithm(m) for m in ("sync", "hts", "async", "gala")] == ["ppo", "ppo", "impala", "a2c"]


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


def test_a_plugin_name_is_not_imported_when_a_config_is_only_read():
    config = load_config(None, ["algo.name='no_such_package.anywhere:ALGO'", "algo.options={ anything = 1 }"])
    assert config.algo.name == "no_such_package.anywhere:ALGO"  # imported (and refused) when a run starts


@pytest.mark.parametrize("name, message", [
    ("no_such_package.anywhere:ALGO", "cannot import 'no_such_package.anywhere': ModuleNotFoundError"),
    ("fastrl.algos.pqn:NOTHING", "module 'fastrl.algos.pqn' has no 'NOTHING'"),
    ("fastrl.algos.pqn:PQNOptions", "names type .*, not a fastrl Algorithm: a plug-in module defines NAME ="),
    ("fastrl.algos.pqn", "expected 'package.module:Name'"),
])
def test_a_broken_plugin_is_named_by_what_it_lacks(name, message):
    with pytest.raises(ConfigError, match=message):
        load_algorithm(name if ":" in name else name + ":")


def test_a_plugin_name_that_does_not_import_ends_the_run_with_exit_2_before_anything_starts(tmp_path):
    from fastrl.cli import main

    assert main(["train", "configs/cartpole_sync.toml", "--run-dir", str(tmp_path / "run"),
                 "--set", "algo.name='no_such_package.anywhere:ALGO'"]) == 2
    assert not (tmp_path / "run").exists()


@dataclass
class _Options:
    size: int = 3


@pytest.mark.parametrize("fields, message", [
    ({"name": "bad:name"}, "its name must be a plain word"),
    ({"name": "auto"}, "its name must be a plain word"),
    ({"lags": (2,)}, "lags must name the policy lags it learns at"),
    ({"lags": ()}, "lags must name the policy lags it learns at"),
    ({"metrics": tuple(f"m{i}" for i in range(9))}, "metrics must be at most 8 distinct names"),
    ({"metrics": ("a", "a")}, "metrics must be at most 8 distinct names"),
    ({"options": {"size": 3}}, "options must be a dataclass of its hyper-parameters"),
    ({"rule": 3}, "rule must be its UpdateRule class"),
    ({"sampler": 3}, "sampler must be a factory"),
])
def test_a_registration_that_breaks_the_contract_is_refused_naming_the_field(fields, message):
    base = {"name": "contract_probe", "rule": "fastrl.algos.update_rule:Collect", "lags": (0,)}
    with pytest.raises(ConfigError, match=message):
        register_algorithm(Algorithm(**{**base, **fields}))
    assert "contract_probe" not in registry.names()


def test_a_name_is_registered_once():
    first = register_algorithm(Algorithm("once_probe", "fastrl.algos.update_rule:Collect", lags=(0,), options=_Options))
    assert register_algorithm(first) is first  # the same registration again: harmless (a module imported twice)
    with pytest.raises(ConfigError, match="an algorithm named 'once_probe' is registered already"):
        register_algorithm(Algorithm("once_probe", "fastrl.algos.update_rule:Collect", lags=(1,)))
    assert fastrl.register_algorithm is register_algorithm and fastrl.Algorithm is Algorithm


def test_metrics_take_their_own_columns_or_the_extra_ones():
    assert metric_keys(load_algorithm("ppo")) == {"clip": Stat.CLIP, "clip_fraction": Stat.CLIP_FRACTION,
                                                   "approx_kl": Stat.APPROX_KL, "epochs_done": Stat.EXTRA_0}
    assert metric_keys(load_algorithm("pqn")) == {"epsilon": Stat.EXTRA_0, "q_mean": Stat.EXTRA_0 + 1}
    assert metric_keys(load_algorithm("a2c")) == {}
