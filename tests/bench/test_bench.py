"""The benchmarks' plumbing (not their speed: speed is measured in bench/, never in tests)."""
from __future__ import annotations

import argparse
import json

import pytest

from fastrl.bench.sampling import measure

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks


@pytest.mark.slow  # a whole bench round (~15 s); its parts have quick tests below
def test_sampling_bench_reports_the_engine_and_both_references_per_round(capsys):
    from fastrl.cli import main as cli_main

    assert cli_main(["bench", "sampling", "configs/pong_hts.toml", "--seconds", "1", "--rounds", "2",
                     "--set", "engine.envs=4", "--set", "engine.executors=2", "--set", "engine.actors=2"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["fastrl"]["policy"] == "random" and result["fastrl"]["envs"] == 4
    assert result["atari_vector_env"]["num_envs"] == 4
    assert len(result["rounds"]) == 2
    for row in result["rounds"]:
        assert row["fastrl_fps"] > 0 and row["raw_fps"] > 0 and row["atari_vector_env_fps"] > 0
        assert row["of_raw_emulator"] == pytest.approx(row["fastrl_fps"] / row["raw_fps"], rel=1e-2)
        assert row["raw_fps"] == pytest.approx((row["raw_before_fps"] + row["raw_after_fps"]) / 2, rel=1e-3)
        assert row["vs_atari_vector_env"] == pytest.approx(row["fastrl_fps"] / row["atari_vector_env_fps"], rel=1e-2)
    counted = [r for r in result["rounds"] if r["steady"]] or result["rounds"]
    assert result["steady_rounds"] == sum(r["steady"] for r in result["rounds"])
    ratios = sorted(r["of_raw_emulator"] for r in counted)
    assert ratios[0] <= result["of_raw_emulator"] <= ratios[-1]
    assert set(result["fastrl"]["time_split"]) == {"env", "inference", "learning", "waiting"}


@pytest.mark.slow  # a whole bench round (~15 s); its parts have quick tests below
def test_sampling_bench_adapter_loop_reports_the_engines_share_of_its_own_envs_in_a_bare_loop(capsys):
    from fastrl.cli import main as cli_main

    cli_main(["bench", "sampling", "configs/pong_hts.toml", "--seconds", "1", "--rounds", "1", "--adapter-loop",
              "--set", "engine.envs=4", "--set", "engine.executors=2", "--set", "engine.actors=2"])
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["adapter_loop"]["processes"] == 2 and result["adapter_loop"]["fps"] > 0
    (row,) = result["rounds"]
    assert row["of_adapter_loop"] == pytest.approx(row["fastrl_fps"] / row["adapter_loop_fps"], rel=1e-2)
    assert result["of_adapter_loop"] == row["of_adapter_loop"]
    assert row["raw_before_fps"] > 0 and row["raw_after_fps"] > 0
    assert result["adapter_loop_of_raw_emulator"] == pytest.approx(row["adapter_loop_fps"] / row["raw_fps"], rel=1e-2)


def _round(engine_fps: float, raw_before: float, raw_after: float) -> dict:
    """One round of the sampling bench as measure() collects it: the engine between two raw readings."""
    from fastrl.bench.sampling import bracketing

    def raw(fps: float) -> dict:
        return {"processes": 2, "fps": fps, "fps_per_process": [fps * 0.45, fps * 0.55]}

    engine = {"frames_per_s": engine_fps, "agent_steps_per_s": engine_fps / 4, "time_split_by_role": {}}
    bracket = bracketing(raw(raw_before), raw(raw_after))
    return {"fastrl": engine, "atari_vector_env": {"fps": 10_000.0}, "raw_emulator": bracket}


def test_sampling_bench_takes_each_ratio_to_the_mean_of_the_raw_readings_around_it_and_counts_steady_rounds_only():
    from fastrl.bench.sampling import _summary

    rounds = [_round(18_000, 20_000, 20_000), _round(27_000, 20_000, 30_000), _round(19_000, 21_000, 19_000)]
    result = _summary(rounds, steady_drift=0.10, envs=16, executors=2, backend=None)
    assert [row["steady"] for row in result["rounds"]] == [True, False, True]
    assert result["steady_rounds"] == 2
    assert result["rounds"][1]["raw_fps"] == 25_000 and result["rounds"][1]["of_raw_emulator"] == 1.08
    assert result["rounds"][0]["raw_cores_spread"] == pytest.approx(0.2)
    assert result["of_raw_emulator"] == pytest.approx((0.9 + 0.95) / 2, abs=1e-3)  # the unsteady 1.08 left out


def test_sampling_bench_with_no_steady_round_takes_the_medians_of_all_and_says_so(caplog):
    from fastrl.bench.sampling import _summary

    rounds = [_round(18_000, 15_000, 25_000), _round(27_000, 20_000, 30_000)]
    result = _summary(rounds, steady_drift=0.10, envs=16, executors=2, backend=None)
    assert result["steady_rounds"] == 0
    assert result["of_raw_emulator"] == pytest.approx((0.9 + 1.08) / 2, abs=1e-3)
    assert "no round was steady" in caplog.text


def test_adapter_loop_steps_every_env_of_a_generic_gymnasium_config():
    from fastrl.bench.references import adapter_loop_fps
    from fastrl.config import EnvConfig

    result = adapter_loop_fps(EnvConfig(id="CartPole-v1"), envs=3, processes=2, seconds=0.5)
    assert result["envs"] == 3 and result["processes"] == 2 and result["fps"] > 1000


def test_a_reference_worker_that_dies_is_reported_at_once_not_after_the_timeout():
    import time

    from fastrl.bench.references import adapter_loop_fps
    from fastrl.config import EnvConfig

    started = time.monotonic()
    with pytest.raises(RuntimeError, match="exited with code"):
        adapter_loop_fps(EnvConfig(id="NoSuchEnv-v0"), envs=2, processes=2, seconds=30)
    assert time.monotonic() - started < 60


def test_sampling_benches_resolve_any_mode_of_a_config_whose_algorithm_is_another_modes():
    from fastrl.bench.sampling import sampling_layout

    # crafter_ppo learns with PPO and normalised returns: async (IMPALA's mode) samples it with no algorithm
    resolved = sampling_layout("configs/crafter_ppo.toml", ["engine.mode='async'"])
    assert resolved.engine.mode == "async" and resolved.algo.name == "none"
    assert isinstance(resolved.engine.executors, int) and isinstance(resolved.engine.actors, int)


def test_sampling_bench_refuses_a_non_atari_config_and_bad_counts_before_measuring():
    with pytest.raises(ValueError, match="CartPole-v1"):
        measure("configs/cartpole_hts.toml", seconds=1)
    with pytest.raises(ValueError, match="--steady"):
        measure("configs/pong_hts.toml", rounds=1, steady_drift=0.0)
    with pytest.raises(ValueError, match="rounds"):
        measure("configs/pong_hts.toml", seconds=1, rounds=0)


@pytest.mark.slow  # compiles the Pong CNN's step: a bench round, run with the benchmarks
def test_learner_bench_reports_eager_and_compiled_steps_and_the_cap_they_imply(capsys):
    from fastrl.bench.learner import add_arguments, run

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["configs/cartpole_ppo.toml", "--seconds", "0.05", "--threads", "1"])
    assert run(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["model"] == "MLPPolicy" and result["algo"] == "ppo"
    train = {row["compiled"]: row for row in result["train"]}
    assert set(train) == {False, True} and all(row["samples_s"] > 0 for row in result["train"] + result["forward"])
    passes = result["passes_per_rollout"]
    assert train[False]["frames_s_cap"] == pytest.approx(train[False]["samples_s"] / passes, rel=1e-3)
    assert result["speedup"]["train_fp32_1t"] == pytest.approx(train[True]["samples_s"] / train[False]["samples_s"],
                                                               rel=1e-2)
    assert result["compile_auto"] is False  # an MLP: "auto" leaves it eager
    assert {"cpu", "cores", "amx_bf16", "avx512_bf16", "torch"} <= set(result["machine"])
    # the work counted: an MLP's forward is 2 x in x out FLOPs per row for each of its linear layers
    import torch

    policy = _cartpole_policy()
    linear = sum(2 * m.in_features * m.out_features for m in policy.modules() if isinstance(m, torch.nn.Linear))
    assert result["flops_per_sample"]["forward"] == linear
    assert result["flops_per_sample"]["train"] > 2 * linear  # the backward adds to the forward
    (gemm,) = result["gemm_gflops"]
    assert gemm["precision"] == "fp32" and gemm["threads"] == 1 and gemm["gflops"] > 0
    for what in ("train", "forward"):
        for row in result[what]:
            work = row["samples_s"] * result["flops_per_sample"][what] / 1e9
            assert row["gflops"] == pytest.approx(work, rel=1e-2, abs=0.1)
            assert row["of_gemm"] == pytest.approx(row["gflops"] / gemm["gflops"], rel=1e-2, abs=1e-3)


def test_learner_bench_counts_a_step_s_work_against_a_matrix_product_s():
    """The work counted without the compiled settings (the slow test above checks the whole JSON line)."""
    import torch

    import fastrl
    from fastrl.bench.learner import _flops_per_sample, _gemm_gflops, _work_rate
    from fastrl.envs.registry import probe_env

    config = fastrl.api.resolve_config("configs/cartpole_ppo.toml", [])
    flops = _flops_per_sample(probe_env(config.env), config, batch=64, micro_batch=8)
    policy = _cartpole_policy()
    linear = sum(2 * m.in_features * m.out_features for m in policy.modules() if isinstance(m, torch.nn.Linear))
    # forward: every layer once; training step: its forward plus the backward's two products per layer, less
    # the first layer's input gradient (observations need none)
    assert flops["forward"] == linear
    assert 2 * linear < flops["train"] <= 3 * linear
    assert _gemm_gflops("fp32", seconds=0.05) > 0
    assert _work_rate(1000.0, 2e6, 4.0) == {"gflops": 2.0, "of_gemm": 0.5}


def _cartpole_policy():
    import fastrl
    from fastrl.envs.registry import probe_env
    from fastrl.models.policy import build_policy

    config = fastrl.api.resolve_config("configs/cartpole_ppo.toml", [])
    return build_policy(probe_env(config.env), config, "cpu")


def test_learner_bench_refuses_a_recurrent_model_naming_the_key(capsys):
    from fastrl.bench.learner import add_arguments, run

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert run(parser.parse_args(["configs/cartpole_ppo.toml", "--set", "model.lstm=16"])) == 2
    assert "model.lstm = 16" in capsys.readouterr().err


def test_every_bench_script_parses_and_calls_real_benchmarks():
    """bench/*.sh reproduce the docs' results tables: each must be valid bash and name only real subcommands."""
    import re
    import subprocess
    from pathlib import Path

    from fastrl.cli import _benches

    scripts = sorted((Path(__file__).resolve().parents[2] / "bench").glob("*.sh"))
    assert len(scripts) >= 6
    names = set(_benches())
    for script in scripts:
        subprocess.run(["bash", "-n", str(script)], check=True)
        called = re.findall(r"fastrl bench ([a-z-]+)", script.read_text())
        if not called and re.search(r"python -m pytest tests/\w+", script.read_text()):
            continue  # a run of the test suite's own (bench/fuzz.sh: the full fuzz, counted)
        assert called and set(called) <= names, (script.name, called)


def test_references_bench_prints_both_references(capsys):
    from fastrl.cli import main as cli_main

    assert cli_main(["bench", "references", "--seconds", "0.3", "--processes", "1", "--num-envs", "2"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["raw_emulator"]["fps"] > 0 and result["atari_vector_env"]["fps"] > 0
    assert result["atari_vector_env"]["of_raw"] == pytest.approx(
        result["atari_vector_env"]["fps"] / result["raw_emulator"]["fps"])


@pytest.mark.slow  # 22 s of fresh processes: a benchmark's own check (bench/startup.sh runs it)
def test_startup_bench_times_both_start_methods_in_fresh_processes(capsys):
    """Two runs per start method, each method in a Python process of its own: spawn's runs use
    engine.start_method = 'spawn' end to end, the fork server's are served by a server of their own."""
    from fastrl.cli import main as cli_main

    small = ["--set", "engine.envs=4", "--set", "engine.rollout=8", "--set", "engine.executors=1",
             "--set", "engine.inline_actors=true"]
    assert cli_main(["bench", "startup", "configs/cartpole_ppo.toml", "--runs", "2", *small]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for method in ("spawn", "forkserver"):
        times = result[method]
        assert times["first_run_s"] > times["first_startup_s"] > 0 and times["later_run_s"] > 0
    assert result["first_run_speedup"] > 0 and result["later_run_speedup"] > 0 and result["runs"] == 2
    assert {"cpu", "cores", "torch"} <= set(result["machine"])


@pytest.mark.parametrize(("options", "message"), [
    (["--runs", "0"], "--runs must be >= 1"),
    (["--set", "engine.start_method='fork'"], "engine.start_method = 'fork'"),
])
def test_startup_bench_refuses_bad_input_before_any_run(capsys, options, message):
    from fastrl.cli import main as cli_main

    assert cli_main(["bench", "startup", "configs/cartpole_ppo.toml", *options]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.unit
def test_the_soaks_memory_slope_is_least_squares_per_role_after_the_settling_time():
    from fastrl.bench.soak import _phase_summary

    rows = [{"t_s": 60.0 * m, "roles": {"learner-0": {"rss_mib": 300 + 2 * m, "fds": 25},
                                        "main": {"rss_mib": 400.0, "fds": 33 + (m > 5)}},
             "segments": 1, "segment_mib": 69.2} for m in range(11)]
    rows[0]["roles"]["learner-0"]["rss_mib"] = 100  # the settling minute: left out of the slope
    summary = _phase_summary(rows, settle_t=60.0, exit_code=None)
    assert summary["settled_samples"] == 10
    assert summary["roles"]["learner-0"]["rss_slope_mib_per_h"] == pytest.approx(120.0)  # 2 MiB a minute
    assert summary["roles"]["main"]["rss_slope_mib_per_h"] == 0.0
    assert (summary["roles"]["main"]["fds_min"], summary["roles"]["main"]["fds_max"]) == (33, 34)
    assert summary["segments"] == [1] and summary["segment_mib"] == [69.2]


def test_the_soak_refuses_bad_options_before_anything_starts(tmp_path, capsys):
    from fastrl.cli import main as cli_main

    assert cli_main(["bench", "soak", "--minutes", "0", "--out", str(tmp_path / "a")]) == 2
    assert cli_main(["bench", "soak", "--set", "engine.envs=0", "--out", str(tmp_path / "b")]) == 2
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "x").write_text("")
    assert cli_main(["bench", "soak", "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "--minutes" in err and "engine.envs = 0" in err and "is not empty" in err


@pytest.mark.slow  # ~2 minutes: a soak of CartPole with its kill, its exactness copies and its resume
@pytest.mark.timeout(900)
def test_a_short_soak_kills_resumes_exactly_and_leaves_nothing(tmp_path, capsys):
    from fastrl.cli import main as cli_main

    code = cli_main(["bench", "soak", "cartpole_sync", "--minutes", "1.5", "--checkpoint-s", "10", "--sample-s", "3",
                     "--plot-s", "20", "--settle-s", "5", "--seed", "0", "--out", str(tmp_path / "soak")])
    result = json.loads(capsys.readouterr().out)
    assert code == 0, result
    assert result["exact"] and result["status"] == "ok" and not result["leftover_segments"]
    assert result["plots"]["ok"] >= 1 and result["plots"]["failed"] == 0
    for phase in ("first", "resumed"):
        assert {"main", "fork-server", "learner-0", "executor-0"} <= set(result["phases"][phase]["roles"])
    assert (tmp_path / "soak" / "memory.png").stat().st_size > 0


def _scripted_engine(monkeypatch, speeds: dict[str, list[float]]) -> list[str]:
    """``fastrl bench paired``'s engine runs replaced by a script: variant k's i-th run gives speeds[k][i] frames/s.
    Returns the order the variants ran in."""
    import fastrl.bench.paired as paired

    order: list[str] = []

    def fake(config, seconds, policy, overrides):
        name = overrides[-1].split("=")[1].strip("'") if overrides else "base"
        order.append(name)
        fps = speeds[name][sum(1 for n in order if n == name) - 1]
        return {"frames_per_s": fps, "time_split_by_role": {"executors": {"waiting": 0.05}}}

    monkeypatch.setattr(paired, "engine_fps", fake)
    return order


def test_the_paired_bench_alternates_the_order_and_reads_each_variant_against_the_first_of_its_round(monkeypatch):
    from fastrl.bench.paired import measure, parse_variant

    # the machine halves its speed in round 2; the second variant is 1.1x the first within every round
    order = _scripted_engine(monkeypatch, {"sync": [100.0, 50.0, 100.0], "hts": [110.0, 55.0, 110.0]})
    variants = [parse_variant("a: engine.mode='sync'"), parse_variant("b: engine.mode='hts'")]
    result = measure("configs/cartpole_ppo.toml", variants, [], rounds=3, seconds=1.0, policy="random")
    assert order == ["sync", "hts", "hts", "sync", "sync", "hts"]
    assert result["first"] == "a" and result["variants"]["a"]["of_first"] == 1.0
    b = result["variants"]["b"]
    assert b["of_first"] == 1.1 and b["per_round_of_first"] == [1.1, 1.1, 1.1]
    assert b["frames_per_s"] == 110.0 and b["overrides"] == ["engine.mode='hts'"]


@pytest.mark.parametrize(
    "variants,message",
    [
        (["a: engine.mode='sync'"], "at least two"),
        (["a: engine.mode='sync'", "a: engine.mode='hts'"], "names must differ"),
        (["a engine.mode='sync'", "b:"], "expected NAME: KEY=VALUE"),
        (["a: engine.mode", "b:"], "is not KEY=VALUE"),
        (["a:", "b: engine.nope=1"], "engine.nope"),
        (["a:", "b: engine.mode='fast'"], "engine.mode"),
    ],
)
def test_the_paired_bench_refuses_bad_variants_before_anything_runs(monkeypatch, capsys, variants, message):
    from fastrl.cli import main

    order = _scripted_engine(monkeypatch, {})
    argv = ["bench", "paired", "configs/cartpole_ppo.toml"] + [x for v in variants for x in ("--variant", v)]
    assert main(argv) == 2
    assert message in capsys.readouterr().err and order == []


@pytest.mark.slow  # two short engine runs (~9 s)
def test_the_paired_bench_runs_the_engine_for_each_variant(capsys):
    from fastrl.cli import main

    argv = ["bench", "paired", "configs/cartpole_ppo.toml", "--rounds", "1", "--seconds", "1",
            "--variant", "sync: engine.mode='sync'", "--variant", "hts: engine.mode='hts'"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(result["variants"]) == {"sync", "hts"} and result["machine"]["cpu"]
    assert all(v["frames_per_s"] > 0 for v in result["variants"].values())
