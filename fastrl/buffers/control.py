"""The run's control block: stop flags, heartbeats, readiness, timing and learner statistics.

Plain shared arrays that every process reads and writes without messages: the main process
supervises through them and telemetry reads them at each log interval. They are also how a
run ends cleanly when a queue may be wedged: nothing here takes a lock.
"""

from __future__ import annotations

import time
from enum import IntEnum

import numpy as np


class Flag(IntEnum):
    STOP = 0  # main -> everyone: leave your loop now
    FINISH = 2  # main -> learner: finish at the next update (target return reached, Ctrl-C)
    SIGNALLED = 3  # main -> learner: a signal asked for the stop: save the current state at once, then finish


class Done(IntEnum):
    """Columns of a learner's completion row (the run is complete or saved when every learner's is)."""

    COMPLETE = 0  # its frame budget is spent, final checkpoint written
    SAVED = 1  # its last checkpoint is written (final, or of the last good state on a stop)


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
    UPDATE_NORM = 10  # ‖θ after − θ before‖ of the last optimizer step
    MAX_UPDATE_NORM = 11  # the largest so far (a layer's bound may read it)
    LR = 12  # the learning rate of the last optimizer step (algo.lr_schedule)
    RANKS_S = 13  # torchrun: seconds in collectives with the other ranks' learners (gradient all-reduce, agreement)
    ENTROPY_COEF = 14  # the entropy bonus weight of the last update (algo.entropy_schedule)
    LAG_WRITES = 15  # counts the writes of the lag pair, odd while one is under way (write_lag, read_lag)


# the core's columns; the named ones follow: the layers' (Control.stat_column), then the algorithm's own metrics
# (Control.metric_column), each where the run's plan lists it
STAT_COLUMNS = len(Stat)


class Activity(IntEnum):
    """Columns of a worker's activity row: what an executor is doing, for the watchdog's message."""

    PHASE = 0  # a Phase
    ENV = 1  # the env (global index) being reset or stepped
    STEP = 2  # that env's step within its episode
    ACTION = 3  # the action being applied
    ENV_ERRORS = 4  # env errors survived with env.on_error = "reset"
    ENV_STEPS = 5  # agent rows stepped: the envs' own pace, frames in flight included (the summary's env_steps)
    RESETS_AHEAD = 6  # episodes a spare instance had started while its executor would have waited (reset_ahead)


class Phase(IntEnum):
    IDLE = 0
    RESET = 1
    STEP = 2


ACTIVITY_COLUMNS = 8  # one 64-byte cache line per worker: executors never share a line


def write_lag(row: np.ndarray, mean: float, maximum: float) -> None:
    """One update's policy lag into a learner's stats row, as a pair no reader sees half written: a seqlock with
    one writer, the learner (its count is odd while the pair changes). Without it the metrics, which read the row
    at any moment, could take a mean from one update and a smaller max from the next."""
    row[Stat.LAG_WRITES] += 1
    row[Stat.LAG_MEAN], row[Stat.LAG_MAX] = mean, maximum
    row[Stat.LAG_WRITES] += 1  # x86 keeps stores in order, so the pair lands before the count turns even


def read_lag(row: np.ndarray, tries: int = 100_000) -> tuple[float, float]:
    """A learner's (mean, max) policy lag from one update: read again while a write is under way. A learner that
    died mid-write leaves the count odd: after ``tries`` the pair is taken as it stands."""
    for _ in range(tries):
        writes = row[Stat.LAG_WRITES]
        mean, maximum = float(row[Stat.LAG_MEAN]), float(row[Stat.LAG_MAX])
        if writes % 2 == 0 and row[Stat.LAG_WRITES] == writes:
            break
    return mean, maximum


