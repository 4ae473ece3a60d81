"""``fastrl plot``: the figure's axes hold the runs' own metrics, for one or several runs."""
import json
import sys

import numpy as np
import pytest

import fastrl
from fastrl.cli import main
from fastrl.config import ConfigError
from fastrl.telemetry.plot import CLOCKS, plot_runs
from tests.helpers.runs import cartpole

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

pytest.importorskip("matplotlib")
FP32 = "model.precision='fp32'"  # 'auto' is bf16 on CPUs with AMX, which the mlp and 'random' models do not take


def _lines(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _column(lines, key) -> np.ndarray:
    return np.array([np.nan if line[key] is None else line[key] for line in lines], np.float64)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plot")
    runs = []
    for seed in (0, 1):
        config, overrides = cartpole(tmp, FP32, "engine.serial=true", "run.tensorboard=false", f"run.seed={seed}",
                                     "run.total_frames=1600", "run.log_interval_s=0.001")  # a line every update
        fastrl.train(config, overrides, run_dir=tmp / f"seed-{seed}")
        runs.append(tmp / f"seed-{seed}")
    return runs


def test_each_panel_holds_each_runs_curves(two_runs):
    figure = plot_runs(two_runs)
    returns, fps, split = figure.axes
    for i, run in enumerate(two_runs):
        lines = _lines(run)
        assert len(lines) > 2
        frames = _column(lines, "frames")
        for ax, key in ((returns, "return_mean"), (fps, "fps")):
            line = ax.get_lines()[i]
            assert line.get_label() == run.name
            np.testing.assert_array_equal(line.get_xdata(), frames)
            np.testing.assert_array_equal(line.get_ydata(), _column(lines, key))
        for j, clock in enumerate(CLOCKS):
            line = split.get_lines()[4 * i + j]
            assert line.get_label() == f"{run.name} {clock}"
            np.testing.assert_array_equal(line.get_ydata(), [row["time_split"][clock] for row in lines])
    assert np.nanmax(returns.get_lines()[0].get_ydata()) > 0  # episodes ended: real returns were drawn


def test_seconds_axis_is_training_time(two_runs):
    figure = plot_runs(two_runs[:1], x="seconds")
    np.testing.assert_array_equal(figure.axes[0].get_lines()[0].get_xdata(), _column(_lines(two_runs[0]), "time_s"))
    assert figure.axes[-1].get_xlabel() == "training seconds"


def test_cli_writes_the_png(two_runs, tmp_path, capsys):
    out = tmp_path / "curves.png"
    assert main(["plot", *map(str, two_runs), "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["plot", str(two_runs[0])]) == 0  # one run: RUN/plot.png by default
    assert (two_runs[0] / "plot.png").stat().st_size > 10_000


def _write(run_dir, lines):
    run_dir.mkdir()
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def _line(time_s, frames, ret, **extra):
    return {"time_s": time_s, "frames": frames, "fps": 10.0, "return_mean": ret,
            "time_split": dict.fromkeys(CLOCKS, 0.25), **extra}


def test_a_resumed_run_lays_its_sessions_end_to_end_in_seconds(tmp_path):
    lines = [_line(0.5, 100, None), _line(1.0, 200, 1.0), _line(0.4, 300, 2.0), _line(0.9, 400, 3.0)]
    _write(tmp_path / "resumed", lines)
    line = plot_runs(tmp_path / "resumed", x="seconds").axes[0].get_lines()[0]
    np.testing.assert_allclose(line.get_xdata(), [0.5, 1.0, 1.4, 1.9])
    np.testing.assert_array_equal(line.get_ydata(), [np.nan, 1.0, 2.0, 3.0])


def test_gala_runs_get_a_panel_per_learner(tmp_path):
    rows = lambda a, b: [{"learner": 0, "return_mean": a}, {"learner": 1, "return_mean": b}]  # noqa: E731
    _write(tmp_path / "gala", [_line(1.0, 100, 1.0, learners=rows(None, 2.0)),
                               _line(2.0, 200, 3.0, learners=rows(4.0, 5.0))])
    figure = plot_runs([tmp_path / "gala"])
    assert len(figure.axes) == 4
    learners = figure.axes[3].get_lines()
    assert [line.get_label() for line in learners] == ["gala learner 0", "gala learner 1"]
    np.testing.assert_array_equal(learners[0].get_ydata(), [np.nan, 4.0])
    np.testing.assert_array_equal(learners[1].get_ydata(), [2.0, 5.0])


def test_self_play_runs_get_a_panel_of_their_elo_rating(tmp_path):
    _write(tmp_path / "pool", [_line(1.0, 100, 0.0, elo=1200.0), _line(2.0, 200, 0.0, elo=1234.5)])
    _write(tmp_path / "plain", [_line(1.0, 100, 1.0), _line(2.0, 200, 2.0)])
    figure = plot_runs([tmp_path / "pool", tmp_path / "plain"])
    assert len(figure.axes) == 4 and figure.axes[3].get_title(loc="left").startswith("Elo")
    ratings = figure.axes[3].get_lines()
    assert [line.get_label() for line in ratings] == ["pool"]
    np.testing.assert_array_equal(ratings[0].get_ydata(), [1200.0, 1234.5])


def test_named_policies_ratings_get_a_curve_each_in_the_elo_panel(tmp_path):
    _write(tmp_path / "named", [_line(1.0, 100, 0.0, policy_elo={"first": 1200.0, "second": 1200.0}),
                                _line(2.0, 200, 0.0, policy_elo={"first": 1210.0, "second": 1190.0})])
    figure = plot_runs([tmp_path / "named"])
    assert len(figure.axes) == 4 and figure.axes[3].get_title(loc="left").startswith("Elo")
    curves = {line.get_label(): line.get_ydata().tolist() for line in figure.axes[3].get_lines()}
    assert curves == {"named first": [1200.0, 1210.0], "named second": [1200.0, 1190.0]}


def test_bad_input_is_refused_with_the_reason(tmp_path, two_runs, capsys):
    with pytest.raises(ConfigError, match="no metrics.jsonl"):
        plot_runs(tmp_path)
    with pytest.raises(ConfigError, match="'frames', 'seconds'"):
        plot_runs(two_runs, x="episodes")
    assert main(["plot", str(two_runs[0]), "--out", str(tmp_path / "x.bmp")]) == 2
    assert "cannot write a bmp file" in capsys.readouterr().err
    assert not (tmp_path / "x.bmp").exists()


@pytest.mark.parametrize("damaged", ["7", "[]", '"fps"', "null"])
def test_a_json_line_that_is_no_object_is_refused_unless_it_is_the_cut_last_line(tmp_path, damaged):
    """Found by the fuzzer: random bytes that happen to be JSON ("7") were an AttributeError's traceback."""
    _write(tmp_path / "run", [_line(1.0, 100, 1.0), _line(2.0, 200, 2.0)])
    metrics = tmp_path / "run" / "metrics.jsonl"
    good = metrics.read_text()
    metrics.write_text(damaged + "\n" + good)
    with pytest.raises(ConfigError, match=r"metrics.jsonl:1 is not a metrics line \(a JSON object\)"):
        plot_runs(tmp_path / "run")
    metrics.write_text(good + damaged + "\n")  # a last line cut as a run is killed: the lines before it are drawn
    np.testing.assert_array_equal(plot_runs(tmp_path / "run").axes[0].get_lines()[0].get_ydata(), [1.0, 2.0])


def test_missing_matplotlib_names_the_extra(two_runs, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # as if matplotlib were not installed
    assert main(["plot", str(two_runs[0]), "--out", str(two_runs[0] / "none.png")]) == 2
    assert "pip install 'fastrl-engine[plot]'" in capsys.readouterr().err


def test_an_envs_own_figures_per_episode_get_a_panel_of_their_means(tmp_path):
    """Crafter's achievements (``episode_stats``): a curve per figure in a panel of their own, gaps where a line's
    interval ended no episode."""
    stats = {"episode_stats_episodes": 2}
    lines = [_line(1.0, 100, 1.0, episode_stats={"collect_wood": 0.5, "place_table": 0.0}, **stats),
             _line(2.0, 200, 2.0),
             _line(3.0, 300, 3.0, episode_stats={"collect_wood": 1.0, "place_table": 0.5}, **stats)]
    _write(tmp_path / "crafter", lines)
    figure = plot_runs(tmp_path / "crafter")
    assert len(figure.axes) == 4
    curves = {line.get_label(): line.get_ydata() for line in figure.axes[3].get_lines()}
    np.testing.assert_array_equal(curves["collect_wood"], [0.5, np.nan, 1.0])
    np.testing.assert_array_equal(curves["place_table"], [0.0, np.nan, 0.5])
    assert len(plot_runs(tmp_path / "crafter", out=tmp_path / "p.png").axes) == 4
