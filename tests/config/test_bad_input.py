"""Bad input gets a clear error before any worker starts (exit code 2 from the command).

Property tests feed random and mutated configs: the answer is a valid config (and a run that
completes) or a ``ConfigError`` with a message, never another exception from deep inside.
"""
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastrl
from fastrl.config import (
    Config,
    ConfigError,
    config_from_dict,
    field_docs,
    load_config,
    tomllib,  # noqa: I001  (tomli on Python 3.10)
)
from fastrl.process.faults import RunFailed
from fastrl.process.run_plan import plan_run
from fastrl.runs.run_dir import to_toml
from tests.helpers.runs import cartpole

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

ROOT = Path(__file__).resolve().parents[2]
KEYS = [key for key, _, _ in field_docs()]
SECTIONS = sorted({key.split(".")[0] for key in KEYS})
CONFIGS = sorted((ROOT / "configs").glob("*.toml"))


def _typo(key: str, draw) -> str:
    i = draw(st.integers(0, len(key) - 1))
    return key[:i] + draw(st.sampled_from("aeiouxz._")) + key[i + 1 :]


TOML_VALUES = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.booleans().map(lambda b: str(b).lower()),
    st.text(max_size=16).map(json.dumps),
    st.text(max_size=10),  # not TOML: read as a plain string
    st.lists(st.integers(-5, 300), max_size=4).map(str),
    st.sampled_from(["{ a = 1 }", "[1, 'x']", "1979-05-27", "{}", "[]", "'CartPole-v1'", "'sync'", "'hts'",
                     "'reset'", "0", "-1", "8", "16", "0.0", "1e-3", "nan", "inf", "{ when = 1979-05-27 }"]),
)
PY_VALUES = st.one_of(
    st.none(), st.integers(-(2**70), 2**70), st.floats(), st.booleans(), st.text(max_size=8), st.just("\ud800"),
    st.lists(st.integers(-3, 100), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@st.composite
def overrides(draw):
    """Up to 6 ``key=value`` overrides: known keys, sections, misspelt keys, random text; TOML-ish values."""
    out = []
    for _ in range(draw(st.integers(0, 6))):
        key = draw(st.one_of(st.sampled_from(KEYS), st.sampled_from(SECTIONS), st.text(max_size=12)))
        if draw(st.integers(0, 4)) == 0:
            key = _typo(key or "x", draw)
        out.append(f"{key}={draw(TOML_VALUES)}")
    return out


def _assert_clean(call):
    """``call()`` gives a Config (returned) or a ConfigError with a message (None)."""
    try:
        config = call()
    except ConfigError as exc:
        assert str(exc).strip()
        return None
    assert isinstance(config, Config)
    text = to_toml(config.to_dict())  # the run dir's config.toml must be writable and read back the same
    assert to_toml(config_from_dict(tomllib.loads(text)).to_dict()) == text
    return config


@settings(max_examples=300, deadline=None)
@given(overrides())
def test_random_overrides_give_a_config_or_a_config_error(overrides):
    _assert_clean(lambda: load_config(None, overrides))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(CONFIGS), st.data())
def test_mutated_shipped_configs_give_a_config_or_a_config_error(path, data):
    config = tomllib.loads(path.read_text())
    for _ in range(data.draw(st.integers(1, 3))):
        section = data.draw(st.sampled_from(sorted(config)))
        table = config[section] if isinstance(config[section], dict) else config
        key = data.draw(st.sampled_from(sorted(table) or [section]))
        action = data.draw(st.sampled_from(["value", "delete", "typo", "table"]))
        if action == "value":
            table[key] = data.draw(PY_VALUES)
        elif action == "delete":
            table.pop(key, None)
        elif action == "typo":
            table[_typo(key or "x", data.draw)] = table.pop(key, 1)  # a table may hold an empty key
        else:
            config[section] = data.draw(PY_VALUES)
    _assert_clean(lambda: config_from_dict(config))


SMALL_RUN = st.lists(
    st.one_of(
        st.integers(1, 8).map(lambda n: f"engine.envs={n}"),
        st.integers(1, 6).map(lambda n: f"engine.rollout={n}"),
        st.integers(1, 3).map(lambda n: f"engine.executors={n}"),
        st.integers(1, 3).map(lambda n: f"engine.actors={n}"),
        st.integers(1, 3).map(lambda n: f"engine.env_groups={n}"),
        st.sampled_from(["engine.inline_actors=true", "engine.mode='sync'", "engine.mode='hts'", "engine.device='cuda'",
                         "model.name='random'", "model.name='nature'", "model.hidden=[]", "model.hidden=[3]",
                         "algo.optimizer='adam'", "algo.optimizer='sgd'", "algo.max_grad_norm=0", "algo.name='none'",
                         "algo.gamma=0", "algo.entropy_coef=1.5", "run.seed=12345678901", "env.on_error='reset'",
                         "engine.micro_batch=8", "model.name='nope:nothing'", "env.kwargs={ x = 1 }"]),
    ),
    max_size=6,
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(SMALL_RUN)
def test_valid_small_configs_run(tmp_path, overrides):
    """Random small configs: a clean ConfigError before anything starts, or a run that completes."""
    _, base = cartpole(tmp_path, "engine.serial=true", "run.total_frames=48", *overrides)
    config = _assert_clean(lambda: load_config(None, base))
    if config is None:
        return
    try:
        plan_run(config)
    except ConfigError as exc:
        assert str(exc).strip()
        return
    summary = fastrl.train(config, run_dir=tempfile.mkdtemp(dir=tmp_path))  # a run directory per example
    assert summary["status"] == "complete"


@pytest.mark.parametrize(
    "env_id, message",
    [
        ("tests.helpers.faulty_envs:tuple_actions", "action space Tuple(Discrete(2), Discrete(2)) is not supported"),
        ("tests.helpers.faulty_envs:text_observations", "is not supported; an observation is a Box, or a Dict or"),
        ("tests.nope:make", "cannot import module 'tests.nope'"),
        ("tests.helpers.faulty_envs:nope",
         "module 'tests.helpers.faulty_envs' has no attribute 'nope' and registers no gymnasium id"),
        ("tests.helpers.faulty_envs:not_an_env",
         "the factory returned object, neither a gymnasium.Env nor an env adapter: it lacks attribute 'obs_shape'"),
        ("tests.helpers.faulty_envs:wrong_shape_at_start",
         "at start: observation of shape (5,); the observation space declares (4,)"),
    ],
)
def test_unusable_envs_are_config_errors(tmp_path, env_id, message):
    config, base = cartpole(tmp_path, f"env.id='{env_id}'")
    with pytest.raises(ConfigError) as info:
        fastrl.train(config, base, run_dir=tmp_path / "run")
    assert message in str(info.value)
    assert not (tmp_path / "run").exists()  # nothing was started or written


@pytest.mark.parametrize(
    "fault, message",
    [
        ("wrong_shape", "returned observation of shape (5,); the observation space declares (4,)"),
        ("nan_obs", "returned a non-finite observation value (nan at index (2,))"),
        ("reward_shape", "returned a reward of shape (2,); expected a scalar"),
        ("inf_reward", "returned a non-finite reward (inf)"),
    ],
)
def test_bad_env_output_mid_run_names_the_env_step_and_action(tmp_path, fault, message):
    config, base = cartpole(tmp_path, "env.id='tests.helpers.faulty_envs:cartpole'",
                            f"env.kwargs={{ fault = '{fault}', at = 12 }}", "engine.serial=true")
    with pytest.raises(RunFailed) as info:
        fastrl.train(config, base, run_dir=tmp_path / "run")
    assert message in str(info.value)
    assert "env 'tests.helpers.faulty_envs:cartpole' #0 on executor-0" in str(info.value)
    assert "in step(action=" in str(info.value) and "(rollout 2)" in str(info.value)


def test_buffers_that_do_not_fit_say_how_much_and_which_knob(tmp_path):
    with pytest.raises(ConfigError, match=r"need [\d.]+ GiB of shared memory, but .* has [\d.]+ GiB free .* lower "
                                          r"engine.envs or engine.rollout"):
        fastrl.train(None, ["engine.rollout=1000000", f"run.dir='{tmp_path}'"])


def test_cuda_without_a_gpu_is_a_config_error(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    config, base = cartpole(tmp_path, "engine.device='cuda'")
    with pytest.raises(ConfigError, match="torch sees no CUDA device"):
        fastrl.train(config, base)


def test_the_command_exits_2_on_an_unsupported_env(tmp_path, in_process):
    assert in_process("train", "--set", "env.id='tests.helpers.faulty_envs:tuple_actions'",
                      "--set", f"run.dir='{tmp_path}'") == 2
    assert "fastrl: bad config: env 'tests.helpers.faulty_envs:tuple_actions': action space Tuple" in in_process.err
    assert "Traceback" not in in_process.err


@pytest.mark.parametrize(("at", "raised"), [(1, ConfigError), (4, RunFailed)])
def test_integers_a_uint8_observation_cannot_hold_are_named_not_wrapped(tmp_path, at, raised):
    """300 in an observation declared uint8 would be stored as 44: refused at start (the probe's step) or
    mid-run, naming the value and the index."""
    config, base = cartpole(tmp_path, "env.id='tests.helpers.faulty_envs:wide_ints'", f"env.kwargs={{at={at}}}",
                            "engine.serial=true", "run.total_frames=80")
    with pytest.raises(raised, match=r"observation value 300 at index \(1,\) does not fit the uint8 the observation "
                                     r"space declares \(0..255\)"):
        fastrl.train(config, base, run_dir=tmp_path / "run")
