"""Metrics: one JSON line per log interval, a live progress line, and the final summary.

Each line also goes to the sinks (TensorBoard in ``RUN_DIR/tb``, W&B if asked for) and holds
the resident memory of every process of the run (``rss_mb``), read from ``/proc`` here, in the
main process, so that no worker does anything for it; the summary holds each one's peak.

With several learners (gala) each line and the summary also hold one entry per learner (its
return over its own envs, updates/s, update norm, distance to consensus ‖x_i − x̄‖ and the
bound computed beside it), and the run's consensus radius max_i ‖x_i − x̄‖ with its bound.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections import deque
from typing import Any

import numpy as np

from fastrl.buffers.control import Clock, Control, Stat, read_lag
from fastrl.config import Config
from fastrl.modes import mode_of
from fastrl.partition import owner_of
from fastrl.runs.run_dir import RunDir
from fastrl.spec import WorkerIds
from fastrl.telemetry.episode_stats import EpisodeStats
from fastrl.telemetry.memory import ProcessMemory
from fastrl.telemetry.progress import ProgressLine, ProgressState
from fastrl.telemetry.sections import finite_or_none, sections_for
from fastrl.telemetry.sinks import open_sinks

log = logging.getLogger(__name__)
PROGRESS_INTERVAL_S = 0.5


def _shares(delta: np.ndarray) -> dict[str, float]:
    """Each clock's share of the time in ``delta`` (workers x clocks, seconds)."""
    total = max(delta.sum(), 1e-9)
    return {clock.name.lower(): round(float(delta[:, clock].sum() / total), 4) for clock in Clock}


class StepRate:
    """A counter's rate from its last increase before one metrics line to its last before the next.

    Frames and updates arrive a whole update at a time (4,096 frames every ~1.8 s in the default job), so
    a rate over each fixed 5-s interval would alternate between two and three updates' worth (1.6K and 2.5K
    frames/s on lines of one steady run); dated at the updates it does not. The supervisor looks every 0.1 s.
    """

    def __init__(self, value: float, now: float):
        self.anchor = self.seen = (value, now)

    def observe(self, value: float, now: float) -> None:
        if value != self.seen[0]:
            self.seen = (value, now)

    def take(self) -> float:
        """The rate since the last call's last increase, 0 if the counter has not moved since."""
        (start, since), (end, until) = self.anchor, self.seen
        self.anchor = self.seen
        return (end - start) / (until - since) if until > since else 0.0


