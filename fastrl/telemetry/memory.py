"""Resident memory (RSS) of the run's processes, read by the main process from ``/proc``.

The workers do nothing for it: the main process reads ``/proc/<pid>/statm`` of every process
it started, at each log interval, so a leak in any of them shows as a rising line and no
worker's hot loop pays for it. A pid is only trusted while its start time
(``/proc/<pid>/stat`` field 22) is the one seen when it was registered: a worker that ended
and whose pid was reused by another process is not measured by mistake.
Linux only; elsewhere (no ``/proc``) there is nothing to read and the columns stay empty.
"""

from __future__ import annotations

import os

_PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20 if hasattr(os, "sysconf") else 4096 / 2**20


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # the name in (...) may hold spaces
    except OSError:
        return None
    if fields[0] == "Z":  # a zombie holds no memory worth reporting
        return None
    return int(fields[19])


def rss_mb(pid: int) -> float | None:
    """Resident set size of ``pid`` in MiB, or None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            resident_pages = int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return resident_pages * _PAGE_MB


class ProcessMemory:
    """RSS of named processes, and the peak of each seen so far."""

    def __init__(self, pids: dict[str, int] | None = None):
        self._pids: dict[str, tuple[int, int | None]] = {}
        self.peaks: dict[str, float] = {}
        self.watch(pids or {})

    def watch(self, pids: dict[str, int]) -> None:
        """Measure these processes from now on (``{"executor-0": pid, ...}``)."""
        for name, pid in pids.items():
            self._pids[name] = (pid, _start_time(pid))

    def sample(self) -> dict[str, float]:
        """``{name: MiB}`` for every watched process still running, rounded to 0.1 MiB; updates the peaks."""
        out = {}
        for name, (pid, started) in self._pids.items():
            if _start_time(pid) != started:
                continue
            mb = rss_mb(pid)
            if mb is None:
                continue
            out[name] = round(mb, 1)
            self.peaks[name] = max(self.peaks.get(name, 0.0), out[name])
        return out
