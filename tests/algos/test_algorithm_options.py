"""An algorithm's own hyper-parameters are its typed options (``[algo.options]``: PPO's, IMPALA's, PQN's), checked
as every key is and listed by ``fastrl config``; the ``[algo]`` keys they moved from still read, each with one
warning naming its new key (``fastrl.config.moved_keys``)."""
import dataclasses
import logging

import pytest

from fastrl.algos.impala_options import ImpalaOptions
from fastrl.algos.ppo_options import PPOOptions
from fastrl.algos.pqn_options import PQNOptions
from fastrl.algos.registry import load_algorithm, options_of
from fastrl.config import SHIPPED_CONFIGS, ConfigError, config_from_dict, load_config, reference_markdown
from fastrl.config.moved_keys import moved_algo_keys

pytestmark = pytest.mark.unit  # the fast tier: no engine run

OWN = {"ppo": PPOOptions, "impala": ImpalaOptions, "pqn": PQNOptions}
MODE = {"ppo": "sync", "impala": "async", "pqn": "sync"}
# a value other than the default for every moved key, as TOML
OTHER = {"clip": "0.2", "clip_schedule": "'linear'", "clip_final": "0.05", "clip_anneal_frames": "1000",
         "value_clip": "0.5", "target_kl": "0.01", "gae_lambda": "0.9", "normalize_advantages": "false",
         "rho_bar": "0.5", "c_bar": "0.75", "vtrace_lambda": "0.9"}


def _load(algo: str, *overrides: str):
    return load_config(None, [f"engine.mode='{MODE[algo]}'", f"algo.name='{algo}'", *overrides])


def _options(config):
    return options_of(load_algorithm(config.algo.name), config.algo.options)


def _warnings(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]


def test_fastrl_config_lists_each_algorithms_options_with_its_default(capsys):
    from fastrl.cli import main

    assert main(["config"]) == 0
    lines = capsys.readouterr().out.splitlines()
    page = reference_markdown()
    for name, cls in OWN.items():
        assert f"## `algo.options` of `{name}`" in page
        for field in dataclasses.fields(cls):
            key = f"algo.options.{field.name}"
            line = next(line for line in lines if line.split()[:1] == [key])
            assert f"{field.default!r}" in line and f" {name}: {field.metadata['doc'][:20]}" in line, line
            assert page.count(f"| `{key}` | ") == 1, key


def test_the_options_keep_the_defaults_the_algo_keys_had():
    # the default job's bits depend on them: the values [algo] held before they moved
    assert PPOOptions() == PPOOptions(clip=0.1, clip_schedule="constant", clip_final=0.1, clip_anneal_frames=0,
                                      value_clip=1.0, target_kl=0.0, gae_lambda=0.95, normalize_advantages=True)
    assert ImpalaOptions() == ImpalaOptions(rho_bar=1.0, c_bar=1.0, vtrace_lambda=1.0)
    assert {key for cls in (PPOOptions, ImpalaOptions) for key in (f.name for f in dataclasses.fields(cls))} == set(
        moved_algo_keys())


@pytest.mark.parametrize("key", sorted(moved_algo_keys()))
def test_an_old_key_reads_as_its_new_one_with_one_warning_naming_it(caplog, tmp_path, key):
    algo = moved_algo_keys()[key]
    with caplog.at_level(logging.WARNING, logger="fastrl.config"):
        old = _load(algo, f"algo.{key}={OTHER[key]}")
    assert _warnings(caplog) == [f"algo.{key} is deprecated: write algo.options.{key}"]
    new = _load(algo, f"algo.options.{key}={OTHER[key]}")
    assert old == new and old.algo.options == new.algo.options
    assert getattr(_options(old), key) != getattr(OWN[algo](), key)  # the value given, not the default
    # in a config file too
    path = tmp_path / "old.toml"
    path.write_text(f"[engine]\nmode = '{MODE[algo]}'\n[algo]\nname = '{algo}'\n{key} = {OTHER[key]}\n")
    assert load_config(path) == new


def test_the_shipped_configs_use_the_new_keys(caplog):
    with caplog.at_level(logging.WARNING, logger="fastrl.config"):
        for path in sorted(SHIPPED_CONFIGS.glob("*.toml")):
            load_config(path)
    assert _warnings(caplog) == []


def test_an_old_key_the_algorithm_has_no_option_of_is_ignored_as_it_was(caplog):
    with caplog.at_level(logging.WARNING, logger="fastrl.config"):
        config = load_config(None, ["algo.name='a2c'", "algo.clip=0.2", "algo.value_clip=0.0"])
    assert config == load_config(None, ["algo.name='a2c'"]) and config.algo.options == {}
    said = _warnings(caplog)
    assert "algo.clip is deprecated: write algo.options.clip" in said
    assert "algo.options.clip is an option of ppo; algo.name = 'a2c' leaves it out" in said


