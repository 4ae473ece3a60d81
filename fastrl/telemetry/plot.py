"""``fastrl plot``: learning curves of one or more runs from their ``metrics.jsonl``.

Panels: the mean return against frames or training seconds (one line per run, labelled with
the run directory's name), the fps, the time split (env / inference / learning / waiting:
one colour per kind, one line style per run), for gala runs each learner's return, and the panels the
layers declare (``fastrl.layers.Layer.curves``).

matplotlib draws on a ``Figure`` with its Agg canvas, never through ``pyplot``: nothing
global is switched (a notebook's backend stays as it was) and no display is needed.
matplotlib is the optional extra ``fastrl-engine[plot]``: training does not need it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fastrl.config import ConfigError
from fastrl.errors import install_hint
from fastrl.layer import layer_curves

X_AXES = ("frames", "seconds")
CLOCKS = ("env", "inference", "learning", "waiting")
_STYLES = ("-", "--", ":", "-.")


@dataclass
class RunCurves:
    """The metrics lines of one run directory."""

    name: str
    lines: list[dict]

    def column(self, key: str, rows: list[dict] | None = None) -> np.ndarray:
        """One key of every line as floats; missing or null values are NaN (a gap in the curve)."""
        values = [row.get(key) for row in (self.lines if rows is None else rows)]
        return np.array([np.nan if v is None else float(v) for v in values], np.float64)

    def seconds(self) -> np.ndarray:
        """Training seconds: each resumed session's clock starts at 0 again, so sessions are laid end to end."""
        out, offset, last = [], 0.0, 0.0
        for t in self.column("time_s"):
            if t < last:
                offset += last
            out.append(offset + t)
            last = t
        return np.array(out, np.float64)

    def x(self, kind: str) -> np.ndarray:
        return self.column("frames") if kind == "frames" else self.seconds()

    def split(self, clock: str) -> np.ndarray:
        return np.array([row.get("time_split", {}).get(clock, np.nan) for row in self.lines], np.float64)

    def learners(self) -> list[int]:
        return sorted({row["learner"] for line in self.lines for row in line.get("learners", ())})

    def learner_column(self, learner: int, key: str) -> np.ndarray:
        rows: list[dict] = [
            next((r for r in line.get("learners", ()) if r["learner"] == learner), {}) for line in self.lines
        ]
        return self.column(key, rows)

    def episode_stat_names(self) -> list[str]:
        """The env's own per-episode figures (``episode_stats``: Crafter's achievements), in their first order."""
        return list(dict.fromkeys(name for line in self.lines for name in line.get("episode_stats", {})))

    def episode_stat(self, name: str) -> np.ndarray:
        return self.column(name, [line.get("episode_stats", {}) for line in self.lines])

    def has(self, key: str) -> bool:
        return any(key in line for line in self.lines)

    def curves_of(self, key: str) -> dict[str, np.ndarray]:
        """A layer's curve ``key``: a number per line (one curve, named ``key``), or a table of numbers per line
        (a curve per name in it, in their first line's order)."""
        tables = [line.get(key) for line in self.lines]
        if not any(isinstance(table, dict) for table in tables):
            return {key: self.column(key)}
        rows = [table if isinstance(table, dict) else {} for table in tables]
        return {name: self.column(name, rows) for name in dict.fromkeys(name for row in rows for name in row)}


def load_run(path: str | Path) -> RunCurves:
    """A run directory's curves; ``ConfigError`` if it holds no metrics."""
    path = Path(path)
    metrics = path / "metrics.jsonl"
    try:
        found = metrics.is_file()
    except OSError as exc:  # a name too long for the file system
        raise ConfigError(f"{str(path)!r} is not a run directory: {exc.strerror}") from None
    if not found:
        raise ConfigError(f"{str(path)!r} is not a run directory: no metrics.jsonl in it")
    # bytes that are no UTF-8 (a damaged file) become replacement characters: their line is then no JSON, as a cut one
    texts, lines = metrics.read_text(encoding="utf-8", errors="replace").splitlines(), []
    for number, text in enumerate(texts, 1):
        if not text.strip():
            continue
        try:
            line = json.loads(text)
        except ValueError:
            line = None
        if isinstance(line, dict):
            lines.append(line)
        elif number < len(texts):  # JSON that is no table ("7", "[]") is as damaged as no JSON at all
            raise ConfigError(f"{metrics}:{number} is not a metrics line (a JSON object)")
        # a run killed while writing leaves a cut last line: plot what came before it
    if not lines:
        raise ConfigError(f"{metrics} holds no metrics yet")
    return RunCurves(path.resolve().name, lines)


def import_figure():
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ConfigError(
            f"fastrl plot needs matplotlib, which is not installed: {install_hint('plot')} (or pip install matplotlib)"
        ) from None
    return Figure


