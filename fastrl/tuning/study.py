"""``fastrl tune``: an Optuna study whose objective is the time a config takes to reach a score.

Each trial draws the ``--param`` keys (TPE, seeded), then trains the config with them once per ``--seeds``
seed, each run an ordinary ``fastrl bench time-to-score`` run in its own process and run directory
(``STUDY/trial-0003/seed-1``: resumable, plottable, its ``time_to_score.json`` beside it). A seed's score is
its training seconds to the target; a seed that does not reach it in ``--max-minutes`` counts its cap and
more the further it ended from the target (``seed_score``), so that TPE still learns from trials that all
miss. The trial's value is the mean over its seeds; lower is better.

Pruning: while a trial's first seed trains, its ``metrics.jsonl`` is read every second and the mean score at
each multiple of ``--prune-every-frames`` frames is reported to Optuna's median pruner; from the second mark
on (and after two finished trials), a trial behind the median of the earlier trials at the same frames is
stopped there (SIGTERM: the run saves its checkpoint and ends cleanly) and its remaining seeds are not run.

The study lives in ``STUDY/study.db`` (SQLite): run the same command again after a stop and it goes on,
retrying the trial that was cut. While a study runs it holds a lock on its folder, so a second ``fastrl
tune`` on it is refused. ``--jobs N`` runs N trials at once, each on its own share of the cores (the
process's CPU affinity, which the run's auto layout then sizes itself to). When the study ends it writes
``trials.csv``, ``trials.md``, ``trials.png`` (with matplotlib) and ``best.toml``, the config with the best
trial's values, which ``fastrl train best.toml`` takes.
"""

from __future__ import annotations

import csv
import ctypes
import dataclasses
import fcntl
import json
import logging
import math
import os
import queue
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from fastrl.bench.time_to_score import RESULT_FILE, check_options
from fastrl.config import ConfigError
from fastrl.errors import install_hint
from fastrl.tuning.params import ParamSpec

log = logging.getLogger(__name__)
POLL_S = 1.0  # how often a running trial's metrics are read for the pruner
STUDY_DB = "study.db"
PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies
RETRIED = "retried"  # study user attribute: numbers of the cut trials already enqueued again


@dataclass(frozen=True)
class TuneOptions:
    config: str | None
    params: tuple[ParamSpec, ...]
    study_dir: Path
    target: float
    max_minutes: float
    seeds: tuple[int, ...] = (0,)
    trials: int = 20
    window: int = 20
    overrides: tuple[str, ...] = ()
    prune_every_frames: int = 250_000  # 0: no pruning
    jobs: int = 1
    sampler_seed: int = 0
    startup_trials: int = 10  # TPE's random start-up: with fewer trials than this, the search is random


@dataclass
class SeedRun:
    seed: int
    reached: bool
    wall_s: float | None
    frames: int | None
    best_return: float | None
    score: float
    run_dir: str


@dataclass
class Trial:
    number: int
    state: str
    value: float | None
    params: dict
    seeds: list[dict] = field(default_factory=list)


def seed_score(result: dict, target: float, cap_s: float) -> float:
    """Seconds to the target; a run that missed it counts ``cap_s`` times one plus its gap to the target over
    the target's size (a Pong run that ended at 17 of 18 counts 1.06 caps, one at -21 counts 3.2)."""
    if result.get("reached"):
        return float(result["wall_s"])
    returns = [p["return_mean"] for p in result.get("curve", []) if p.get("return_mean") is not None]
    best = max(returns) if returns else -math.inf
    gap = target - best if math.isfinite(best) else 2.0 * max(1.0, abs(target))
    return cap_s * (1.0 + max(0.0, gap) / max(1.0, abs(target)))