def test_a_checkpoints_config_from_before_reads_as_it_trained():
    # what a checkpoint of an earlier version holds: every [algo] key, PPO's and IMPALA's alike
    data = {"algo": {"name": "ppo", **{key: 0.5 for key in ("clip", "value_clip", "rho_bar", "c_bar")}}}
    config = config_from_dict(data)
    assert config.algo.options == {"clip": 0.5, "value_clip": 0.5}
    assert config_from_dict(config.to_dict()) == config  # and the config it writes now reads back the same


def test_a_plugin_not_imported_yet_gets_the_old_keys_in_its_options():
    config = load_config(None, ["algo.name='no_such_package.anywhere:ALGO'", "algo.clip=0.2"])
    assert config.algo.options == {"clip": 0.2}  # its options' check, when its run starts, names any it lacks


def test_a_key_set_both_ways_in_one_source_is_refused_naming_both():
    with pytest.raises(ConfigError, match="algo.clip and algo.options.clip are both set"):
        config_from_dict({"algo": {"clip": 0.2, "options": {"clip": 0.3}}})


def test_an_old_keys_set_overrides_the_files_new_key_as_a_later_source_does():
    """The default job's file writes algo.options.clip; a user's --set algo.clip=0.2 is the later word."""
    assert load_config("pong_sync", ["algo.clip=0.2"]).algo.options["clip"] == 0.2
    assert load_config(None, ["algo.clip=0.2", "algo.options.clip=0.3"]).algo.options["clip"] == 0.3


@pytest.mark.parametrize(("algo", "override", "named"), [
    ("ppo", "algo.options.clip=0", r"algo.options.clip = 0(\.0)?: must be > 0.0"),
    ("ppo", "algo.options.gae_lambda=1.5", r"algo.options.gae_lambda = 1.5: must be <= 1.0"),
    ("ppo", "algo.options.clip_schedule='cosine'", r"algo.options.clip_schedule = 'cosine': allowed values"),
    ("ppo", "algo.options.target_kl=-1", r"algo.options.target_kl = -1(\.0)?: must be >= 0.0"),
    ("ppo", "algo.clip=0", r"algo.options.clip = 0(\.0)?: must be > 0.0"),  # an old key's value: checked as its new one
    ("impala", "algo.options.rho_bar=0", r"algo.options.rho_bar = 0(\.0)?: must be > 0.0"),
    ("impala", "algo.options.vtrace_lambda=2", r"algo.options.vtrace_lambda = 2(\.0)?: must be <= 1.0"),
    ("pqn", "algo.options.epsilon_final=1.5", r"algo.options.epsilon_final = 1.5: must be <= 1.0"),
])
def test_an_option_out_of_range_is_refused_naming_it(algo, override, named):
    with pytest.raises(ConfigError, match=named):
        _load(algo, override)


@pytest.mark.parametrize(("algo", "override", "named"), [
    ("a2c", "algo.options.clipp=0.2", r"algo.name = 'a2c' takes no options of its own"),
    ("impala", "algo.options.clipp=0.2", "unknown config key 'algo.options.clipp'"),
    ("ppo", "algo.options.rho_barr=0.5", "unknown config key 'algo.options.rho_barr'"),
])
def test_an_option_no_algorithm_takes_is_refused(algo, override, named):
    with pytest.raises(ConfigError, match=named):
        load_config(None, [f"engine.mode='{MODE.get(algo, 'sync')}'", f"algo.name='{algo}'", override])


@pytest.mark.parametrize(("algo", "override", "owner"), [
    ("a2c", "algo.options.clip=0.2", "ppo"),
    ("impala", "algo.options.clip=0.2", "ppo"),
    ("ppo", "algo.options.rho_bar=0.5", "impala"),
    ("pqn", "algo.options.gae_lambda=0.9", "ppo"),
])
def test_another_algorithms_option_is_ignored_with_a_warning(algo, override, owner, caplog):
    """A config of one algorithm run with another (``--set algo.name=...``, a mode whose default differs) keeps its
    [algo.options]: the keys the run's algorithm does not take and another does are named and left out."""
    key = override.split("=")[0]
    with caplog.at_level("WARNING", logger="fastrl.config"):
        config = load_config(None, [f"engine.mode='{MODE.get(algo, 'sync')}'", f"algo.name='{algo}'", override])
    assert f"{key} is an option of {owner}; algo.name = '{algo}' leaves it out" in caplog.text
    assert key.rsplit(".", 1)[1] not in config.algo.options
    options = options_of(load_algorithm(algo), config.algo.options)
    assert options is None or not hasattr(options, key.rsplit(".", 1)[1])
