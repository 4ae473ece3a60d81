"""Watching a run: TensorBoard event files, W&B, per-process memory and the progress line.

The TensorBoard files are read back with tensorboard's own ``EventAccumulator`` (what
``tensorboard --logdir`` uses), so the test checks what a user will see, not what the writer
meant to write.
"""
import importlib.machinery
import importlib.util
import io
import json
import re
import sys
import types

import numpy as np
import pytest

import fastrl
from fastrl.cli import main
from fastrl.config import ConfigError
from fastrl.telemetry.progress import ProgressLine, ProgressState, closing_line
from fastrl.telemetry.scalars import scalars
from fastrl.telemetry.tensorboard import RETURNS_TAG, TensorBoardSink
from tests.helpers.runs import cartpole

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

FP32 = "model.precision='fp32'"  # 'auto' is bf16 on CPUs with AMX, which the mlp and 'random' models do not take


def _lines(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _events(folder):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder), size_guidance={"scalars": 0, "histograms": 0})
    events.Reload()
    return events


def _expected_points(lines: list[dict]) -> dict[str, list[tuple[int, float]]]:
    """{tag: [(step, value as float32)]}: TensorBoard keeps scalars as float32, stepped by frames."""
    points: dict[str, list] = {}
    for line in lines:
        for tag, value in scalars(line).items():
            points.setdefault(tag, []).append((line["frames"], float(np.float32(value))))
    return points


@pytest.fixture(scope="module")
def ppo_run(tmp_path_factory):
    """One short PPO CartPole run with an executor, an actor and a learner process of their own."""
    tmp = tmp_path_factory.mktemp("ppo")
    config, overrides = cartpole(
        tmp, FP32, "algo.name='ppo'", "algo.minibatches=2", "algo.epochs=2", "run.total_frames=2400",
        "run.log_interval_s=0.05", "engine.executors=1", "engine.actors=1", "engine.inline_actors=false",
    )
    summary = fastrl.train(config, overrides, run_dir=tmp / "run")
    return tmp / "run", summary


def test_metrics_lines_start_when_training_does(ppo_run):
    """Start-up (spawning, compiling, first resets) writes no line: time_s is training time from the first
    line on, so the curve's time axis never runs backwards."""
    run_dir, summary = ppo_run
    times = [line["time_s"] for line in _lines(run_dir)]
    assert summary["startup_s"] > 0.05  # longer than run.log_interval_s: a line in start-up would show
    assert times == sorted(times) and len(set(times)) == len(times), times


def test_tensorboard_holds_every_metrics_scalar_with_its_value(ppo_run):
    run_dir, _ = ppo_run
    lines = _lines(run_dir)
    events = _events(run_dir / "tb")
    expected = _expected_points(lines)
    for tag in ("return_mean", "policy_loss", "value_loss", "entropy", "grad_norm", "fps", "policy_lag_mean",
                "time_split/env", "time_split/learning", "clip_fraction", "approx_kl", "rss_mb/main"):
        assert tag in expected, f"{tag} is not in metrics.jsonl"
    assert set(events.Tags()["scalars"]) == set(expected)
    for tag, points in expected.items():
        assert [(e.step, e.value) for e in events.Scalars(tag)] == points, tag
    assert max(line["approx_kl"] for line in lines) > 0  # PPO's statistics are measured, not left at 0


def test_tensorboard_histogram_holds_every_episode_return(ppo_run):
    run_dir, summary = ppo_run
    histograms = _events(run_dir / "tb").Histograms(RETURNS_TAG)
    assert sum(h.histogram_value.num for h in histograms) == summary["episodes"] > 0
    assert max(h.histogram_value.max for h in histograms) == max(line["return_max"] or 0 for line in _lines(run_dir))


def test_memory_of_every_process_is_logged_and_its_peak_summarised(ppo_run):
    run_dir, summary = ppo_run
    names = {"main", "executor-0", "actor-0", "learner-0"}
    assert set(summary["rss_peak_mb"]) == names
    later = [line["rss_mb"] for line in _lines(run_dir) if line["frames"] > 0]
    assert later and all(set(rss) == names for rss in later[:-1])  # the final line comes after the workers stopped
    for rss in later:
        for name, mb in rss.items():
            assert 10 < mb <= summary["rss_peak_mb"][name]


def test_gala_learner_scalars_reach_tensorboard(tmp_path):
    line = {"frames": 640, "fps": 100.0, "return_mean": None, "time_split": {"env": 0.5},
            "learners": [{"learner": 0, "return_mean": 3.0, "consensus_distance": 0.25},
                         {"learner": 1, "return_mean": None, "consensus_distance": 0.5}]}
    sink = TensorBoardSink(tmp_path)
    sink.write(line, [1.0, 2.0])
    sink.close()
    events = _events(tmp_path / "tb")
    assert set(events.Tags()["scalars"]) == {"frames", "fps", "time_split/env", "learner-0/return_mean",
                                             "learner-0/consensus_distance", "learner-1/consensus_distance"}
    assert [(e.step, e.value) for e in events.Scalars("learner-1/consensus_distance")] == [(640, 0.5)]


