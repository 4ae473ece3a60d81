"""The run's control block: stop flags, heartbeats, readiness, timing and learner statistics.

Plain shared arrays that every process reads and writes without messages: the main process
supervises through them and telemetry reads them at each log interval.
"""
from __future__ import annotations

import time
from enum import IntEnum

import numpy as np


class Flag(IntEnum):
    STOP = 0  # main -> everyone: leave your loop now
    COMPLETE = 1  # learner -> main: the frame budget is spent, final checkpoint written
    FINISH = 2  # main -> learner: finish at the next update (target return reached, Ctrl-C)


class Clock(IntEnum):
    """Columns of the timing table: seconds each worker spent on each kind of work."""

    ENV = 0
    INFERENCE = 1
    LEARNING = 2
    WAITING = 3


class Stat(IntEnum):
    """Columns of the learner statistics row."""

    FRAMES = 0
    UPDATES = 1
    VERSION = 2
    POLICY_LOSS = 3
    VALUE_LOSS = 4
    ENTROPY = 5
    GRAD_NORM = 6
    LAG_MEAN = 7
    LAG_MAX = 8
    AGENT_STEPS = 9


def control_arrays(workers: int, learners: int) -> list[tuple[str, tuple[int, ...], str]]:
    return [
        ("flags", (8,), "int64"),
        ("heartbeat", (workers,), "float64"),
        ("ready", (workers,), "int64"),
        ("timing", (workers, len(Clock)), "float64"),
        ("learner_stats", (learners, 16), "float64"),
    ]


class Control:
    def __init__(self, arrays: dict[str, np.ndarray]):
        self.flags = arrays["flags"]
        self.heartbeat = arrays["heartbeat"]
        self.ready = arrays["ready"]
        self.timing = arrays["timing"]
        self.learner_stats = arrays["learner_stats"]

    def set(self, flag: Flag) -> None:
        self.flags[flag] = 1

    def is_set(self, flag: Flag) -> bool:
        return bool(self.flags[flag])

    def beat(self, worker: int) -> None:
        self.heartbeat[worker] = time.monotonic()
