"""One named shared-memory segment per run, carved into numpy arrays by a Layout.

The segment is a file in /dev/shm mapped with mmap. Only the main process creates and
unlinks it; workers attach by name. We use plain files rather than
``multiprocessing.shared_memory`` because its resource tracker registers every attach and
unlinks (or warns) when any attaching process exits, which is wrong for one owner and many
readers. Names carry the owner's pid so a later start can sweep segments of dead runs.

The segment's memory is reserved when it is created (``posix_fallocate``): a tmpfs allocates
nothing for ``ftruncate``, so without it a second run or a filling /dev/shm would end a worker
with SIGBUS mid-run, at the first page that could not be backed; with it, /dev/shm running out
is an error naming the sizes before anything starts.
"""

from __future__ import annotations

import mmap
import os
import secrets
from dataclasses import dataclass

import numpy as np

from fastrl.buffers.layout import Layout
from fastrl.errors import DISK_FULL, ConfigError

SHM_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else "/tmp"
PREFIX = "fastrl_"


class ShmSpaceError(ConfigError):
    """Not enough shared memory (or RAM) for the run's buffers: bad input, refused before the run starts."""


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
        raise ShmSpaceError(
            f"the trajectory buffers need {_gib(nbytes)} GiB of shared memory, but {SHM_DIR} has "
            f"{_gib(free_shm)} GiB free and RAM {_gib(available_ram or 0)} GiB available{_space_tail()}"
        )


def _gib(nbytes: float) -> str:
    return f"{nbytes / 1024**3:.3f}"


def _space_tail() -> str:
    """Who holds /dev/shm, and the ways out, for a message about running out of it."""
    live, foreign = 0, 0
    for name in list_segments():
        try:
            st = os.stat(os.path.join(SHM_DIR, name))
        except FileNotFoundError:
            continue
        pid = segment_owner_pid(name)
        if pid is not None and pid_alive(pid):
            live += st.st_blocks * 512
        elif st.st_uid != os.geteuid():
            foreign += st.st_blocks * 512
    held = f" (running fastrl runs hold {_gib(live)} GiB of it" if live else ""
    if foreign:
        held += (", and" if held else " (") + f" other users' dead runs {_gib(foreign)} GiB, which only they or root"
        held += " can remove"
    return (
        (held + ")" if held else "") + "; lower engine.envs or engine.rollout, free /dev/shm (fastrl cleanup removes "
        "what this user's killed runs left there), or enlarge it (e.g. docker --shm-size)"
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


def _reserve(fd: int, nbytes: int) -> None:
    """Back every page of the segment now, so that no worker meets a page /dev/shm cannot give (SIGBUS)."""
    if not hasattr(os, "posix_fallocate"):  # macOS: /tmp files, not a tmpfs that runs out
        return
    try:
        os.posix_fallocate(fd, 0, nbytes)
    except OSError as exc:
        if exc.errno not in DISK_FULL:
            raise
        raise ShmSpaceError(
            f"the trajectory buffers need {_gib(nbytes)} GiB of shared memory, but {SHM_DIR} could not reserve them "
            f"({exc.strerror}: it has {_gib(shm_free_bytes())} GiB free){_space_tail()}"
        ) from None


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
            _reserve(fd, layout.nbytes)
        except BaseException:
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
    """Unlink this user's segments whose owner process is gone (a run killed with -9); returns (name, bytes)
    of each.

    Segments of live runs, names whose owner cannot be read, and other users' segments (only they or root
    may remove them from the sticky /dev/shm) are left alone: ``foreign_stale_segments`` lists those.
    """
    removed = []
    for name, size, uid in _stale_segments():
        if uid != os.geteuid():
            continue
        try:
            os.unlink(os.path.join(SHM_DIR, name))
        except FileNotFoundError:
            continue  # another start swept it first
        except PermissionError:
            continue  # /dev/shm not writable by this user
        removed.append((name, size))
    return removed


def foreign_stale_segments() -> list[tuple[str, int, int]]:
    """(name, bytes, owner uid) of dead runs' segments that belong to other users."""
    return [(name, size, uid) for name, size, uid in _stale_segments() if uid != os.geteuid()]


def _stale_segments() -> list[tuple[str, int, int]]:
    found = []
    for name in list_segments():
        pid = segment_owner_pid(name)
        if pid is None or pid_alive(pid):
            continue
        try:
            st = os.stat(os.path.join(SHM_DIR, name))
        except FileNotFoundError:
            continue
        found.append((name, st.st_size, st.st_uid))
    return found
