"""The multinode benchmark's plumbing (not its speed: speed is measured in bench/, never in tests)."""
from __future__ import annotations

import json

import pytest

import fastrl
from fastrl.bench.alpha_beta import exposed_allreduce_s, fit_alpha_beta, ring_allreduce_s
from fastrl.bench.rank_group import BackwardProfile, BenchFailed, Options, _delivered, run_group
from fastrl.cli import main as cli_main

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

# the default sweep, 4 KiB (latency-bound) to 16 MiB (bandwidth-bound), 7 sizes: with fewer, a machine busy
# with other work can tilt the line through the few medians to a negative intercept
QUICK = ["--repeats", "5", "--warmup", "1"]


@pytest.mark.slow  # a whole bench round (both models, 1 and 2 ranks); the fitting and failures are tested below
def test_multinode_bench_reports_both_models_at_1_and_2_ranks_and_projects_them(capsys):
    # --alpha-us given, bandwidth fitted: one run covers the fit and the user's own numbers
    code = cli_main(["bench", "multinode", *QUICK, "--alpha-us", "50", "--nodes", "8", "64"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result = json.loads(captured.out)
    model = result["alpha_beta"]
    assert model["fitted_alpha_us"] > 0 and model["fitted_bandwidth_gbps"] > 0
    assert model["alpha_us"] == 50 and model["bandwidth_gbps"] == model["fitted_bandwidth_gbps"]
    assert "loopback" in model["fitted_on"] and model["source"].startswith("alpha given")
    assert [point["bytes"] for point in model["sweep"]] == [4096 * 4**k for k in range(7)]
    beta = model["bandwidth_gbps"] * 1e9 / 8
    assert [entry["config"] for entry in result["models"]] == ["configs/cartpole_sync.toml", "configs/pong_sync.toml"]
    mlp, cnn = result["models"]
    assert (mlp["model"], mlp["algo"], mlp["steps_per_update"], mlp["step_rows"]) == ("MLPPolicy", "a2c", 1, 40)
    # PPO's steps per update are the default job's epochs x minibatches, read from its config (not a number here
    # that goes stale when the default changes: it was 16 at 4 epochs, 12 at 3)
    pong = fastrl.api.resolve_config("configs/pong_sync.toml", [])
    steps = pong.algo.epochs * pong.algo.minibatches
    assert (cnn["model"], cnn["algo"], cnn["steps_per_update"], cnn["step_rows"]) == ("NatureCNN", "ppo", steps, 256)
    for entry in result["models"]:
        assert entry["allreduce_bytes"] == 4 * entry["parameters"] > 0
        assert set(entry["ranks"]) == {"1", "2"}
        for ranks, row in entry["ranks"].items():
            assert row["ranks"] == int(ranks)
            assert row["step_compute_ms"] > 0 and row["step_allreduce_ms"] >= 0
            steps = entry["steps_per_update"]
            assert row["update_compute_ms"] == pytest.approx(row["step_compute_ms"] * steps, rel=1e-3)
            assert 0 <= row["share"] < 1
            assert row["step_overlapped_ms"] > 0 and 0 <= row["overlapped_share"] < 1
        near, far = entry["projection"]["8"], entry["projection"]["64"]
        assert far["step_allreduce_ms"] > near["step_allreduce_ms"] > 0 and far["share"] > near["share"]
        for p, row in ((8, near), (64, far)):
            expected = ring_allreduce_s(p, entry["allreduce_bytes"], 50e-6, beta) * 1e3
            assert row["step_allreduce_ms"] == pytest.approx(expected, rel=1e-3)
            steps = entry["steps_per_update"]
            assert row["update_allreduce_ms"] == pytest.approx(row["step_allreduce_ms"] * steps, rel=1e-3)
            assert row["overlapped_exposed_ms"] >= 0 and 0 <= row["overlapped_share"] < 1


def test_only_what_outlasts_backward_is_exposed():
    alpha, beta = 10e-6, 1e9  # one ring step 10 us; 1 GB/s
    profile = BackwardProfile(bucket_bytes=[8_000_000, 400_000], ready_s=[0.001, 0.009], backward_end_s=0.010)
    big, small = (ring_allreduce_s(8, n, alpha, beta) for n in profile.bucket_bytes)
    # the big bucket runs from 1 ms while backward goes on; the small one waits for it, then for itself
    assert exposed_allreduce_s(profile, 8, alpha, beta) == pytest.approx(max(0.001 + big, 0.009) + small - 0.010)
    late = BackwardProfile(bucket_bytes=[8_000_000], ready_s=[0.010], backward_end_s=0.010)  # nothing to overlap
    assert exposed_allreduce_s(late, 8, alpha, beta) == pytest.approx(big)
    assert exposed_allreduce_s(BackwardProfile([4], [0.0], 1.0), 8, alpha, beta) == 0.0  # hidden entirely


def test_the_fit_recovers_alpha_and_beta_of_the_ring_model_at_2_ranks():
    alpha, beta = 30e-6, 2e9
    sizes = [4096 * 4**k for k in range(7)]
    times = [ring_allreduce_s(2, n, alpha, beta) for n in sizes]
    assert times[0] == pytest.approx(2 * alpha + sizes[0] / beta)
    assert fit_alpha_beta(sizes, times) == pytest.approx((alpha, beta), rel=1e-6)
    with pytest.raises(BenchFailed, match="widen --sizes"):
        fit_alpha_beta([4096, 8192], [2e-3, 1e-3])  # slower for the smaller message: no positive beta


def test_a_group_past_its_time_limit_is_stopped_and_leaves_nothing_running():
    # the ranks are still importing torch after 0.2 s; the autouse no_leaks fixture checks they are gone
    with pytest.raises(BenchFailed, match="timeout"):
        run_group(2, [], Options(repeats=1, warmup=0, sweep_bytes=(4096,), timeout_s=0.2))


def test_results_written_whole_survive_a_rank_aborted_while_the_group_is_torn_down(tmp_path):
    out = tmp_path / "ranks.json"
    assert not _delivered(str(out), [], grace_s=0.0)  # a rank failed before the results: the bench fails
    out.write_text("[]")
    assert _delivered(str(out), [], grace_s=0.0)


@pytest.mark.parametrize("args, message", [
    (["--configs", "configs/no_such.toml"], "no_such.toml"),
    (["--sizes", "4K"], "at least 2 different sizes"),
    (["--sizes", "4K", "lots"], "'lots'"),
    (["--repeats", "0"], "--repeats"),
    (["--bandwidth-gbps", "0"], "--bandwidth-gbps"),
    (["--nodes", "1"], "--nodes"),
])
def test_bad_input_is_named_and_exits_2_before_any_rank_starts(capsys, args, message):
    assert cli_main(["bench", "multinode", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fastrl bench multinode: ") and message in err
