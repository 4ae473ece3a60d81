"""What a test session leaves on the machine: processes it started, `/dev/shm` entries (fastrl's segments,
torch's, multiprocessing's ``sem.*`` semaphores) and files in the temporary folder.

``tests/conftest.py``'s session fixture takes a ``Snapshot`` as the session (each xdist worker: its own) starts
and ``leftovers`` of it as it ends. The session process is made a child subreaper (Linux ``prctl``), so a worker
whose parent died (a killed run's executor, a killed command's resource tracker) is re-parented to it rather than
to init and is still counted as the session's. A `/dev/shm` entry counts when it appeared during the session and
no live process maps or holds it: one a running sibling (the other xdist worker, another run on the machine)
still uses is not a leftover, one nobody holds is, whoever made it.
"""

from __future__ import annotations

import ctypes
import os
import time
from dataclasses import dataclass, field

SHM = "/dev/shm"
PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Orphaned descendants are re-parented to this process (Linux 3.4+); False where the kernel refuses."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def process_stats() -> dict[int, list[str]]:
    """pid -> the fields of /proc/<pid>/stat after the command's name (state, parent pid, process group, ...) of
    every process."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    out[int(entry)] = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
    return out


def _parents() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) of every process."""
    return {pid: (int(fields[1]), fields[0]) for pid, fields in process_stats().items()}


def descendants(pid: int | None = None) -> set[int]:
    """The live (non-zombie) processes below ``pid`` (this process)."""
    pid = os.getpid() if pid is None else pid
    table = _parents()
    children: dict[int, list[int]] = {}
    for child, (parent, _) in table.items():
        children.setdefault(parent, []).append(child)
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return {p for p in found if table.get(p, (0, "Z"))[1] not in "ZX"}


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def shm_entries() -> set[str]:
    try:
        return set(os.listdir(SHM))
    except OSError:
        return set()


def held_shm() -> set[str]:
    """The `/dev/shm` names some live process maps or has open."""
    held = set()
    prefix = SHM + "/"
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/maps") as f:
                for line in f:
                    at = line.find(prefix)
                    if at >= 0:
                        held.add(line[at + len(prefix) :].split()[0])
            for fd in os.listdir(f"/proc/{entry}/fd"):
                target = os.readlink(f"/proc/{entry}/fd/{fd}")
                if target.startswith(prefix):
                    held.add(target[len(prefix) :].split()[0])
        except OSError:
            continue
    return held


@dataclass
class Snapshot:
    processes: set[int] = field(default_factory=descendants)
    shm: set[str] = field(default_factory=shm_entries)


def leftovers(before: Snapshot, wait_s: float = 5.0, ignore=("multiprocessing.resource_tracker",)) -> dict:
    """What appeared since ``before`` and is still there: {"processes": [(pid, cmdline)], "shm": [name]}.
    Processes get ``wait_s`` to end (a run's workers leave within a second of its end). ``ignore``: command lines
    of helpers that end with this process itself (multiprocessing's resource tracker reads its pipe to us)."""
    deadline = time.monotonic() + wait_s
    while True:
        alive = sorted(descendants() - before.processes)
        procs = [(pid, cmdline(pid)) for pid in alive]
        procs = [(pid, line) for pid, line in procs if line and not any(mark in line for mark in ignore)]
        new = shm_entries() - before.shm
        stale = sorted(new - held_shm()) if new else []
        if (not procs and not stale) or time.monotonic() > deadline:
            return {"processes": procs, "shm": stale}
        time.sleep(0.1)
