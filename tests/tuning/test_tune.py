"""``fastrl tune``: Optuna studies whose objective is a config's time to a score."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fastrl.cli import main
from fastrl.config import ConfigError, tomllib  # tomli on Python 3.10
from fastrl.tuning.params import parse_param
from fastrl.tuning.study import median_pruner, seed_score

CARTPOLE = "configs/cartpole_ppo.toml"
STUDY = ["--target", "60", "--max-minutes", "0.4", "--window", "10", "--prune-every-frames", "0",
         "--param", "algo.lr=loguniform:3e-4:3e-3", "--set", "engine.executors=1", "--set", "engine.envs=8"]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("algo.lr", r"'algo.lr': expected KEY=loguniform:LOW:HIGH \| uniform"),
        ("algo.lr=normal:1:2", r"algo.lr's kind 'normal' is not one of loguniform, uniform, int, intlog, choice"),
        ("algo.lr=loguniform:0:1", r"algo.lr's loguniform range must be above 0"),
        ("algo.lr=uniform:2:1", r"algo.lr needs uniform:LOW:HIGH with numbers LOW < HIGH"),
        ("algo.epochs=int:1.5:4", r"algo.epochs's int bounds must be whole numbers"),
        ("algo.lr_schedule=choice:linear", r"algo.lr_schedule's choices must be TOML values"),
        ("algo.lr_schedule=choice:'linear'", r"algo.lr_schedule needs at least two choices"),
        ("lr=uniform:0:1", r"'lr=uniform:0:1': expected KEY="),
    ],
)
def test_a_bad_param_is_refused_naming_the_key_and_the_grammar(text, match):
    with pytest.raises(ConfigError, match=match):
        parse_param(text)


@pytest.mark.unit
def test_params_draw_what_their_grammar_says():
    assert parse_param("algo.epochs=int:2:4").override(3) == "algo.epochs=3"
    spec = parse_param("algo.lr_schedule=choice:'linear','constant'")
    assert spec.choices == ("linear", "constant") and spec.override("constant") == "algo.lr_schedule='constant'"
    assert parse_param("algo.lr=loguniform:1e-4:1e-3").low == 1e-4
    # an algorithm's own option, a nested table's key
    assert parse_param("algo.options.clip=uniform:0.08:0.25").override(0.1) == "algo.options.clip=0.1"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("param", "match"),
    [
        ("algo.nope=uniform:0:1", r"--param algo.nope: .*nope"),  # no such key: the config's own error
        ("algo.epochs=int:0:3", r"--param algo.epochs: .*epochs"),  # a range end the config refuses
        ("run.seed=int:0:9", r"--param run.seed: set by fastrl tune itself"),
    ],
)
def test_a_param_the_config_refuses_ends_the_command_before_any_trial(tmp_path, capsys, param, match):
    code = main(["tune", CARTPOLE, "--param", param, "--target", "60", "--max-minutes", "1",
                 "--study", str(tmp_path / "study")])
    assert code == 2
    import re

    assert re.search(match, capsys.readouterr().err)
    assert not (tmp_path / "study" / "study.db").exists()


@pytest.mark.unit
def test_negative_startup_trials_are_refused_naming_the_option(tmp_path, capsys):
    code = main(["tune", CARTPOLE, "--param", "algo.lr=loguniform:3e-4:3e-3", "--target", "60", "--max-minutes", "1",
                 "--startup-trials", "-1", "--study", str(tmp_path / "study")])
    assert code == 2
    assert "--startup-trials -1: expected 0 or more trials" in capsys.readouterr().err


@pytest.mark.unit
def test_fewer_startup_trials_let_tpe_model_the_search_sooner():
    """Optuna's TPE draws its first ten trials at random: a twenty-trial study with --startup-trials 2 closes
    in on a quadratic's minimum over its last ten trials, where the all-random one does not."""
    optuna = pytest.importorskip("optuna")
    from fastrl.tuning.study import TuneOptions, tpe_sampler

    optuna.logging.set_verbosity(optuna.logging.WARNING)

    def late_distance(startup: int) -> float:
        total = 0.0
        for seed in range(3):
            options = TuneOptions(config=None, params=(), study_dir=Path("."), target=1.0, max_minutes=1.0,
                                  sampler_seed=seed, startup_trials=startup)
            study = optuna.create_study(sampler=tpe_sampler(options))
            study.optimize(lambda t: (t.suggest_float("x", 0.0, 1.0) - 0.9) ** 2, n_trials=20)
            total += sum(abs(t.params["x"] - 0.9) for t in study.trials[10:]) / 10
        return total / 3

    assert late_distance(2) < 0.7 * late_distance(20)


@pytest.mark.unit
def test_a_seed_that_misses_counts_its_cap_and_its_gap():
    reached = {"reached": True, "wall_s": 42.0, "curve": []}
    assert seed_score(reached, 18.0, 600.0) == 42.0
    near = {"reached": False, "wall_s": None, "curve": [{"return_mean": 17.0}, {"return_mean": 9.0}]}
    far = {"reached": False, "wall_s": None, "curve": [{"return_mean": -21.0}]}
    assert 600.0 < seed_score(near, 18.0, 600.0) < seed_score(far, 18.0, 600.0)


@pytest.mark.unit
def test_the_pruner_never_stops_a_trial_at_its_first_mark_and_does_at_its_second():
    """A Pong study (2026-11-28) pruned four trials of ten at 0.27M frames, its first mark, at -20.5 to -18.6:
    the warm-up ended one mark early."""
    optuna = pytest.importorskip("optuna")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    every = 250_000
    study = optuna.create_study(direction="minimize", pruner=median_pruner(every))
    for _ in range(2):  # two finished trials that scored well at both marks
        done = study.ask()
        done.report(-10.0, step=every)
        done.report(-15.0, step=2 * every)
        study.tell(done, 100.0)
    behind = study.ask()
    behind.report(20.0, step=every)
    assert not behind.should_prune()
    behind.report(20.0, step=2 * every)
    assert behind.should_prune()


@pytest.mark.slow  # ~30 s, the default run's longest; it once saw no Ctrl-C land mid-trial (exit 0, 2026-11-26)
def test_a_cartpole_study_finds_a_config_that_reaches_the_target_and_goes_on_after_a_stop(tmp_path):
    """The study is stopped (Ctrl-C) while its first trial trains; the same command goes on, runs that trial
    again and ends with two finished trials, a table and a best.toml that fastrl train takes."""
    study = tmp_path / "study"
    argv = [sys.executable, "-m", "fastrl", "tune", CARTPOLE, *STUDY, "--trials", "2", "--study", str(study)]
    first = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (study / "trial-0000" / "seed-0" / "metrics.jsonl").is_file() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert first.poll() is None, f"the study ended before its first trial's metrics were seen: {first.communicate()}"
    first.send_signal(signal.SIGINT)
    out, err = first.communicate(timeout=120)
    assert first.returncode == 130, (out, err)
    assert "run the same command again" in err
    again = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout.splitlines()[-1])
    assert summary["complete"] == 2 and summary["best"]["seeds"][0]["reached"]
    rows = list(csv.DictReader(open(study / "trials.csv")))
    assert [r["state"] for r in rows].count("complete") == 2
    assert rows[0]["state"] == "fail" and rows[1]["algo.lr"] == rows[0]["algo.lr"]  # the cut trial, run again
    best = tomllib.loads((study / "best.toml").read_text())
    assert best["algo"]["lr"] == summary["best"]["params"]["algo.lr"]
    assert best["env"]["id"] == "CartPole-v1"