def check(options: TuneOptions) -> None:
    """Everything a study would refuse later, refused before its first trial: the bench options, and every
    param's key with the low and high ends of its range applied to the config."""
    from fastrl.api import resolve_config

    check_options(options.target, options.max_minutes, options.window, list(options.overrides))
    if not options.params:
        raise ConfigError("fastrl tune needs at least one --param to search")
    if options.trials < 1 or options.jobs < 1:
        raise ConfigError(f"--trials and --jobs must be at least 1 (got {options.trials}, {options.jobs})")
    keys = [p.key for p in options.params]
    if len(set(keys)) != len(keys):
        raise ConfigError(f"--param: a key given twice among {', '.join(keys)}")
    for spec in options.params:
        if spec.key in ("run.seed", "run.target_return", "run.max_seconds", "run.return_window"):
            raise ConfigError(f"--param {spec.key}: set by fastrl tune itself (--seeds, --target, --max-minutes)")
        values = spec.choices if spec.kind == "choice" else (spec.low, spec.high)
        for value in values:
            if spec.kind in ("int", "intlog"):
                value = int(value)
            try:
                resolve_config(options.config, [*options.overrides, spec.override(value)])
            except ConfigError as exc:
                raise ConfigError(f"--param {spec.key}: {exc}") from None


def run_study(options: TuneOptions) -> dict:
    """Run (or go on with) the study until ``options.trials`` trials completed or were pruned; its summary."""
    import optuna

    check(options)
    options.study_dir.mkdir(parents=True, exist_ok=True)
    with _study_lock(options.study_dir):
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.create_study(
            study_name="fastrl-tune",
            storage=f"sqlite:///{options.study_dir / STUDY_DB}",
            load_if_exists=True,
            direction="minimize",
            sampler=tpe_sampler(options),
            pruner=median_pruner(options.prune_every_frames),
        )
        _retry_cut_trials(study)
        cores = _core_shares(options.jobs)
        shares: queue.Queue[list[int]] = queue.Queue()  # a running trial holds one share of the cores
        for share in cores:
            shares.put(share)
        while (left := options.trials - _finished(study)) > 0:
            study.optimize(lambda trial: _objective(trial, options, shares), n_trials=left, n_jobs=options.jobs)
        return write_outputs(study, options)


def tpe_sampler(options: TuneOptions):
    """TPE seeded by ``--sampler-seed``; its first ``--startup-trials`` draws are uniform at random (Optuna's 10 by
    default), so a study of ten trials or fewer never uses the model; short studies want 3-5 (docs/tuning.md)."""
    import optuna

    return optuna.samplers.TPESampler(seed=options.sampler_seed, n_startup_trials=options.startup_trials)


def _finished(study) -> int:
    from optuna.trial import TrialState

    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))


class _study_lock:
    """An flock on the study folder: one ``fastrl tune`` at a time on it (the kernel drops it however the
    process ends), so a trial found running at start was cut by a stop, not run by another tuner."""

    def __init__(self, folder: Path):
        self.path = folder / ".lock"

    def __enter__(self):
        self.file = open(self.path, "a+")  # noqa: SIM115  held for the study's life
        try:
            fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.file.close()
            raise ConfigError(f"{self.path.parent}: another fastrl tune is running this study") from None
        return self

    def __exit__(self, *exc):
        self.file.close()


def _retry_cut_trials(study) -> None:
    """Trials a stop cut (left running, or failed by the interrupt) are run again with the same values."""
    from optuna.trial import TrialState

    retried = set(study.user_attrs.get(RETRIED, []))
    for trial in study.get_trials(deepcopy=False):
        cut = trial.state == TrialState.RUNNING or (trial.state == TrialState.FAIL and trial.user_attrs.get("cut"))
        if cut and trial.number not in retried:
            if trial.state == TrialState.RUNNING:
                study.tell(trial.number, state=TrialState.FAIL)
            study.enqueue_trial(trial.params, skip_if_exists=False)
            retried.add(trial.number)
            log.warning("fastrl tune: trial %d was cut by a stop; it runs again", trial.number)
    study.set_user_attr(RETRIED, sorted(retried))


