"""What can end a run early, and the one paragraph the user reads about it.

Every fault ends the run the same way (supervisor.py): stop every worker, keep a checkpoint of
the last good parameters, free the shared memory, then raise ``RunFailed`` (exit 1) or
``RunInterrupted`` (exit 128 + the signal: 129 SIGHUP, 130 Ctrl-C, 143 SIGTERM) whose message
says what failed, where, and where the checkpoint is. This module only builds those exceptions and
messages; it imports no torch.
"""

from __future__ import annotations

import queue
import signal
import traceback
from dataclasses import dataclass

from fastrl.errors import DISK_FULL, DiskFullError, EnvError, FastrlError, NonFiniteError, no_room


@dataclass
class Fault:
    """Why a run stopped: ``what`` one sentence naming the worker, ``details`` a traceback or stack."""

    what: str
    details: str = ""
    worker: str | None = None  # the worker it happened in, when one
    stalled: bool = False  # that worker is stuck: waiting for it (e.g. for its checkpoint) is pointless


@dataclass(frozen=True)
class Outcome:
    """Where the run's checkpoint is after the teardown, for the closing sentence."""

    run_dir: str
    checkpoint: str | None  # path of latest.pt, or None when none could be written
    checkpoint_note: str  # "update 12, 480 frames" or why there is none
    exact: bool = False  # the checkpoint was taken at a barrier with the env states: resuming is exact
    resume_command: str = "fastrl train --resume {run_dir}"  # under torchrun: every rank resumes the run
    unwritten: str = ""  # what the teardown could not write (a full disk), and why


class RunFailed(FastrlError, RuntimeError):
    """A run ended by a fault; the message is the paragraph the user sees. Exit code 1."""

    exit_code = 1

    def __init__(self, message: str, checkpoint: str | None = None, run_dir: str | None = None):
        super().__init__(message)
        self.checkpoint, self.run_dir = checkpoint, run_dir


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (exit 130), SIGTERM (143) or SIGHUP (129) ended the run, cleanly and with a checkpoint."""

    def __init__(self, message: str, signal_name: str, checkpoint: str | None = None, run_dir: str | None = None):
        super().__init__(message)
        self.signal_name, self.checkpoint, self.run_dir = signal_name, checkpoint, run_dir

    @property
    def exit_code(self) -> int:
        """128 + the signal's number, as a shell reports a process the signal ended."""
        return 128 + int(getattr(signal.Signals, self.signal_name, signal.SIGINT))

    def __str__(self) -> str:
        return str(self.args[0])


def describe_exception(exc: BaseException, queue_timeout_s: float) -> str:
    """One line for an exception raised inside a worker; queue timeouts get their likely cause."""
    if isinstance(exc, queue.Full):
        return (
            f"a queue stayed full for reliability.queue_timeout_s = {queue_timeout_s:g} s: its reader is dead or "
            "stuck, or one message is larger than the queue"
        )
    if isinstance(exc, queue.Empty):
        return f"a queue stayed empty for reliability.queue_timeout_s = {queue_timeout_s:g} s"
    if isinstance(exc, (EnvError, NonFiniteError, DiskFullError)):
        return str(exc)  # already a full sentence naming what and where
    if isinstance(exc, OSError) and exc.errno in DISK_FULL:
        where = exc.filename or "the run directory"
        return f"the disk holding {where} {no_room(exc.errno)} ({exc.strerror}); free space, then resume"
    return f"{type(exc).__name__}: {exc}"


def exception_details(exc: BaseException) -> str:
    """The traceback to show: an env's own when it is an EnvError, else the worker's."""
    if isinstance(exc, EnvError) and exc.details:
        return exc.details
    if isinstance(exc, OSError) and exc.errno in DISK_FULL:
        return ""  # not a bug: the message says all there is
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def closing_sentence(outcome: Outcome) -> str:
    unwritten = f" Not written: {outcome.unwritten}." if outcome.unwritten else ""
    if outcome.checkpoint is None:
        return (
            f"Every worker was stopped and the shared memory freed; no checkpoint could be written "
            f"({outcome.checkpoint_note}).{unwritten}"
        )
    return (
        f"Every worker was stopped and the shared memory freed; the last good parameters "
        f"({outcome.checkpoint_note}) are in {outcome.checkpoint}; go on with: "
        + outcome.resume_command.format(run_dir=outcome.run_dir)
        + unwritten
    )


def failure_message(fault: Fault, outcome: Outcome) -> str:
    text = f"{fault.what.rstrip('.')}. {closing_sentence(outcome)}"
    if fault.details:
        text += "\n" + fault.details.rstrip()
    return text


def interrupt_message(signal_name: str, exact: bool, outcome: Outcome) -> str:
    how = "at a rollout barrier (resuming continues exactly)" if exact else "mid-rollout (resuming restarts the envs)"
    if outcome.checkpoint is None:
        how = "before it had trained"
    return f"{signal_name} received: the run stopped {how}. {closing_sentence(outcome)}"