class Telemetry:
    def __init__(
        self, config: Config, run_dir: RunDir, control: Control, ids: WorkerIds, take_episodes, remote_frames=None
    ):
        """``take_episodes()`` returns the ``(env, return, length, stats)`` of episodes finished since the last call
        (env None: another rank's, counted in the run's return only; stats: the env's own figures, or None);
        ``remote_frames(local)``: the frames the other ranks learned from, given this rank's (torchrun's rank 0
        adds them to its own)."""
        self.config, self.run_dir, self.control, self.ids = config, run_dir, control, ids
        self.take_episodes = take_episodes
        self.remote_frames = remote_frames or (lambda local: 0.0)
        self.returns: deque[float] = deque(maxlen=config.run.return_window)
        self.learners = config.engine.learners
        # learners on their own (one per rank too): a line each, and what their layers say of them together
        self.per_learner = mode_of(config).independent
        self.algorithm_metrics = control.metric_columns  # the algorithm's own figures, by the names it declared
        self.learner_of = owner_of(config.engine.envs, self.learners)
        self.learner_returns: list[deque[float]] = [
            deque(maxlen=config.run.return_window) for _ in range(self.learners)
        ]
        self.sections = sections_for(config)  # the layers' own keys (fastrl.telemetry.sections)
        self.episodes = 0
        self.crossing_logged = False
        self.created = self.started = time.monotonic()
        self.finished_at: float | None = None
        self.last_log = self.last_progress = self.started
        self.start_frames = 0.0
        self.ready_env_steps = 0
        self.finished_env_steps: int | None = None
        self.frame_rate = StepRate(0.0, self.started)
        self.update_rates = [StepRate(0.0, self.started) for _ in range(self.learners)]  # independent learners' lines
        self.ready_timing = self.last_timing = control.timing.copy()
        self.progress = (
            ProgressLine(config.run.total_frames, config.run.max_seconds, sys.stderr)
            if config.run.progress and sys.stderr.isatty()
            else None
        )
        self.status: str | None = None
        self.memory = ProcessMemory({"main": os.getpid()})
        self.interval_returns: list[float] = []  # episodes since the last line: the sinks' histogram
        self.interval_stats = EpisodeStats()  # the envs' own per-episode figures since the last line
        self.metrics_file = run_dir.open_metrics()
        self.sinks = open_sinks(config, run_dir.path)

    # ------------------------------------------------------------------ inputs

    def mark_ready(self) -> None:
        """Every worker is up: training time (and fps) count from here, start-up apart."""
        self.started = self.last_log = self.last_progress = time.monotonic()
        self.ready_timing = self.last_timing = self.control.timing.copy()
        self.start_frames = self.frames  # a resumed run starts at its checkpoint's frames
        self.ready_env_steps = self.control.env_steps()
        self.frame_rate = StepRate(self.start_frames, self.started)
        updates = self.control.learner_stats[:, Stat.UPDATES]
        self.update_rates = [StepRate(float(updates[i]), self.started) for i in range(self.learners)]

    def watch_processes(self, pids: dict[str, int]) -> None:
        """Report the memory of these worker processes too (``{"executor-0": pid, ...}``)."""
        self.memory.watch(pids)

    def drain_episodes(self) -> None:
        for env, ret, _length, stats in self.take_episodes():
            self._into_windows(env, ret)
            self.interval_returns.append(ret)
            self.episodes += 1
            if stats:
                self.interval_stats.add(stats)

    def resume_windows(self, episodes: dict[int, list[tuple[int, int, float, int]]]) -> None:
        """A resumed run's return windows start as the stopped run's ended, not empty: ``episodes`` are the
        executors' saved ``{env: [(rollout, step, return, length), ...]}``, put in in the order they ended
        (rollout, step, env). Under torchrun rank 0 saved only its own envs', so its window starts with those."""
        ended = sorted((rollout, step, env, ret) for env, saved in episodes.items() for rollout, step, ret, _ in saved)
        for _rollout, _step, env, ret in ended:
            self._into_windows(env, ret, resumed=True)

    def _into_windows(self, env: int | None, ret: float, resumed: bool = False) -> None:
        """``env`` None: another rank's episode, in the run's window only."""
        self.returns.append(ret)
        if env is not None:
            self.learner_returns[self.learner_of[env]].append(ret)
            for section in self.sections:
                section.episode(env, ret, resumed)

    @property
    def return_mean(self) -> float:
        return float(np.mean(self.returns)) if self.returns else float("nan")

    @property
    def frames(self) -> float:
        local = self.local_frames
        return local + self.remote_frames(local)

    @property
    def local_frames(self) -> float:
        """What this engine's learners learned from (under torchrun: this rank's share)."""
        return float(self.control.learner_stats[:, Stat.FRAMES].sum())

    def mark_finished(self) -> None:
        """Training is over: wall time and fps stop here, before workers are torn down."""
        if self.finished_at is None:
            self.finished_at = time.monotonic()
            self.finished_env_steps = self.control.env_steps()

    def time_is_up(self) -> bool:
        return time.monotonic() - self.started >= self.config.run.max_seconds

    def target_reached(self) -> bool:
        """The mean return reached the target; with several learners, every learner's over its own envs."""
        enough = min(self.config.run.return_window, 10)
        windows = self.learner_returns if self.learners > 1 else [self.returns]
        return all(len(w) >= enough and np.mean(w) >= self.config.run.target_return for w in windows)

    def log_crossing(self) -> None:
        """A metrics line at the moment the target is first reached (once), with the episodes that reached it."""
        if not self.crossing_logged:
            self.crossing_logged = True
            self._log_line(time.monotonic())

    # ------------------------------------------------------------------ outputs

    def tick(self, force: bool = False) -> None:
        self.drain_episodes()
        now = time.monotonic()
        self._observe_rates(now)
        if force or now - self.last_log >= self.config.run.log_interval_s:
            self._log_line(now)
        if self.progress and now - self.last_progress >= PROGRESS_INTERVAL_S:
            self._progress_line(now)

    def _time_split(self, since: np.ndarray) -> dict[str, float]:
        """Share of the workers' time spent on each kind of work since ``since``."""
        return _shares(self.control.timing - since)

    def _time_split_by_role(self, since: np.ndarray) -> dict[str, dict[str, float]]:
        """The split of each role's workers apart: the whole run's averages a learner idle while the envs step
        into the executors' clocks, so that executors busy all the time read as if they waited. A role whose
        workers clocked nothing (actors inline in the executors clock as the executors) is left out."""
        ids = self.ids
        actors = ids.executors + ids.actors
        roles = {"executors": slice(0, ids.executors), "actors": slice(ids.executors, actors)}
        roles["learners"] = slice(actors, ids.total)
        delta = self.control.timing - since
        return {role: _shares(part) for role, rows in roles.items() if (part := delta[rows]).sum() > 0}

    def _log_line(self, now: float) -> None:
        stats = self.control.learner_stats[0]
        frames = self.frames
        self._observe_rates(now)
        lag_mean, lag_max = read_lag(stats)
        line = {
            "time_s": round(now - self.started, 3),
            "frames": int(frames),
            "fps": round(self.frame_rate.take(), 1),
            "updates": int(stats[Stat.UPDATES]),
            "episodes": self.episodes,
            "return_mean": finite_or_none(self.return_mean),
            "return_max": max(self.returns) if self.returns else None,
            "policy_loss": float(stats[Stat.POLICY_LOSS]),
            "value_loss": float(stats[Stat.VALUE_LOSS]),
            "entropy": float(stats[Stat.ENTROPY]),
            "grad_norm": float(stats[Stat.GRAD_NORM]),
            "lr": float(stats[Stat.LR]),
            "entropy_coef": float(stats[Stat.ENTROPY_COEF]),
            "policy_lag_mean": lag_mean,
            "policy_lag_max": lag_max,
            "env_errors": self.control.env_errors(),
            "time_split": self._time_split(self.last_timing),
            "rss_mb": self.memory.sample(),
        }
        if stats[Stat.RANKS_S] > 0:
            line["ranks_s"] = round(float(stats[Stat.RANKS_S]), 3)  # torchrun: in collectives with the other ranks
        for name, column in self.algorithm_metrics.items():  # in its registration's order
            line[name] = float(stats[column])
        for section in self.sections:
            line.update(section.fields(stats))
        line.update(self.interval_stats.fields())
        if self.per_learner:
            line["updates"] = int(self.control.learner_stats[:, Stat.UPDATES].sum())
            line.update(self._learner_lines([rate.take() for rate in self.update_rates]))
        self.last_timing = self.control.timing.copy()
        self.metrics_file.write(json.dumps(line) + "\n")
        for sink in self.sinks:
            sink.write(line, self.interval_returns)
        self.interval_returns = []
        self.interval_stats = EpisodeStats()
        self.last_log = now

    def _observe_rates(self, now: float) -> None:
        self.frame_rate.observe(self.frames, now)
        if self.per_learner:
            for rate, updates in zip(self.update_rates, self.control.learner_stats[:, Stat.UPDATES]):
                rate.observe(float(updates), now)

    def _learner_lines(self, rates: list[float]) -> dict:
        """Per-learner entries (``rates``: each learner's updates/s) and the consensus radius."""
        stats = self.control.learner_stats
        learners = []
        for i in range(self.learners):
            row, returns = stats[i], self.learner_returns[i]
            learners.append(
                {
                    "learner": i,
                    "frames": int(row[Stat.FRAMES]),
                    "updates": int(row[Stat.UPDATES]),
                    "updates_per_s": round(float(rates[i]), 2),
                    "return_mean": float(np.mean(returns)) if returns else None,
                    "update_norm": float(row[Stat.UPDATE_NORM]),
                }
            )
            for section in self.sections:  # the layers' own keys of each learner's entry
                learners[-1].update(section.learner_fields(row))
        lines: dict = {}
        for section in self.sections:
            lines.update(section.learners_fields(stats))
        return {**lines, "learners": learners}

    def _progress_state(self, elapsed_s: float) -> ProgressState:
        return ProgressState(self.frames, self.start_frames, elapsed_s, self.return_mean, self.episodes)

    def _progress_line(self, now: float) -> None:
        assert self.progress is not None, "a progress line is drawn only where one was opened"
        self.progress.update(self._progress_state(now - self.started))
        self.last_progress = now

    def summary(self, status: str) -> dict:
        now = time.monotonic()
        train_s = (self.finished_at or now) - self.started
        frames = self.frames
        until = self.control.env_steps() if self.finished_env_steps is None else self.finished_env_steps
        env_steps = until - self.ready_env_steps  # those of the training time, as train_s
        summary: dict[str, Any] = {
            "status": status,
            "frames": int(frames),
            "wall_s": round(now - self.created, 3),
            "startup_s": round(self.started - self.created, 3),
            "train_s": round(train_s, 3),
            "fps": round((frames - self.start_frames) / max(train_s, 1e-9), 1),
            # the envs' own pace: rows stepped, those of rollouts still in flight at the end too (hts runs one
            # ahead, async fills slots no batch took yet), which a short run's fps leaves out
            "env_steps": env_steps,
            "env_steps_per_s": round(env_steps / max(train_s, 1e-9), 1),
            "final_return_mean": finite_or_none(self.return_mean),
            "return_window": self.config.run.return_window,
            "target_return": finite_or_none(self.config.run.target_return),
            "stopped_by": self._stopped_by(status, train_s),
            "episodes": self.episodes,
            "episodes_reset_ahead": self.control.resets_ahead(),  # started in a spare (engine.reset_ahead)
            "updates": int(self.control.learner_stats[:, Stat.UPDATES].sum()),
            "env_errors": self.control.env_errors(),
            "time_split": self._time_split(self.ready_timing),
            "time_split_by_role": self._time_split_by_role(self.ready_timing),
            "rss_peak_mb": self._rss_peaks(),
            "env_id": self.config.env.id,
            "mode": self.config.engine.mode,
        }
        ranks_s = float(self.control.learner_stats[:, Stat.RANKS_S].sum())
        if ranks_s > 0:  # torchrun: what talking to the other ranks cost the learner
            summary["ranks_s"] = round(ranks_s, 3)
            summary["ranks_ms_per_update"] = round(1e3 * ranks_s / max(summary["updates"], 1), 3)
            learning = sum(
                float(self.control.timing[self.ids.learner(i), Clock.LEARNING]) for i in range(self.learners)
            )
            summary["ranks_share_of_learning"] = round(ranks_s / max(learning, 1e-9), 4)
        if self.per_learner:
            updates = self.control.learner_stats[:, Stat.UPDATES]
            summary.update(self._learner_lines([float(u) / max(train_s, 1e-9) for u in updates]))
        self.status = status
        return summary

    def _stopped_by(self, status: str, train_s: float) -> str:
        """What ended a run: the key that stopped it ("target" for run.target_return, "total_frames",
        "max_seconds"), or "fault" (a failed run) or "signal" (an interrupted one)."""
        if status != "complete":
            return "fault" if status == "failed" else "signal"
        if self.crossing_logged:
            return "target"
        return "max_seconds" if train_s >= self.config.run.max_seconds else "total_frames"

    def _rss_peaks(self) -> dict[str, float]:
        self.memory.sample()  # the main process now; workers already stopped keep their last reading
        return dict(self.memory.peaks)

    def close(self) -> None:
        if self.progress:
            train_s = (self.finished_at or time.monotonic()) - self.started
            self.progress.finish(self._progress_state(train_s), self.status or "stopped")
        failed: OSError | None = None
        for close in (self.metrics_file.close, *(sink.close for sink in self.sinks)):
            try:  # each file gets closed even when another cannot be written (a full disk)
                close()
            except OSError as exc:
                failed = failed or exc
        if failed is not None:
            raise failed
