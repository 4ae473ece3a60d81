"""The errors a worker raises from inside its role; the process layer (``fastrl.process.faults``)
turns them into the run's one clear message. Here, below every role, so that sampling and learning
raise them without importing the process layer."""
from __future__ import annotations


class EnvError(RuntimeError):
    """An env raised, or returned something its declared spaces do not allow.

    ``details`` is the env's own traceback, shown under the message.
    """

    def __init__(self, message: str, details: str = ""):
        super().__init__(message)
        self.details = details


class NonFiniteError(FloatingPointError):
    """NaN or inf in the loss, the gradients or the parameters; the bad update was not published."""


class StopRequested(Exception):
    """The stop flag was raised while a worker was waiting inside a step (a gala peer): leave cleanly."""