def _core_shares(jobs: int) -> list[list[int]]:
    """``jobs`` disjoint slices of this process's cores, one per concurrent trial (all of them for one)."""
    cores = sorted(os.sched_getaffinity(0))
    if jobs == 1:
        return [cores]
    if jobs > len(cores):
        raise ConfigError(f"--jobs {jobs}: only {len(cores)} cores here, one at least per trial")
    return [cores[i::jobs] for i in range(jobs)]


def _objective(trial, options: TuneOptions, shares: queue.Queue) -> float:
    cores = shares.get()
    try:
        overrides = [spec.override(spec.suggest(trial)) for spec in options.params]
        runs = []
        for k, seed in enumerate(options.seeds):
            run = _train_seed(trial, options, overrides, seed, cores, prune=k == 0)
            runs.append(dataclasses.asdict(run))
            trial.set_user_attr("seeds", runs)
        return sum(r["score"] for r in runs) / len(runs)
    except KeyboardInterrupt:
        trial.set_user_attr("cut", True)
        raise
    finally:
        shares.put(cores)


def _train_seed(trial, options: TuneOptions, overrides: list[str], seed: int, cores: list[int], prune: bool):
    """One seed of one trial: a time-to-score run in a child process, watched for the pruner."""
    import optuna

    run_dir = options.study_dir / f"trial-{trial.number:04d}" / f"seed-{seed}"
    if run_dir.exists():  # a retried trial's cut run: kept beside, never overwritten
        run_dir.rename(run_dir.with_name(f"{run_dir.name}.cut-{int(time.time())}"))
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "fastrl", "bench", "time-to-score"]
    argv += [options.config] if options.config else []
    argv += ["--target", repr(options.target), "--max-minutes", repr(options.max_minutes)]
    argv += ["--window", str(options.window), "--run-dir", str(run_dir)]
    for text in [*options.overrides, *overrides, f"run.seed={seed}", "run.progress=false"]:
        argv += ["--set", text]
    with open(run_dir.parent / f"seed-{seed}.log", "w") as log_file:
        child = subprocess.Popen(
            argv,
            stdout=subprocess.DEVNULL,
            stderr=log_file,
            preexec_fn=lambda: _child_setup(cores),
            start_new_session=True,  # a Ctrl-C at the terminal reaches the tuner, which stops the run itself
        )
        try:
            pruned = _watch(child, run_dir, trial, options) if prune and options.prune_every_frames > 0 else None
            child.wait()
        except BaseException:
            _stop(child)
            raise
    result_path = run_dir / RESULT_FILE
    if not result_path.is_file():
        raise RuntimeError(f"trial {trial.number} seed {seed}: the run ended without {RESULT_FILE}; see its log")
    result = json.loads(result_path.read_text())
    if pruned:
        raise optuna.TrialPruned(f"behind the median at {pruned} frames")
    returns = [p["return_mean"] for p in result["curve"] if p["return_mean"] is not None]
    return SeedRun(
        seed,
        bool(result["reached"]),
        result["wall_s"],
        result["frames"],
        max(returns) if returns else None,
        seed_score(result, options.target, options.max_minutes * 60.0),
        str(run_dir),
    )


def _child_setup(cores: list[int]) -> None:
    """In the trial's process before it runs: its share of the cores, and SIGTERM (a clean stop, checkpoint
    saved) should the tuner die without stopping it."""
    os.sched_setaffinity(0, cores)
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def median_pruner(prune_every_frames: int):
    """Optuna's median pruner, comparing a trial from its second mark on: the first mark's scores are mostly
    noise (Pong at 0.25M frames: -21 to -18 whatever the settings). Optuna prunes at every step not below
    ``n_warmup_steps``, so the warm-up ends at the second mark, not the first."""
    import optuna

    return optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=2 * prune_every_frames)


