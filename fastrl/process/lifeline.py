"""Child processes that never outlive their parent, and a parent that always reaps them: what the
run's supervisor (``supervisor``, ``worker``) and the multi-rank benchmark (``fastrl.bench.multinode``)
share about their children's lives."""

from __future__ import annotations

import ctypes
import multiprocessing
import signal

PR_SET_PDEATHSIG = 1


def die_with_parent() -> bool:
    """Linux: ask for SIGTERM when the parent process dies, even by SIGKILL. False where prctl is not
    available (elsewhere it is best effort: callers keep their own parent-pid checks and timeouts)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        return False
    return True


def orphaned() -> bool:
    """Whether the process that started this one is gone: read from multiprocessing's parent sentinel, a
    pipe the parent holds, so it holds for a child forked by a fork server too (whose OS parent is the
    server). Right after ``die_with_parent``: the parent died before it took effect, so no signal will come."""
    parent = multiprocessing.parent_process()
    return parent is not None and not parent.is_alive()


def stop_processes(processes: list, kill_wait_s: float) -> None:
    """Terminate every process still alive, then kill what has not exited within ``kill_wait_s``;
    reap them all. A process that never started (``pid`` None) is skipped."""
    started = [p for p in processes if p.pid is not None]
    for process in started:
        if process.is_alive():
            process.terminate()
    for process in started:
        process.join(kill_wait_s)
        if process.is_alive():
            process.kill()
            process.join()