def test_wandb_missing_is_bad_input_naming_the_package(tmp_path, capsys):
    assert importlib.util.find_spec("wandb") is None  # not installed here, on purpose
    config, overrides = cartpole(tmp_path, FP32, "run.wandb=true")
    with pytest.raises(ConfigError, match=r"pip install 'fastrl-engine\[wandb\]'"):
        fastrl.train(config, overrides, run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()  # refused before anything was created
    sets = [arg for override in overrides for arg in ("--set", override)]
    assert main(["train", "--run-dir", str(tmp_path / "run"), *sets]) == 2
    assert "pip install 'fastrl-engine[wandb]'" in capsys.readouterr().err


class _FakeWandb(types.ModuleType):
    """Stands in for the wandb package: records what the run logs."""

    def __init__(self):
        super().__init__("wandb")
        self.__spec__ = importlib.machinery.ModuleSpec("wandb", None)
        self.logged: list[tuple[int, dict]] = []
        self.init_kwargs: dict = {}
        self.finished = False

    def init(self, **kwargs):
        self.init_kwargs = kwargs
        return self

    def log(self, data, step):
        self.logged.append((step, data))

    def finish(self):
        self.finished = True

    class Histogram:
        def __init__(self, values):
            self.values = list(values)


def test_wandb_gets_the_same_scalars_as_metrics_jsonl(tmp_path, monkeypatch):
    fake = _FakeWandb()
    monkeypatch.setitem(sys.modules, "wandb", fake)
    config, overrides = cartpole(tmp_path, FP32, "engine.serial=true", "run.wandb=true", "run.wandb_project='demo'",
                                 "run.tensorboard=false")
    summary = fastrl.train(config, overrides, run_dir=tmp_path / "run")
    assert fake.init_kwargs["project"] == "demo" and fake.init_kwargs["name"] == "run" and fake.finished
    lines = _lines(tmp_path / "run")
    assert [step for step, _ in fake.logged] == [line["frames"] for line in lines]
    for (_, data), line in zip(fake.logged, lines):
        assert {k: v for k, v in data.items() if k != RETURNS_TAG} == scalars(line)
    logged_returns = [v for _, data in fake.logged if RETURNS_TAG in data for v in data[RETURNS_TAG].values]
    assert len(logged_returns) == summary["episodes"]
    assert not (tmp_path / "run" / "tb").exists()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_line_counts_only_this_sessions_frames():
    line = ProgressLine(total_frames=2000, max_seconds=float("inf"), stream=io.StringIO())
    resumed = ProgressState(frames=1500, start_frames=1000, elapsed_s=5.0, return_mean=1.5, episodes=3)
    assert resumed.fps_since_start == 100.0
    assert line.fraction(resumed) == 0.75 and line.eta_s(resumed) == 5.0
    assert re.search(r"75\.0%\s+1,500 frames\s+100 fps\s+ETA\s+0:05", line.text(resumed))
    timed = ProgressLine(total_frames=10**9, max_seconds=20.0, stream=io.StringIO())
    assert timed.fraction(resumed) == 0.25 and timed.eta_s(resumed) == 15.0  # run.max_seconds ends it first


def test_closing_line_names_what_stopped_the_run():
    summary = {"train_s": 125.0, "frames": 1_234_567, "return_window": 20, "final_return_mean": 17.25,
               "target_return": 18.0}
    assert closing_line({**summary, "stopped_by": "total_frames"}) == (
        "stopped at the frame budget (run.total_frames) after 2:05 of training and 1,234,567 frames: mean return "
        "17.25 over the last 20 episodes; the target 18 was not reached")
    assert closing_line({**summary, "stopped_by": "max_seconds", "target_return": None}).startswith(
        "stopped at the time budget (run.max_seconds) after 2:05")
    reached = closing_line({**summary, "stopped_by": "target", "final_return_mean": 18.5})
    assert reached == "reached the target in 2:05 of training and 1,234,567 frames: mean return 18.50 over the last " \
        "20 episodes >= 18"
    assert "no episode ended" in closing_line({**summary, "stopped_by": "total_frames", "final_return_mean": None})


def test_progress_after_resume_shows_the_fps_of_new_frames_and_one_final_line(tmp_path, monkeypatch):
    config, overrides = cartpole(tmp_path, FP32, "engine.serial=true", "run.tensorboard=false")
    fastrl.train(config, overrides, run_dir=tmp_path / "run")
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    summary = fastrl.train(resume=tmp_path / "run", overrides=["run.total_frames=1600", "run.progress=true"])
    text = terminal.getvalue()
    final = text.rsplit("\r", 1)[1]
    assert final.endswith("\x1b[K\n") and final.count("\n") == 1
    match = re.match(r"complete: 1,600 frames \(800 since the resume\) in \S+, ([\d,]+) fps", final)
    assert match, final
    fps = int(match[1].replace(",", ""))
    assert summary["fps"] == pytest.approx(800 / summary["train_s"], rel=0.01)
    assert fps == pytest.approx(summary["fps"], abs=1)  # 800 new frames / the time since the resume, not 1,600


def _telemetry_on_a_fake_clock(tmp_path, monkeypatch, config_path: str, learners: int):
    """A Telemetry over bare control arrays whose ``time.monotonic`` is ``clock[0]``: (telemetry, control, clock)."""
    from fastrl.api import resolve_config
    from fastrl.buffers.control import Control, control_arrays
    from fastrl.layer import layer_stats
    from fastrl.runs.run_dir import RunDir
    from fastrl.spec import WorkerIds
    from fastrl.telemetry import metrics

    clock = [1000.0]
    monkeypatch.setattr(metrics.time, "monotonic", lambda: clock[0])
    config = resolve_config(config_path, [f"run.dir='{tmp_path}'", "run.progress=false", "run.tensorboard=false",
                                          "run.log_interval_s=5.0", f"engine.learners={learners}"])
    stats = layer_stats()  # every layer's columns, as a run's plan allocates them
    arrays = control_arrays(2 + learners, learners, len(stats))
    control = Control({name: np.zeros(shape, dtype) for name, shape, dtype in arrays}, stats)
    telemetry = metrics.Telemetry(config, RunDir.create(config, tmp_path / "run"), control,
                                  WorkerIds(1, 1, learners), take_episodes=lambda: [])
    telemetry.mark_ready()
    return telemetry, control, clock


def test_metrics_fps_stays_steady_though_frames_arrive_a_whole_update_at_a_time(tmp_path, monkeypatch):
    """The default job's learner adds 4,096 frames every ~1.8 s; lines every 5 s hold two or three updates.
    The line's fps is dated at the updates, so a steady run shows one rate, not 1.6K and 2.5K by turns."""
    from fastrl.buffers.control import Stat

    telemetry, control, clock = _telemetry_on_a_fake_clock(tmp_path, monkeypatch, "configs/cartpole_sync.toml", 1)
    for tick in range(1, 601):  # a minute of the supervisor's 0.1-s loop
        clock[0] = 1000.0 + tick / 10
        control.learner_stats[0, Stat.FRAMES] = 4096 * (tick // 18)  # an update done every 1.8 s
        telemetry.tick()
    clock[0] += 7.0  # the learner stops (a long checkpoint, say): the next line has no update in it
    telemetry.tick()
    telemetry.close()
    rates = [line["fps"] for line in _lines(tmp_path / "run")]
    assert len(rates) == 13
    assert rates[1:-1] == pytest.approx([4096 / 1.8] * 11, abs=0.1)  # rounded to 0.1; the first from start-up
    assert rates[-1] == 0.0


def test_gala_lines_date_each_learners_updates_per_s_at_its_updates(tmp_path, monkeypatch):
    """gala's per-learner updates_per_s the same way as fps: learners that finish an update every 1.8 s and
    2.4 s show those rates on every line, not two or three updates per 5 s by turns; the summary's is the run's."""
    from fastrl.buffers.control import Stat

    telemetry, control, clock = _telemetry_on_a_fake_clock(tmp_path, monkeypatch, "configs/cartpole_gala.toml", 2)
    for tick in range(1, 601):  # a minute of the supervisor's 0.1-s loop
        clock[0] = 1000.0 + tick / 10
        control.learner_stats[:, Stat.UPDATES] = [tick // 18, tick // 24]
        telemetry.tick()
    summary = telemetry.summary("complete")
    telemetry.close()
    lines = _lines(tmp_path / "run")
    assert len(lines) == 12
    for learner, period in ((0, 1.8), (1, 2.4)):
        rates = [line["learners"][learner]["updates_per_s"] for line in lines]
        assert rates == pytest.approx([1 / period] * 12, abs=0.006)  # rounded to 0.01
    assert [entry["updates_per_s"] for entry in summary["learners"]] == pytest.approx([33 / 60, 25 / 60], abs=0.006)


def test_step_rate_counts_from_the_last_increase_before_each_take():
    from fastrl.telemetry.metrics import StepRate

    rate = StepRate(100.0, now=10.0)
    rate.observe(100.0, 11.0)  # no change: the anchor stays at 10 s
    rate.observe(200.0, 12.0)
    rate.observe(200.0, 13.0)
    assert rate.take() == pytest.approx(50.0)  # 100 frames from 10 s to 12 s, not to 13 s
    rate.observe(500.0, 14.0)
    assert rate.take() == pytest.approx(150.0)  # from 12 s
    assert rate.take() == 0.0  # nothing since