def control_arrays(workers: int, learners: int, named_stats: int = 0) -> list[tuple[str, tuple[int, ...], str]]:
    """The control block's arrays; ``named_stats``: the named columns after the core's in each learner's stats row
    (the layers' stats and the algorithm's metrics)."""
    return [
        ("flags", (8,), "int64"),
        ("heartbeat", (workers,), "float64"),
        ("ready", (workers,), "int64"),
        ("timing", (workers, len(Clock)), "float64"),
        ("learner_stats", (learners, STAT_COLUMNS + named_stats), "float64"),
        ("learner_done", (learners, len(Done)), "int64"),
        ("activity", (workers, ACTIVITY_COLUMNS), "int64"),
        # env-state saves at a checkpoint barrier: [0] = rollout + 1 the learner asks for,
        # [1 + w] = rollout + 1 worker w last saved (0: none)
        ("env_saves", (workers + 1,), "int64"),
    ]


def layer_columns(layer_stats: tuple[str, ...]) -> dict[str, int]:
    """Each layer stat's column of a learner's stats row: after the core's, in the plan's order."""
    return {name: STAT_COLUMNS + k for k, name in enumerate(layer_stats)}


def metric_columns(layer_stats: tuple[str, ...], metrics: tuple[str, ...]) -> dict[str, int]:
    """Each of the algorithm's own metrics' column of a learner's stats row (its registration's ``metrics``, in
    their order): after the layers', so that a layer finds its own from the layers' names alone."""
    first = STAT_COLUMNS + len(layer_stats)
    return {name: first + k for k, name in enumerate(metrics)}


class Control:
    def __init__(self, arrays: dict[str, np.ndarray], layer_stats: tuple[str, ...] = (), metrics: tuple[str, ...] = ()):
        """``layer_stats``, ``metrics``: the names of the layers' and the algorithm's columns, as the plan lists
        them (``fastrl.buffers.BufferPlan``)."""
        self.layer_columns = layer_columns(layer_stats)
        # the algorithm's own figures: what its rule reports beside the losses, by name, in its registration's order
        self.metric_columns = metric_columns(layer_stats, metrics)
        self.flags = arrays["flags"]
        self.heartbeat = arrays["heartbeat"]
        self.ready = arrays["ready"]
        self.timing = arrays["timing"]
        self.learner_stats = arrays["learner_stats"]
        self.learner_done = arrays["learner_done"]
        self.activity = arrays["activity"]
        self.env_saves = arrays["env_saves"]

    def stat_column(self, name: str) -> int:
        """The column of a layer's stat ``name`` (its ``Layer.stats``) in each learner's stats row."""
        return self.layer_columns[name]

    def metric_column(self, name: str) -> int:
        """The column of the algorithm's metric ``name`` (its ``Algorithm.metrics``) in each learner's stats row."""
        return self.metric_columns[name]

    def set(self, flag: Flag) -> None:
        self.flags[flag] = 1

    def is_set(self, flag: Flag) -> bool:
        return bool(self.flags[flag])

    def mark_learner(self, learner: int, what: Done) -> None:
        self.learner_done[learner, what] = 1

    def all_learners(self, what: Done) -> bool:
        return bool(self.learner_done[:, what].all())

    @property
    def complete(self) -> bool:
        """Every learner spent its frame budget and wrote its final checkpoint."""
        return self.all_learners(Done.COMPLETE)

    @property
    def saved(self) -> bool:
        return self.all_learners(Done.SAVED)

    def beat(self, worker: int) -> None:
        self.heartbeat[worker] = time.monotonic()

    def request_env_saves(self, rollout: int) -> None:
        self.env_saves[0] = rollout + 1

    def requested_env_save(self) -> int:
        """The rollout whose start the learner wants env states saved at; -1 for none."""
        return int(self.env_saves[0]) - 1

    def mark_env_saved(self, worker: int, rollout: int) -> None:
        self.env_saves[1 + worker] = rollout + 1

    def env_saved(self, workers: range, rollout: int) -> bool:
        return bool((self.env_saves[1 + workers.start : 1 + workers.stop] == rollout + 1).all())

    def env_errors(self) -> int:
        return int(self.activity[:, Activity.ENV_ERRORS].sum())

    def env_steps(self) -> int:
        return int(self.activity[:, Activity.ENV_STEPS].sum())

    def resets_ahead(self) -> int:
        return int(self.activity[:, Activity.RESETS_AHEAD].sum())
