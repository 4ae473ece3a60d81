"""The live progress line on a terminal: percent done, ETA, the fps since this start, and a final line.

Hand-written rather than tqdm or rich: the line is one ``\\r``-rewritten string every half
second from the main process, and it has to say things a bar does not (the frames made since
a resume, the return, the episodes); neither library is needed for that.

fps counts only the frames made since this start: after ``--resume`` the run starts at its
checkpoint's frames, which were not made in the time measured here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TextIO

_CLEAR_TO_END = "\x1b[K"


def clock(seconds: float) -> str:
    """``3725`` -> ``'1:02:05'``; ``'--:--'`` when unknown."""
    if not math.isfinite(seconds) or seconds < 0:
        return "--:--"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


@dataclass
class ProgressState:
    frames: float  # the run's frames, those of a resumed checkpoint included
    start_frames: float  # the frames this start began at (a resumed checkpoint's)
    elapsed_s: float  # training time since this start
    return_mean: float
    episodes: int

    @property
    def fps_since_start(self) -> float:
        return (self.frames - self.start_frames) / max(self.elapsed_s, 1e-9)


class ProgressLine:
    def __init__(self, total_frames: int, max_seconds: float, stream: TextIO):
        self.total_frames, self.max_seconds = total_frames, max_seconds
        self.stream: TextIO | None = stream

    def fraction(self, state: ProgressState) -> float:
        """How much of the run is done: of the frame budget, or of run.max_seconds if that ends it sooner."""
        done = state.frames / self.total_frames
        if math.isfinite(self.max_seconds):
            done = max(done, state.elapsed_s / self.max_seconds)
        return min(done, 1.0)

    def eta_s(self, state: ProgressState) -> float:
        fps = state.fps_since_start
        left = (self.total_frames - state.frames) / fps if fps > 0 else math.inf
        return max(min(left, self.max_seconds - state.elapsed_s), 0.0)

    def text(self, state: ProgressState) -> str:
        return (
            f"{100 * self.fraction(state):5.1f}%  {int(state.frames):>11,d} frames  "
            f"{state.fps_since_start:>8,.0f} fps  "
            f"ETA {clock(self.eta_s(state)):>8}  return {state.return_mean:8.2f}  episodes {state.episodes:>6d}  "
            f"{clock(state.elapsed_s):>8}"
        )

    def update(self, state: ProgressState) -> None:
        self._write(f"\r{self.text(state)}{_CLEAR_TO_END}")

    def final_text(self, state: ProgressState, status: str) -> str:
        made = int(state.frames - state.start_frames)
        resumed = f" ({made:,d} since the resume)" if state.start_frames else ""
        return (
            f"{status}: {int(state.frames):,d} frames{resumed} in {clock(state.elapsed_s)}, "
            f"{state.fps_since_start:,.0f} fps, return {state.return_mean:.2f}, {state.episodes} episodes"
        )

    def finish(self, state: ProgressState, status: str) -> None:
        """Replace the live line by one that stays: how the run ended and what it did."""
        self._write(f"\r{self.final_text(state, status)}{_CLEAR_TO_END}\n")

    def _write(self, text: str) -> None:
        """A terminal that went away (SIGHUP, then EIO) ends the line, not the run."""
        if self.stream is None:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except OSError:
            self.stream = None


def closing_line(summary: dict) -> str:
    """The sentence a completed run ends with: what stopped it (the target, the frame budget or the time budget),
    after how long and how many frames, and the mean return it stopped at."""
    window = summary.get("return_window", 0)
    mean = summary.get("final_return_mean")
    target = summary.get("target_return")
    score = f"mean return {mean:.2f} over the last {window} episodes" if mean is not None else "no episode ended"
    took = f"{clock(summary['train_s'])} of training and {summary['frames']:,d} frames"
    stopped_by = summary.get("stopped_by")
    if stopped_by == "target":
        return f"reached the target in {took}: {score} >= {target:g}"
    missed = f"; the target {target:g} was not reached" if target is not None else ""
    budget = "the frame budget (run.total_frames)"
    if stopped_by == "max_seconds":
        budget = "the time budget (run.max_seconds)"
    return f"stopped at {budget} after {took}: {score}{missed}"
