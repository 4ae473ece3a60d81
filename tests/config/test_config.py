import dataclasses
from pathlib import Path

import pytest

from fastrl.api import resolve_config
from fastrl.config import Config, ConfigError, field_docs, load_config, parse_override, reference_markdown
from fastrl.runs.run_dir import to_toml

pytestmark = pytest.mark.unit  # the fast tier: no engine run

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.toml"))


def test_defaults_are_valid():
    config = load_config()
    assert isinstance(config, Config)
    assert (config.engine.mode, config.algo.name) == ("sync", "ppo")  # the default job's


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_shipped_configs_load(path):
    load_config(path)


def _leaves(config, prefix: str = ""):
    """(dotted key, value) for every leaf field of a config."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            yield from _leaves(value, f"{prefix}{f.name}.")
        else:
            yield f"{prefix}{f.name}", value


def test_default_config_is_pong_sync_as_shipped():
    """`fastrl train` with no config and configs/pong_sync.toml are the same job, every key of it."""
    shipped = dict(_leaves(load_config(Path(__file__).resolve().parents[2] / "configs" / "pong_sync.toml")))
    default = dict(_leaves(resolve_config(None)))
    assert shipped.keys() == default.keys()
    differ = {key: (default[key], shipped[key]) for key in default if default[key] != shipped[key]}
    assert not differ, f"(built-in default, pong_sync.toml) differ: {differ}"


def test_unknown_key_suggests_the_close_one():
    with pytest.raises(ConfigError, match=r"unknown config key 'engine.envz'; did you mean 'engine.envs'"):
        load_config(None, ["engine.envz=4"])


def test_unknown_section():
    with pytest.raises(ConfigError, match="unknown config key 'enigne'; did you mean 'engine'"):
        load_config(None, ["enigne.envs=4"])


@pytest.mark.parametrize(
    "override, message",
    [
        ("engine.envs=0", r"engine.envs = 0: must be >= 1"),
        ("engine.envs='eight'", r"engine.envs = 'eight': expected int, got str"),
        ("engine.rollout=0", r"engine.rollout = 0: must be >= 1"),
        ("algo.lr=-0.1", r"algo.lr = -0.1: must be > 0.0"),
        ("engine.mode='turbo'", r"engine.mode = 'turbo': allowed values are 'sync', 'hts', 'async', 'gala'"),
        ("engine.micro_batch=12", r"engine.micro_batch = 12: must be a multiple of 8"),
        ("engine.serial=1", r"engine.serial = 1: expected bool, got int"),
        ("engine.start_method='fork'", r"engine.start_method = 'fork': allowed values are 'forkserver', 'spawn'"),
        ("engine.actors=20", r"engine.actors = 20 is more than engine.envs = 16"),
        ("engine.executors=17", r"engine.executors = 17 is more than engine.envs = 16"),
        ("model.hidden=[64, 'x']", r"model.hidden\[1\] = 'x': expected int"),
    ],
)
def test_bad_values_name_the_key_and_what_is_allowed(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])


def test_override_values_are_read_as_toml_then_as_strings():
    assert parse_override("algo.lr=3e-4") == {"algo": {"lr": 3e-4}}
    assert parse_override("env.id=CartPole-v1") == {"env": {"id": "CartPole-v1"}}
    assert parse_override("model.hidden=[32, 32]") == {"model": {"hidden": [32, 32]}}
    with pytest.raises(ConfigError, match="expected key=value"):
        parse_override("engine.envs")


def test_ints_are_accepted_for_floats():
    assert load_config(None, ["algo.lr=1"]).algo.lr == 1.0


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml")


def test_invalid_toml_is_a_clear_error(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("[engine\nenvs = 3")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(path)


def test_resolved_config_round_trips_through_toml(tmp_path):
    config = load_config(None, ["engine.envs=4", "env.kwargs={ a = 1 }", "model.hidden=[8]"])
    path = tmp_path / "config.toml"
    path.write_text(to_toml(config.to_dict()))
    assert load_config(path) == config


def test_every_key_is_documented():
    rows = field_docs()
    assert {"env.id", "engine.mode", "engine.envs", "engine.executors", "engine.actors", "algo.name", "algo.lr",
            "run.seed", "run.total_frames"} <= {key for key, _, _ in rows}
    assert all(doc for _, _, doc in rows)


def test_the_config_reference_page_is_current():
    page = Path(__file__).resolve().parents[2] / "docs" / "config-reference.md"
    assert page.read_text(encoding="utf-8") == reference_markdown(), (
        "docs/config-reference.md is stale: run `fastrl config --markdown > docs/config-reference.md`")


def test_the_config_reference_lists_every_key_once_with_its_rules():
    page = reference_markdown()
    for key, _, _ in field_docs():
        assert page.count(f"| `{key}` |") == 1, key
    assert '| `engine.mode` | `"sync"` | `"sync"`, `"hts"`, `"async"`, `"gala"` |' in page
    assert '| `engine.micro_batch` | `"auto"` | >= 8, <= 65536, a multiple of 8, or `"auto"` |' in page
