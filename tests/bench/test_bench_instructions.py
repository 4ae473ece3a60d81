"""``fastrl bench instructions``: its counted loops, its reading of cachegrind's files, its refusals (the counts
themselves are measured in bench/, never asserted here; the one run under valgrind is ``slow``)."""

from __future__ import annotations

import argparse
import json
import shutil

import pytest

from fastrl.bench import instructions
from fastrl.bench.instructions import per_step, read_counts, step_loop

pytestmark = pytest.mark.engine

EVENTS = "events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw\n"


def _cachegrind_file(path, rows: list[tuple[str, str, list[int]]]) -> str:
    """A cachegrind out file with one line of counts for each (source file, function, nine counts)."""
    lines = ["version: 1\n", "cmd: python3 loop.py\n", EVENTS]
    for source, function, counts in rows:
        lines += [f"fl={source}\n", f"fn={function}\n", "12 " + " ".join(map(str, counts)) + "\n"]
    path.write_text("".join(lines))
    return str(path)


def test_counts_are_read_per_event_and_split_by_what_executes_them(tmp_path):
    emulator = [100, 0, 0, 40, 4, 1, 20, 2, 0]
    rows = [
        ("???", "ale::stella::M6502Low::execute(unsigned int)", emulator),
        ("???", "ale::stella::TIA::poke(unsigned short, unsigned char)", emulator),
        ("./string/memmove-vec-unaligned-erms.S", "__memcpy_avx_unaligned_erms", [30, 0, 0, 10, 5, 3, 10, 5, 2]),
        ("/build/Python-3.11.7/Python/ceval.c", "_PyEval_EvalFrameDefault", [50, 1, 0, 20, 1, 0, 10, 1, 0]),
        ("/build/Python-3.11.7/Objects/dictobject.c", "unicodekeys_lookup_unicode", [5, 0, 0, 2, 0, 0, 0, 0, 0]),
        ("???", "???", [70, 0, 0, 30, 6, 2, 10, 1, 1]),
        ("numpy/_core/src/multiarray/ctors.c", "PyArray_NewFromDescr_int", [9, 0, 0, 3, 0, 0, 1, 0, 0]),
        ("/usr/lib/libfoo.c", "foo_step", [4, 0, 0, 1, 0, 0, 0, 0, 0]),
    ]
    totals, groups = read_counts(_cachegrind_file(tmp_path / "a.cg", rows))
    assert totals["Ir"] == 100 + 100 + 30 + 50 + 5 + 70 + 9 + 4
    assert groups["emulator"]["Ir"] == 200 and groups["emulator"]["D1mr"] == 8
    assert groups["copies"]["DLmw"] == 2
    assert groups["python"]["Ir"] == 50 + 5 + 9  # by its sources, and by numpy's Py* C API names
    assert groups["unnamed"]["Ir"] == 70 and groups["other"]["Ir"] == 4


def test_a_step_costs_the_difference_of_the_long_and_the_short_run_over_the_steps_between_them(tmp_path):
    short, _ = read_counts(_cachegrind_file(tmp_path / "s.cg", [("???", "???", [1000, 0, 0, 0, 10, 4, 0, 6, 2])]))
    long, _ = read_counts(_cachegrind_file(tmp_path / "l.cg", [("???", "???", [5000, 0, 0, 0, 30, 9, 0, 26, 13])]))
    assert per_step(long, short, 40) == {"instructions": 100, "l1d_misses": 1, "l2_misses": 0.4}


def test_the_counted_loops_step_every_env_the_warm_up_and_the_steps_asked():
    warm = instructions.WARM_UP_STEPS
    assert step_loop("raw", "configs/pong_sync.toml", [], envs=2, steps=3) == (warm + 3) * 2
    assert step_loop("adapter", "configs/breakout_sync.toml", [], envs=3, steps=0) == warm * 3


def test_the_engine_part_runs_whole_rollouts_in_one_process_and_counts_its_envs_steps():
    steps = step_loop("engine", "configs/pong_sync.toml", ["engine.rollout=16"], envs=2, steps=20)
    rollouts = instructions.ENGINE_WARM_UP_ROLLOUTS + 2  # 20 steps take two rollouts of 16
    assert steps == rollouts * 2 * 16


def test_the_machines_l2_is_given_as_cachegrind_takes_it():
    l2 = instructions.this_machines_l2()
    instructions.check_cache(l2)  # cachegrind's rule: a power-of-two line and number of sets
    assert int(l2.split(",")[0]) >= 64 * 1024


def _args(**given) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    instructions.add_arguments(parser)
    args = parser.parse_args([])
    for key, value in given.items():
        setattr(args, key, value)
    return args


@pytest.mark.parametrize(
    ("given", "which", "message"),
    [
        ({}, None, "valgrind is not installed"),
        ({"envs": 0}, "/usr/bin/valgrind", "--envs and --steps must be at least 1"),
        ({"parts": ["raw", "learner"]}, "/usr/bin/valgrind", "--parts ['learner'] unknown"),
        ({"config": "configs/cartpole_sync.toml"}, "/usr/bin/valgrind", "'CartPole-v1' is not an Atari id"),
        ({"l2": "1MB,8,64"}, "/usr/bin/valgrind", "expected SIZE,ASSOC,LINE in bytes"),
        ({"l2": "1000000,8,64"}, "/usr/bin/valgrind", "SIZE must be ASSOC x LINE x a power of two"),
    ],
)
def test_bad_input_is_named_before_anything_runs(monkeypatch, capsys, given, which, message):
    monkeypatch.setattr(shutil, "which", lambda name: which)
    monkeypatch.setattr(instructions, "measure", lambda args: pytest.fail("measured despite bad input"))
    assert instructions.run(_args(**given)) == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow  # the raw and adapter loops under valgrind, twice each (~1.5 minutes)
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
def test_the_bench_counts_a_raw_and_an_adapter_step_under_cachegrind(capsys):
    from fastrl.cli import main as cli_main

    argv = ["bench", "instructions", "configs/pong_sync.toml", "--parts", "raw", "adapter", "--envs", "2"]
    assert cli_main([*argv, "--steps", "40"]) == 0
    result = json.loads(capsys.readouterr().out)
    raw, adapter = result["parts"]["raw"], result["parts"]["adapter"]
    assert raw["steps"] == adapter["steps"] == 80
    assert raw["instructions_of_raw"] == 1.0
    # an agent step is four emulator frames, most of its work the emulator's in both loops
    assert raw["by_group"]["emulator"]["instructions"] > 0.5 * raw["instructions"]
    assert 0.8 < adapter["instructions_of_raw"] < 1.5
    assert sum(g["instructions"] for g in adapter["by_group"].values()) == pytest.approx(adapter["instructions"], abs=5)
