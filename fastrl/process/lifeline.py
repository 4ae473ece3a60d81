"""Child processes that never outlive their parent, and a parent that always reaps them: what the
run's supervisor (``supervisor``, ``worker``) and the multi-rank benchmark (``fastrl.bench.multinode``)
share about their children's lives; and ``fastrl cleanup``'s way to end the workers a killed run left."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal

PR_SET_PDEATHSIG = 1


def die_with_parent(signum: int = signal.SIGTERM) -> bool:
    """Linux: ask for ``signum`` when the parent process dies, even by SIGKILL. False where prctl is not
    available (elsewhere it is best effort: callers keep their own parent-pid checks and timeouts)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, int(signum))
    except (OSError, AttributeError):
        return False
    return True


def orphaned() -> bool:
    """Whether the process that started this one is gone: read from multiprocessing's parent sentinel, a
    pipe the parent holds, so it holds for a child forked by a fork server too (whose OS parent is the
    server). Right after ``die_with_parent``: the parent died before it took effect, so no signal will come."""
    parent = multiprocessing.parent_process()
    return parent is not None and not parent.is_alive()


def workers_of_dead_runs() -> dict[int, str]:
    """``{pid: segment}`` of this user's processes that map a shared-memory segment of a run whose main process
    is gone: workers a killed run left behind (one blocked in C outlives any signal it could catch). Read from
    ``/proc/<pid>/maps`` (Linux; elsewhere nothing is found)."""
    from fastrl.buffers.arena import PREFIX, SHM_DIR, pid_alive, segment_owner_pid

    found: dict[int, str] = {}
    marker = os.path.join(SHM_DIR, PREFIX)
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != os.geteuid():
                continue
            with open(f"/proc/{entry}/maps") as f:
                paths = [line.split(maxsplit=5)[5].rstrip("\n") for line in f if marker in line]
        except (OSError, IndexError):
            continue  # gone meanwhile, or not ours to read
        for path in paths:
            name = os.path.basename(path.removesuffix(" (deleted)"))
            owner = segment_owner_pid(name)
            if owner is not None and owner != int(entry) and not pid_alive(owner):
                found[int(entry)] = name
                break
    return found


def kill_workers_of_dead_runs() -> dict[int, str]:
    """SIGKILL every process ``workers_of_dead_runs`` finds; returns them."""
    found = workers_of_dead_runs()
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return found


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
