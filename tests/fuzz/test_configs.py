"""Family 1, configs: every key of the schema given values of the wrong type, out of range and at the edges, keys
misspelt, sections unknown or repeated, whole TOML documents and ``--set`` lines generated. Each is decided at the
config check (a Config or a ConfigError naming what is wrong, no process started), and a config the check accepts
starts and runs a few hundred frames."""

import tempfile
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import fastrl
from fastrl.config import Config, config_from_dict, load_config, tomllib
from fastrl.process.run_plan import plan_run
from fastrl.runs.run_dir import to_toml
from tests.fuzz.cases import fuzz, record
from tests.fuzz.checks import assert_nothing_left, breach, command, outcome
from tests.fuzz.strategies import (
    LEAVES,
    Leaf,
    config_tables,
    leaf_and_bad_value,
    merge,
    nested,
    set_lines,
    toml,
    toml_documents,
    valid,
)
from tests.helpers.leftovers import shm_entries
from tests.helpers.runs import cartpole

pytestmark = pytest.mark.unit
FAMILY = "configs"


def _owner_settings(leaf: Leaf) -> dict:
    """An algorithm's option is read only when that algorithm runs: name it, in a mode that takes it."""
    if leaf.owner is None:
        return {}
    from fastrl.algos import registry

    lags = registry.known(leaf.owner).lags
    mode = "sync" if 0 in lags else "hts" if 1 in lags else "async"
    return {"algo": {"name": leaf.owner}, "engine": {"mode": mode}}


def _round_trips(config: Config) -> None:
    """An accepted config's config.toml is written and read back the same (the run directory repeats the run)."""
    text = to_toml(config.to_dict())
    if to_toml(config_from_dict(tomllib.loads(text)).to_dict()) != text:
        raise breach(FAMILY, "round_trip", text)


@fuzz(sample=60, full=3000)
@given(leaf_and_bad_value())
@example((next(leaf for leaf in LEAVES if leaf.key == "engine.envs"), 2**63))
def test_a_bad_value_of_any_key_is_refused_naming_the_key(case):
    """One key of the schema given a value its type or rules refuse, as a table and as a ``--set`` line: refused,
    the message naming the key."""
    leaf, value = case
    data = merge(_owner_settings(leaf), nested(leaf.key, value))
    kind, _ = outcome(FAMILY, lambda: config_from_dict(data), refused_names=leaf.key)
    if kind != "refused":
        raise breach(FAMILY, "accepted_bad", f"{leaf.key} = {value!r} was accepted")
    sets = [f"{k}={toml(v)}" for k, v in _flat(_owner_settings(leaf))] + [f"{leaf.key}={toml(value)}"]
    # TOML has no null; a --set value that is no TOML is read as a string, which a str key takes
    if "None" not in repr(value) and (leaf.concrete is not str or _toml_holds(value)):
        kind, _ = outcome(FAMILY, lambda: load_config(None, sets), refused_names=leaf.key.rsplit(".", 1)[-1])
        if kind != "refused":
            raise breach(FAMILY, "accepted_bad", f"--set {sets} was accepted")


def _toml_holds(value) -> bool:
    """The value as a --set line writes it parses as TOML (no null, no lone surrogate)."""
    try:
        tomllib.loads(f"v = {toml(value)}")
    except (tomllib.TOMLDecodeError, AssertionError):
        return False
    return True