def _watch(child: subprocess.Popen, run_dir: Path, trial, options: TuneOptions) -> int | None:
    """Report the mean score at each multiple of ``prune_every_frames`` while ``child`` trains; stop it and
    return those frames where the pruner says so, None if it ran to its end."""
    metrics = run_dir / "metrics.jsonl"
    mark = options.prune_every_frames
    read = 0
    while child.poll() is None:
        time.sleep(POLL_S)
        if not metrics.is_file():
            continue
        lines = metrics.read_text().splitlines()
        for text in lines[read:]:
            if not text.endswith("}"):
                break  # a line still being written
            read += 1
            line = json.loads(text)
            while line["frames"] >= mark and line.get("return_mean") is not None:
                trial.report(-float(line["return_mean"]), step=mark)  # lower is better, as the objective
                if trial.should_prune():
                    _stop(child)
                    return mark
                mark += options.prune_every_frames
    return None


def _stop(child: subprocess.Popen) -> None:
    """SIGTERM: the run saves its checkpoint and its time_to_score.json, then ends."""
    if child.poll() is None:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(timeout=120)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def trials(study) -> list[Trial]:
    from optuna.trial import TrialState

    return [  # a pruned trial's value is its last report (a score, not seconds): left out
        Trial(
            t.number,
            t.state.name.lower(),
            t.value if t.state == TrialState.COMPLETE else None,
            dict(t.params),
            list(t.user_attrs.get("seeds", [])),
        )
        for t in study.get_trials(deepcopy=False)
    ]


def write_outputs(study, options: TuneOptions) -> dict:
    """trials.csv, trials.md, trials.png and best.toml into the study folder; the summary printed."""
    from fastrl.api import resolve_config
    from fastrl.runs.run_dir import to_toml

    rows = trials(study)
    keys = [p.key for p in options.params]
    folder = options.study_dir
    with open(folder / "trials.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["trial", "state", "value", *keys, "seeds_reached"])
        for t in rows:
            writer.writerow([t.number, t.state, t.value, *(t.params.get(k) for k in keys), _reached(t)])
    table = ["| trial | state | value (s) | " + " | ".join(keys) + " | seeds reached |"]
    table.append("|" + "---|" * (len(keys) + 4))
    for t in rows:
        value = "" if t.value is None else f"{t.value:.1f}"
        params = " | ".join(_fmt(t.params.get(k)) for k in keys)
        table.append(f"| {t.number} | {t.state} | {value} | {params} | {_reached(t)} |")
    (folder / "trials.md").write_text("\n".join(table) + "\n")
    done = [t for t in rows if t.state == "complete"]
    summary: dict = {"study": str(folder), "trials": len(rows), "complete": len(done), "best": None}
    if done:
        best = min(done, key=lambda t: math.inf if t.value is None else t.value)
        spec_of = {p.key: p for p in options.params}
        overrides = [*options.overrides, *(spec_of[k].override(v) for k, v in best.params.items())]
        best_config = resolve_config(options.config, overrides)
        (folder / "best.toml").write_text(
            f"# fastrl tune: trial {best.number}, {best.value} s (mean over seeds {list(options.seeds)})\n"
            + to_toml(best_config.to_dict())
        )
        summary["best"] = {"trial": best.number, "value": best.value, "params": best.params, "seeds": best.seeds}
    _plot(rows, folder / "trials.png")
    return summary


def _reached(t: Trial) -> str:
    return f"{sum(s['reached'] for s in t.seeds)}/{len(t.seeds)}" if t.seeds else ""


def _fmt(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _plot(rows: list[Trial], path: Path) -> None:
    """Each completed trial's value and the best so far, by trial number (skipped without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.info("fastrl tune: no matplotlib, no trials.png (%s)", install_hint("plot"))
        return
    done = [(t.number, t.value) for t in rows if t.state == "complete"]
    if not done:
        return
    fig, ax = plt.subplots(figsize=(6, 3.5))
    numbers, values = zip(*done)
    best = [min(values[: i + 1]) for i in range(len(values))]
    ax.scatter(numbers, values, s=14, label="trial")
    ax.step(numbers, best, where="post", color="C1", label="best so far")
    ax.set_xlabel("trial")
    ax.set_ylabel("seconds to the target (mean over seeds)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
