"""The watchdog: a worker whose heartbeat is older than ``reliability.watchdog_s`` is stuck.

Workers beat every ~0.2 s from their loop, so a stale heartbeat means the worker is inside
one call that does not return: an env step, a wedged queue (faster-fifo's mutex held by a dead
process), a deadlock. Executors write which env, step and action they are in before every env
call, so the message can name the stuck env; the worker's Python stack (faulthandler, on
SIGUSR1) shows where it is.
"""

from __future__ import annotations

import os
import signal
import time

from fastrl.buffers.control import Activity, Control, Phase
from fastrl.process.faults import Fault
from fastrl.process.worker import stack_file
from fastrl.spec import WorkerIds

STACK_WAIT_S = 0.3


def stale_worker(control: Control, watchdog_s: float, executors: int = 0) -> int | None:
    """The worker stuck longest among those whose last heartbeat is older than ``watchdog_s``, if any: one
    stuck worker soon stalls those that wait on it (an executor waiting for a frozen actor's actions), and
    the one that stopped first is the cause. An executor outside any env call (``executors``: the first
    workers) is waiting on an actor or a learner: where one of those is stale too, it is the cause, even if the
    executor's wait began a moment before it froze (an actor that had not yet answered, on a loaded machine)."""
    ages = time.monotonic() - control.heartbeat
    stale = (ages > watchdog_s).nonzero()[0]
    if not len(stale):
        return None
    stalest = int(stale[ages[stale].argmax()])
    waited_on = stale[stale >= executors]
    if stalest < executors and len(waited_on) and control.activity[stalest, Activity.PHASE] == Phase.IDLE:
        return int(waited_on[ages[waited_on].argmax()])
    return stalest


def stall_fault(
    control: Control, ids: WorkerIds, worker: int, process: str, pid: int | None, env_id: str, run_dir: str
) -> Fault:
    """``process``: the name of the process ``worker`` runs in (an inline actor runs in its executor's)."""
    name = ids.name(worker)
    age = time.monotonic() - float(control.heartbeat[worker])
    what = f"{name} (pid {pid}) has made no progress for {age:.1f} s (reliability.watchdog_s)"
    activity = control.activity[worker]
    phase = int(activity[Activity.PHASE])
    if worker < ids.executors and phase != Phase.IDLE:
        call = "step" if phase == Phase.STEP else "reset"
        named = phase == Phase.STEP and activity[Activity.ACTION] >= 0  # -1: a vector action (Box, MultiDiscrete)
        action = f" of action {int(activity[Activity.ACTION])}" if named else ""
        what += (
            f": it is stuck in env {env_id!r} #{int(activity[Activity.ENV])}, in the {call}{action} at step "
            f"{int(activity[Activity.STEP])} of its episode"
        )
    else:
        what += ": it is not inside an env call (a wedged queue or a hang in the worker itself)"
    return Fault(what, _stack(pid, run_dir, process), worker=process, stalled=True)


def _stack(pid: int | None, run_dir: str, name: str) -> str:
    """Ask the worker for its Python stack (faulthandler on SIGUSR1) and read it back."""
    if pid is None:
        return ""
    path = stack_file(run_dir, name)
    try:
        os.kill(pid, signal.SIGUSR1)
    except OSError:
        return ""
    deadline = time.monotonic() + STACK_WAIT_S
    text = ""
    while time.monotonic() < deadline:
        time.sleep(0.02)
        try:
            text = path.read_text()
        except OSError:
            return ""
        if text.strip():
            break
    return f"{name}'s stack:\n{text}" if text.strip() else ""
