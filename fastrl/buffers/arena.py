"""One named shared-memory segment per run, carved into numpy arrays by a Layout.

The segment is a file in /dev/shm mapped with mmap. Only the main process creates and
unlinks it; workers attach by name. We use plain files rather than
``multiprocessing.shared_memory`` because its resource tracker registers every attach and
unlinks (or warns) when any attaching process exits, which is wrong for one owner and many
readers. Names carry the owner's pid so a later start can sweep segments of dead runs.
"""

from __future__ import annotations

import mmap
import os
import secrets
from dataclasses import dataclass

import numpy as np

from fastrl.buffers.layout import Layout
from fastrl.errors import FastrlError

SHM_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else "/tmp"
PREFIX = "fastrl_"


class ShmSpaceError(FastrlError, RuntimeError):
    """Not enough shared memory (or RAM) for the run's buffers."""


def new_segment_name(tag: str = "run") -> str:
    return f"{PREFIX}{os.getpid()}_{secrets.token_hex(4)}_{tag}"


def shm_free_bytes() -> int:
    st = os.statvfs(SHM_DIR)
    return st.f_bavail * st.f_frsize


def check_space(nbytes: int) -> None:
    """Fail before starting anything if the buffers cannot fit in /dev/shm and RAM."""
    free_shm = shm_free_bytes()
    available_ram = _available_ram_bytes()
    if nbytes > free_shm or (available_ram is not None and nbytes > available_ram):
        gib = 1024**3
        raise ShmSpaceError(
            f"the trajectory buffers need {nbytes / gib:.2f} GiB of shared memory, but {SHM_DIR} has "
            f"{free_shm / gib:.2f} GiB free and RAM {((available_ram or 0) / gib):.2f} GiB available; "
            "lower engine.envs or engine.rollout, or enlarge /dev/shm (e.g. docker --shm-size)"
        )


def _available_ram_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


@dataclass(frozen=True)
class ArenaSpec:
    """What a worker needs to attach: picklable and tiny."""

    name: str
    layout: Layout


class Arena:
    def __init__(self, spec: ArenaSpec, fd: int, owner: bool):
        self.spec = spec
        self.owner = owner
        self._mmap = mmap.mmap(fd, spec.layout.nbytes)
        os.close(fd)
        self.arrays: dict[str, np.ndarray] = {
            f.name: np.ndarray(f.shape, dtype=np.dtype(f.dtype), buffer=self._mmap, offset=f.offset)
            for f in spec.layout.fields
        }

    @property
    def path(self) -> str:
        return os.path.join(SHM_DIR, self.spec.name)

    @classmethod
    def create(cls, layout: Layout, name: str | None = None) -> Arena:
        check_space(layout.nbytes)
        spec = ArenaSpec(name or new_segment_name(), layout)
        fd = os.open(os.path.join(SHM_DIR, spec.name), os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            os.ftruncate(fd, layout.nbytes)
        except OSError:
            os.close(fd)
            os.unlink(os.path.join(SHM_DIR, spec.name))
            raise
        return cls(spec, fd, owner=True)

    @classmethod
    def attach(cls, spec: ArenaSpec) -> Arena:
        fd = os.open(os.path.join(SHM_DIR, spec.name), os.O_RDWR)
        return cls(spec, fd, owner=False)

    def close(self) -> None:
        """Drop this process's mapping; views handed out before must not be used after."""
        self.arrays = {}
        try:
            self._mmap.close()
        except BufferError:
            pass  # a numpy/torch view is still alive; the mapping goes with the process

    def unlink(self, orphaned: bool = False) -> None:
        """Remove the segment's name (processes that mapped it keep their mapping). Only its creator
        does, or (``orphaned``) a worker whose creator died without doing it."""
        if not self.owner and not orphaned:
            raise RuntimeError("only the process that created a segment unlinks it")
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def list_segments() -> list[str]:
    return sorted(n for n in os.listdir(SHM_DIR) if n.startswith(PREFIX))


def segment_owner_pid(name: str) -> int | None:
    try:
        return int(name[len(PREFIX) :].split("_", 1)[0])
    except ValueError:
        return None


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def sweep_stale_segments() -> list[tuple[str, int]]:
    """Unlink the segments whose owner process is gone (a run killed with -9); returns (name, bytes) of each.

    Segments of live runs, and names whose owner cannot be read, are left alone.
    """
    removed = []
    for name in list_segments():
        pid = segment_owner_pid(name)
        if pid is None or pid_alive(pid):
            continue
        path = os.path.join(SHM_DIR, name)
        try:
            size = os.stat(path).st_size
            os.unlink(path)
        except FileNotFoundError:
            continue  # another start swept it first
        removed.append((name, size))
    return removed
