"""fastrl's exceptions. Every error fastrl raises for a user to read derives from ``FastrlError``, so
``except fastrl.FastrlError`` catches them all; each also derives from the builtin a caller would
expect (a bad value is a ``ValueError``, a failed run a ``RuntimeError``). Here, below every role, so
that config, sampling and learning raise them without importing the process layer (which turns a
worker's error into the run's one clear message, ``fastrl.process.faults``)."""

from __future__ import annotations

import errno

DISTRIBUTION = "fastrl-engine"  # the name pip knows fastrl by: PyPI's "fastrl" is another project


def install_hint(extra: str) -> str:
    """The command that installs an optional extra, for a message that names what is missing."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


class FastrlError(Exception):
    """The base of every error fastrl reports: its message says what went wrong and where."""


class ConfigError(FastrlError, ValueError):
    """A configuration value or key that cannot be used; the message says which and why."""


class EnvError(FastrlError, RuntimeError):
    """An env raised, or returned something its declared spaces do not allow.

    ``details`` is the env's own traceback, shown under the message.
    """

    def __init__(self, message: str, details: str = ""):
        super().__init__(message)
        self.details = details


class NonFiniteError(FastrlError, FloatingPointError):
    """NaN or inf in the loss, the gradients or the parameters; the bad update was not published."""


class DiskFullError(FastrlError, OSError):
    """The disk a run writes to is full (errno ENOSPC); the message says what was saved and how to go on."""

    def __init__(self, message: str):
        super().__init__(errno.ENOSPC, message)

    def __str__(self) -> str:
        return str(self.strerror)


DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # no room to write: the disk, a quota, a file-size limit


def no_room(code: int | None) -> str:
    """What a ``DISK_FULL`` errno says about the disk, for a message."""
    if code == errno.EDQUOT:
        return "is over this user's quota"
    if code == errno.EFBIG:
        return "takes no more from this process (a file-size limit: ulimit -f)"
    return "is full"


class StopRequested(Exception):
    """Not an error: the stop flag was raised while a worker was waiting inside a step (a gala peer),
    and the worker leaves cleanly."""