def check_output(out: str | Path) -> None:
    """The file type must be one matplotlib writes (png, pdf, svg...): said before any run is read."""
    from matplotlib.backend_bases import FigureCanvasBase

    suffix = Path(out).suffix.lstrip(".").lower()
    allowed = FigureCanvasBase.get_supported_filetypes()
    if suffix not in allowed:
        raise ConfigError(
            f"--out {str(out)!r}: cannot write a {suffix or 'suffix-less'} file; "
            f"use one of .{', .'.join(sorted(allowed))}"
        )


def _check_x(x: str) -> None:
    if x not in X_AXES:
        raise ConfigError(f"x = {x!r}: allowed values are {', '.join(map(repr, X_AXES))}")


def figure_of(runs: list[RunCurves], x: str = "frames"):
    """The figure of these runs (a ``matplotlib.figure.Figure``; its axes hold the curves' data)."""
    _check_x(x)
    Figure = import_figure()
    per_learner = [run for run in runs if run.learners()]  # independent learners: a curve each
    # the layers' panels (Layer.curves) that some run has a curve of: {title: the metrics keys drawn in it}
    layered = {title: keys for title, keys in layer_curves().items() if any(run.has(k) for run in runs for k in keys)}
    counted = [run for run in runs if run.episode_stat_names()]  # an env with figures of its own per episode
    panels = 3 + bool(per_learner) + len(layered) + bool(counted)
    figure = Figure(figsize=(9, 2.8 * panels), layout="constrained")
    axes = figure.subplots(panels, 1, sharex=True)
    returns, fps, split = axes[:3]
    layer_axes = dict(zip(layered, axes[3 + bool(per_learner) :]))
    stats = axes[-1] if counted else None
    for i, run in enumerate(runs):
        style = _STYLES[i % len(_STYLES)]
        xs = run.x(x)
        returns.plot(xs, run.column("return_mean"), style, label=run.name)
        fps.plot(xs, run.column("fps"), style, label=run.name)
        for color, clock in enumerate(CLOCKS):
            label = clock if len(runs) == 1 else f"{run.name} {clock}"
            split.plot(xs, run.split(clock), style, color=f"C{color}", label=label)
        if run in per_learner:
            for learner in run.learners():
                axes[3].plot(
                    xs,
                    run.learner_column(learner, "return_mean"),
                    style,
                    color=f"C{learner % 10}",
                    label=f"{run.name} learner {learner}",
                )
        for title, keys in layered.items():
            for key in (k for k in keys if run.has(k)):
                for name, curve in run.curves_of(key).items():
                    layer_axes[title].plot(xs, curve, style, label=run.name if name == key else f"{run.name} {name}")
        if stats is not None and run in counted:
            for k, name in enumerate(run.episode_stat_names()):
                label = name if len(runs) == 1 else f"{run.name} {name}"
                stats.plot(xs, run.episode_stat(name), style, color=f"C{k % 10}", label=label)
    titles = (
        ["mean return", "frames per second", "share of the workers' time"]
        + (["return per learner"] if per_learner else [])
        + list(layered)
        + (["the env's per-episode figures (episode_stats), mean per line"] if counted else [])
    )
    for ax, title in zip(axes, titles):
        ax.set_title(title, loc="left", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6 if ax is stats else 8, ncols=3 if ax is stats else 1)
    if len(runs) > 1:  # a line per (run, clock) would make a legend taller than the panel: name each once
        split.legend(handles=_split_legend(split, runs), fontsize=8, ncols=2)
    axes[-1].set_xlabel("env frames" if x == "frames" else "training seconds")
    return figure


def _split_legend(ax, runs: list[RunCurves]) -> list:
    """Proxy lines: one per clock (its colour), one per run that has a time split (its line style)."""
    from matplotlib.lines import Line2D

    clocks = [Line2D([], [], color=f"C{color}", label=clock) for color, clock in enumerate(CLOCKS)]
    styles = [
        Line2D([], [], linestyle=_STYLES[i % len(_STYLES)], color="gray", label=run.name)
        for i, run in enumerate(runs)
        if not np.isnan(run.split(CLOCKS[0])).all()
    ]
    return clocks + styles


def plot_runs(runs: list[str | Path] | str | Path, x: str = "frames", out: str | Path | None = None):
    """Plot the learning curves of run directories; saves to ``out`` (png, pdf, svg...) when given.

    Returns the ``matplotlib.figure.Figure``. Raises ``ConfigError`` for a path that is not a
    run directory, a bad ``x`` (``"frames"`` or ``"seconds"``), or a missing matplotlib.
    """
    paths = [runs] if isinstance(runs, (str, Path)) else list(runs)
    if not paths:
        raise ConfigError("no run directory to plot")
    _check_x(x)
    import_figure()
    if out is not None:
        check_output(out)
    figure = figure_of([load_run(p) for p in paths], x)
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(out, dpi=110)
    return figure
