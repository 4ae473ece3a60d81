"""``fastrl bench time-to-score``: the crossing, the curve and the not-reached path (short CartPole runs)."""
import json

import pytest

from fastrl.bench.time_to_score import RESULT_FILE, first_crossing, measure
from fastrl.cli import main as cli_main
from fastrl.config import ConfigError, tomllib  # tomli on Python 3.10

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

CARTPOLE = "configs/cartpole_sync.toml"


def _overrides(tmp_path, *extra: str) -> list[str]:
    return [f"run.dir='{tmp_path}'", "run.progress=false", "run.log_interval_s=0.5", "engine.serial=true", *extra]


@pytest.mark.slow  # a learning run to a target
def test_reached_stops_at_the_target_and_reports_the_first_crossing(tmp_path):
    result = measure(CARTPOLE, target=100.0, max_minutes=2.0, window=20, overrides=_overrides(tmp_path),
                     run_dir=tmp_path / "run")
    assert result["reached"] and result["stopped_by"] == "target"
    assert json.loads((tmp_path / "run" / RESULT_FILE).read_text()) == result
    saved = tomllib.loads((tmp_path / "run" / "config.toml").read_text())["run"]
    assert (saved["target_return"], saved["return_window"], saved["max_seconds"]) == (100.0, 20, 120.0)
    curve = result["curve"]
    assert curve and [p["wall_s"] for p in curve] == sorted(p["wall_s"] for p in curve)
    assert curve[-1]["wall_s"] <= result["train_s"]  # the teardown's line: the training's end
    crossing = next(i for i, p in enumerate(curve) if p["wall_s"] == result["wall_s"])
    assert curve[crossing]["return_mean"] >= 100.0 and curve[crossing]["frames"] == result["frames"]
    assert all(p["return_mean"] is None or p["return_mean"] < 100.0 for p in curve[:crossing])
    assert 0 < result["frames"] <= result["frames_trained"] and result["episodes"] >= 10
    assert result["startup_s"] >= 0 and result["fps"] > 0
    assert result["config"] == CARTPOLE and result["target"] == 100.0 and result["window"] == 20
    assert result["layout"]["executors"] == 1 and result["layout"]["inline_actors"] is False  # serial
    assert {"cpu", "cores", "torch"} <= result["machine"].keys() and result["machine"]["cores"] >= 1


def test_not_reached_by_the_time_cap_through_the_cli(tmp_path, capsys):
    code = cli_main(["bench", "time-to-score", CARTPOLE, "--target", "1000", "--max-minutes", "0.05",
                     "--run-dir", str(tmp_path / "run"), *sum((["--set", o] for o in _overrides(tmp_path)), [])])
    assert code == 0
    printed = capsys.readouterr().out.strip().splitlines()
    assert len(printed) == 1  # one JSON line
    result = json.loads(printed[0])
    assert result == json.loads((tmp_path / "run" / RESULT_FILE).read_text())
    assert not result["reached"] and result["stopped_by"] == "max_seconds"
    assert result["wall_s"] is None and result["frames"] is None and result["episodes"] is None
    assert result["window"] == 20 and result["curve"] and 2.5 <= result["train_s"] < 10


def test_not_reached_when_total_frames_ends_the_run_first(tmp_path):
    result = measure(CARTPOLE, target=1000.0, max_minutes=5.0, overrides=_overrides(tmp_path, "run.total_frames=400"),
                     run_dir=tmp_path / "run")
    assert not result["reached"] and result["stopped_by"] == "total_frames" and result["frames_trained"] == 400


@pytest.mark.parametrize("kwargs, message", [
    ({"target": float("inf")}, r"--target inf: expected a finite score"),
    ({"max_minutes": 0.0}, r"--max-minutes 0.0: expected a number of minutes > 0"),
    ({"window": 0}, r"--window 0: expected an int >= 1"),
    ({"overrides": ["run.target_return=5"]}, r"run.target_return is what --target sets here; use --target"),
    ({"overrides": ["run.return_window=5"]}, r"run.return_window is what --window sets here; use --window"),
    ({"overrides": ["engine.envz=5"]}, r"unknown config key 'engine.envz'"),
])
def test_bad_options_are_named_before_anything_starts(tmp_path, kwargs, message):
    args = {"target": 100.0, "max_minutes": 1.0, "window": 20, "overrides": [], **kwargs}
    with pytest.raises(ConfigError, match=message):
        measure(CARTPOLE, run_dir=tmp_path / "run", **args)
    assert not (tmp_path / "run").exists()


def test_the_crossing_follows_the_engines_stopping_rule():
    def line(mean, episodes, learners=None):
        out = {"time_s": 0.0, "frames": 0, "return_mean": mean, "episodes": episodes}
        if learners is not None:
            out["learners"] = [{"return_mean": m} for m in learners]
        return out

    # a mean over fewer than min(window, 10) episodes does not count; None (no episode yet) never does
    assert first_crossing([line(None, 0), line(150.0, 9), line(120.0, 10)], 100.0, 20) == 2
    assert first_crossing([line(150.0, 3)], 100.0, 3) == 0
    assert first_crossing([line(99.9, 50)], 100.0, 20) is None
    # gala: every learner's own mean must reach it, not the pooled one
    assert first_crossing([line(110.0, 40, [130.0, 90.0]), line(110.0, 60, [105.0, None]),
                           line(104.0, 80, [101.0, 107.0])], 100.0, 20) == 2


def test_the_crossing_gets_a_line_of_its_own_though_later_episodes_pull_the_mean_back(tmp_path):
    """The run stops at the barrier after the target is reached; episodes that end before it still count,
    and may take the mean back under the target by the last line (a Pong run: 18 reached between two lines,
    17.85 in the last): the crossing must still be in metrics.jsonl, or the bench calls it not reached."""
    import numpy as np

    from fastrl.api import resolve_config
    from fastrl.buffers.control import Control, control_arrays
    from fastrl.process.supervisor import finish_due
    from fastrl.runs.run_dir import RunDir
    from fastrl.spec import WorkerIds
    from fastrl.telemetry.metrics import Telemetry

    config = resolve_config(CARTPOLE, [*_overrides(tmp_path), "run.target_return=100.0", "run.return_window=10",
                                       "run.log_interval_s=3600.0"])
    control = Control({name: np.zeros(shape, dtype) for name, shape, dtype in control_arrays(3, 1)})
    finished = [[(0, 120.0, 120, None)] * 10, [(1, 20.0, 20, None)] * 6]  # ten over the target, then six far under
    telemetry = Telemetry(config, RunDir.create(config, tmp_path / "run"), control, WorkerIds(1, 1, 1),
                          take_episodes=lambda: finished.pop(0) if finished else [])
    telemetry.mark_ready()
    telemetry.tick()
    assert finish_due(telemetry) and finish_due(telemetry)  # asked at every loop: one line for the crossing
    telemetry.tick(force=True)  # the teardown's line, after the barrier's episodes
    telemetry.close()
    lines = [json.loads(text) for text in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [line["return_mean"] for line in lines] == [120.0, 60.0]
    assert first_crossing(lines, 100.0, 10) == 0
