"""An executor's env calls, watched: the activity row names the call in flight, and a call that fails ends the
run or is counted and its env reset.

Before every env call the executor writes which env, step and action into its activity row (the watchdog names
them if the call never returns). An env that raises or returns what its spaces forbid ends the run with an
``EnvError`` naming all of it, or, with ``env.on_error = "reset"``, is reset: the failed step is marked done
with reward 0 (no bootstrap across it), the partial episode is dropped and the error counted.
"""

from __future__ import annotations

import logging
import traceback
from typing import NoReturn

from fastrl.buffers.control import Activity, Phase
from fastrl.envs.gym import EnvOutputError
from fastrl.errors import EnvError

log = logging.getLogger(__name__)

# activity columns and phases as plain ints: an IntEnum lookup costs more than the write, on every step
PHASE, ENV, STEP, ACTION, ERRORS, STEPS, RESETS_AHEAD = (
    int(c)
    for c in (
        Activity.PHASE,
        Activity.ENV,
        Activity.STEP,
        Activity.ACTION,
        Activity.ENV_ERRORS,
        Activity.ENV_STEPS,
        Activity.RESETS_AHEAD,
    )
)
IDLE, RESET, STEPPING = int(Phase.IDLE), int(Phase.RESET), int(Phase.STEP)
RESET_ATTEMPTS = 3  # with env.on_error = "reset": consecutive failed resets before giving up


class EnvFaults:
    """One executor's activity row and its envs' failures (``worker``: the executor's name in messages)."""

    def __init__(self, activity: memoryview, env_id: str, worker: str, on_error: str):
        self.activity, self.env_id, self.worker, self.on_error = activity, env_id, worker, on_error
        self.reset_attempts = RESET_ATTEMPTS if on_error == "reset" else 1

    def mark(self, phase: int, env: int, step: int, action: int) -> None:
        """Env ``env`` (global index) is in ``phase`` at ``step`` of its episode, with ``action`` (-1: none)."""
        activity = self.activity
        activity[ENV] = env
        activity[STEP] = step
        activity[ACTION] = action
        activity[PHASE] = phase

    def idle(self) -> None:
        self.activity[PHASE] = IDLE

    def failed(self, exc: Exception, env: int, phase: str, action, step: int, rollout: int, last: bool) -> None:
        """Env ``env``'s ``phase`` call ("step" or "reset") raised ``exc``: raise the ``EnvError`` that names it, or
        count the error and return, for the caller to reset the env (``last``: the final reset attempt failed)."""
        self.activity[PHASE] = IDLE
        what = f"returned {exc}" if isinstance(exc, EnvOutputError) else f"raised {type(exc).__name__}: {exc}"
        call = f"step(action={action})" if phase == "step" else "reset()"
        message = (
            f"env {self.env_id!r} #{env} on {self.worker} {what}, in {call} at step {step} of its episode"
            + (f" (rollout {rollout})" if rollout >= 0 else "")  # async envs and start-up resets: no rollout
        )
        details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        if self.on_error == "raise":
            raise EnvError(message + "; set env.on_error = 'reset' to reset a failing env and go on", details) from exc
        if last:
            raise EnvError(f"{message}; it failed {RESET_ATTEMPTS} resets in a row", details) from exc
        self.activity[ERRORS] += 1
        first = self.activity[ERRORS] == 1
        log.warning("%s; resetting it (env.on_error = 'reset')%s", message, "\n" + details if first else "")

    def group_failed(self, exc: Exception, envs: list[int], actions: list) -> NoReturn:
        """A backend's group step (``EnvGroup``) of envs ``envs`` raised ``exc``: the run ends, naming them."""
        self.activity[PHASE] = IDLE
        details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        raise EnvError(
            f"env {self.env_id!r} #{envs} on {self.worker}: its backend's group step(actions={actions}) raised "
            f"{type(exc).__name__}: {exc}",
            details,
        ) from exc
