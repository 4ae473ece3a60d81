"""Family 2, the command line: every subcommand of ``fastrl``'s own parser (``fastrl.cli.build_parser``) with
generated options and paths: missing, a file for a folder, a folder for a file, a run directory given to a new run,
a shipped config's name, under a file, very long. Each answers with exit 0, 1 or 2 and no traceback, and leaves
the user's file and the existing run as they were (a resume that went on aside)."""

import argparse
import shutil

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import fastrl
from fastrl.cli import build_parser
from fastrl.config import shipped_configs
from tests.fuzz.cases import fuzz
from tests.fuzz.checks import assert_nothing_left, assert_unchanged, command, tree_digest
from tests.fuzz.strategies import set_lines
from tests.helpers.runs import cartpole

pytestmark = pytest.mark.engine
FAMILY = "cli"
# cleanup acts on the whole machine's dead runs, bench and tune start long measurements: their own tests
LEFT_OUT = ("cleanup", "bench", "tune")
# what every train case adds last, so that a run that starts is small and in this case's folder
SMALL = ["run.total_frames=160", "engine.serial=true", "run.progress=false", "engine.envs=2", "engine.rollout=8"]


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser(with_benches=False)
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: sub for name, sub in action.choices.items() if name not in LEFT_OUT}


SUBCOMMANDS = _subparsers()
PATH_KINDS = ("missing", "user_file", "folder", "run", "under_file", "long", "shipped")


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    _, overrides = cartpole(tmp, "engine.serial=true", "run.total_frames=160")
    fastrl.train(None, overrides, run_dir=tmp / "run")
    return tmp


def _path(kind: str, case, draw) -> str:
    return {
        "missing": str(case / "missing" / "x"),
        "user_file": str(case / "notes.txt"),
        "folder": str(case / "empty"),
        "run": str(case / "run"),
        "under_file": str(case / "notes.txt" / "x"),
        "long": str(case / ("ü" * 300)),
        "shipped": draw(st.sampled_from(shipped_configs())),
    }[kind]


def _value(action: argparse.Action, case, draw):
    if action.choices:
        return draw(st.one_of(st.sampled_from(list(action.choices)), st.text(min_size=1, max_size=8)))
    if action.type is int:
        return str(draw(st.one_of(st.integers(-3, 3), st.sampled_from([2**63, -(2**63)]))))
    if action.type is float:
        return draw(st.sampled_from(["nan", "inf", "-1", "0", "1e309"]))
    return _path(draw(st.sampled_from(PATH_KINDS)), case, draw)


@st.composite
def argvs(draw, case):
    name = draw(st.sampled_from(sorted(SUBCOMMANDS)))
    argv = [name]
    for action in SUBCOMMANDS[name]._actions:
        if isinstance(action, argparse._HelpAction) or (not action.required and not draw(st.booleans())):
            continue
        if action.option_strings:
            flag = action.option_strings[-1]
            if action.nargs == 0:
                argv.append(flag)
            elif flag == "--set":
                for line in draw(set_lines()):
                    argv += [flag, line]
            else:
                argv += [flag, _value(action, case, draw)]
        elif action.nargs in ("+", "*"):
            argv += [_value(action, case, draw) for _ in range(draw(st.integers(1, 2)))]
        else:
            argv.append(_value(action, case, draw))
    if name == "train":
        fresh = "--resume" not in argv
        for line in SMALL + ([f"run.dir='{case}/runs'", "env.id='CartPole-v1'", "model.name='mlp'"] if fresh else []):
            argv += ["--set", line]
    if name == "eval":
        argv += ["--episodes", "1", "--max-steps", "10"]
    return argv


@fuzz(sample=3, full=100)
@given(st.data())
@example(None)
def test_every_subcommand_with_generated_options_answers_cleanly(places, tmp_path_factory, monkeypatch, data):
    case = tmp_path_factory.mktemp("case")
    shutil.copytree(places / "run", case / "run", symlinks=True)
    (case / "notes.txt").write_text("a user's file\n")
    (case / "empty").mkdir()
    monkeypatch.chdir(case)  # plot's default PNG and the like land here
    argv = ["train", "--run-dir", str(case / "run")] + [a for s in SMALL for a in ("--set", s)] if data is None \
        else data.draw(argvs(case))
    before_run, before_file = tree_digest(case / "run"), (case / "notes.txt").read_bytes()
    code, _, _ = command(FAMILY, *argv)
    if (case / "notes.txt").is_file() and (case / "notes.txt").read_bytes() != before_file:
        assert_unchanged(FAMILY, {"notes": "x"}, case / "notes.txt", f"the user's file after {argv}")
    resumed = argv[0] == "train" and "--resume" in argv and code == 0
    if not resumed and "--out" not in argv:
        for default_output in {"plot": ["plot.png"], "export": ["policy.onnx", "policy.pt"]}.get(argv[0], []):
            (case / "run" / default_output).unlink(missing_ok=True)  # what the command writes into RUN by default
        assert_unchanged(FAMILY, before_run, case / "run", f"the run after {argv} (exit {code})")
    assert_nothing_left(FAMILY)


@pytest.mark.parametrize("name", ["eval", "export", "plot"])
def test_a_path_too_long_for_the_file_system_is_bad_input(tmp_path, name):
    """Found: ``fastrl eval DIR/üüü...`` (a name over 255 bytes) was an OSError's traceback."""
    code, _, err = command(FAMILY, name, str(tmp_path / ("ü" * 300)))
    assert code == 2 and "too long" in err


def test_eval_on_an_env_id_no_backend_makes_is_bad_input(places, tmp_path):
    """Found: ``fastrl eval RUN --env PATH`` (no env fastrl can make) was an UnsupportedEnvError's traceback."""
    code, _, err = command(FAMILY, "eval", str(places / "run"), "--env", str(tmp_path / "missing"), "--episodes", "1")
    assert code == 2 and "is not a registered gymnasium env" in err

