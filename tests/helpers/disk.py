"""A disk that fills up, for the full-disk tests.

Where this process may mount (root, or CAP_SYS_ADMIN) it is a real tmpfs of a few MiB, and filling it
is writing a file until the kernel says ENOSPC: every process then fails to write, and freeing the file
gives the space back. Where it may not, the directory is an ordinary one and "filling" it sets
RLIMIT_FSIZE to 0 on the given processes (``prlimit``, allowed on one's own processes): every write of
theirs to a regular file then fails with EFBIG, at the same depth (the write system call), but deleting
files frees nothing; ``tmpfs`` says which of the two a test got.
"""
from __future__ import annotations

import os
import resource
import subprocess
from pathlib import Path


class SmallDisk:
    def __init__(self, path: Path, size: str = "8m"):
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
                                 capture_output=True)
        self.tmpfs = mounted.returncode == 0
        self.filler = path / "filler"

    def fill(self, pids: list[int]) -> None:
        """No more room: a tmpfs is filled to the last block; else these processes can write nothing more."""
        if not self.tmpfs:
            for pid in pids:
                resource.prlimit(pid, resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))
            return
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            while True:
                os.write(fd, b"\0" * 65536)
        except OSError:
            pass
        try:  # the last partial block
            while True:
                os.write(fd, b"\0" * 512)
        except OSError:
            pass
        os.close(fd)

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def close(self) -> None:
        if self.tmpfs:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True)


def private_mounts() -> list[str] | None:
    """The command prefix that runs a command in a mount namespace of its own (where it may mount a small
    tmpfs over /dev/shm that no one else sees), or None where this user may not make one."""
    prefix = ["unshare", "--mount", "--propagation", "private"]
    if os.geteuid() != 0:
        prefix.insert(1, "--map-root-user")  # an unprivileged user namespace, where the kernel allows them
    try:
        ok = subprocess.run([*prefix, "true"], capture_output=True).returncode == 0
    except FileNotFoundError:
        return None
    return prefix if ok else None