def _flat(data: dict, prefix: str = ""):
    for key, value in data.items():
        if isinstance(value, dict):
            yield from _flat(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


@fuzz(sample=60, full=3500)
@given(config_tables())
def test_generated_tables_give_a_config_or_a_named_refusal(data):
    kind, config = outcome(FAMILY, lambda: config_from_dict(data))
    if kind == "accepted":
        _round_trips(config)


@fuzz(sample=40, full=2500)
@given(toml_documents(), set_lines())
@example('["env"]\n"id" = "\ud800"\n', [])  # found: a file not UTF-8 was a UnicodeDecodeError's traceback
def test_generated_files_and_set_lines_are_decided_at_the_check(tmp_path_factory, text, sets):
    path = tmp_path_factory.mktemp("doc") / "config.toml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    kind, config = outcome(FAMILY, lambda: load_config(path, sets))
    if kind == "accepted":
        _round_trips(config)


@fuzz(sample=10, full=300)
@given(toml_documents(), set_lines())
def test_the_command_refuses_bad_configs_with_exit_2_before_starting(tmp_path_factory, text, sets):
    """``fastrl train FILE --set ...`` of a config the check refuses: exit 2, ``fastrl: bad config:``, no run
    directory, no process."""
    tmp = tmp_path_factory.mktemp("cmd")
    path = tmp / "config.toml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        load_config(path, sets)
    except fastrl.ConfigError:
        pass
    else:
        return  # accepted configs run in the test below, on a small budget
    shm = shm_entries()
    argv = ["train", str(path), "--run-dir", str(tmp / "run")]
    for line in sets:
        argv += ["--set", line]
    code, _, err = command(FAMILY, *argv)
    if code != 2 or "fastrl: bad config:" not in err or (tmp / "run").exists():
        raise breach(FAMILY, "exit", f"{argv}: exit {code}, {err!r}")
    assert_nothing_left(FAMILY, shm)


# the keys a small run may be given any small value of; the rest keep the CartPole run's (the env, its model, the
# run's folder, budget and time)
HELD = ("env.id", "env.kwargs", "env.backend", "model.name", "model.kwargs", "run.dir", "run.total_frames",
        "run.max_seconds", "run.wandb", "engine.device", "engine.actor_device", "engine.step_delay_s",
        "engine.start_method", "engine.mode", "engine.learners", "algo.name", "algo.options", "run.target_return")
RUNNABLE = [leaf for leaf in LEAVES if leaf.key not in HELD and "." in leaf.key and not leaf.key.startswith(
    ("algo.options.", "dist.", "selfplay.", "multiagent."))]


@st.composite
def small_runs(draw):
    """A CartPole run with up to 6 keys of the schema at small values their rules allow."""
    sets = []
    for leaf in draw(st.lists(st.sampled_from(RUNNABLE), max_size=6, unique_by=lambda leaf: leaf.key)):
        sets.append(f"{leaf.key}={toml(draw(valid(leaf, small=True)))}")
    mode = draw(st.sampled_from(["sync", "hts"]))
    serial = draw(st.sampled_from(["true"] * 7 + ["false"]))  # processes: a few seconds a case
    return mode, [f"engine.serial={serial}", *sets]


@pytest.mark.engine
@fuzz(sample=5, full=150)
@given(small_runs(), st.integers(200, 400))
@example(("sync", ["engine.serial=true", "engine.envs=1", "engine.executors=1"]), 200)
@example(("sync", ["engine.serial=false", "engine.core_rotation_s=5e-324"]), 200)  # found: an executor's OverflowError
def test_a_config_the_check_accepts_runs_a_few_hundred_frames(tmp_path_factory, case, frames):
    mode, sets = case
    tmp = tmp_path_factory.mktemp("run")
    _, base = cartpole(tmp, f"run.total_frames={frames}", "run.max_seconds=120", mode=mode)
    overrides = [*base, *sets]
    shm = shm_entries()
    kind, config = outcome(FAMILY, lambda: load_config(None, overrides))
    if kind != "accepted":
        return
    try:
        plan_run(config)
    except fastrl.ConfigError:
        record(FAMILY, "refused_at_plan")
        return
    run_dir = Path(tempfile.mkdtemp(dir=tmp)) / "run"
    kind, summary = outcome(FAMILY, lambda: fastrl.train(None, overrides, run_dir=run_dir))
    if kind == "refused":
        if run_dir.exists():
            raise breach(FAMILY, "damaged", f"a refused run wrote {run_dir}")
    elif kind == "run_failed" and "non-finite" in str(summary):
        # an allowed value at its edge (algo.eps = 5e-324 with RMSprop) may end the run on non-finite parameters:
        # a clean fault (exit 1, restored parameters), counted apart; the schema's bounds stay as they are
        record(FAMILY, "run_failed_non_finite")
    elif kind != "accepted" or summary["status"] != "complete" or summary["frames"] < frames:
        raise breach(FAMILY, "did_not_run", f"{overrides}: {kind} {summary}")
    assert_nothing_left(FAMILY, shm)
