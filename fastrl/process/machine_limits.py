"""The machine's memory limits, checked before a run starts and named when a worker dies of one.

Two limits end runs on shared machines:

- **An address-space limit** (``ulimit -v``, RLIMIT_AS) counts virtual memory, per process. Every fastrl
  process maps torch, numba and the workers' modules (~0.8 GiB of address space before it does anything),
  the run's whole shared-memory segment, and its models, thread stacks and malloc arenas. Under a limit too
  small for that, importing torch fails with a MemoryError or a segmentation fault, and a worker dies of
  one mid-run. ``check_import_floor`` refuses before torch is imported; ``check_address_space`` refuses
  once the segment's size is known, with the size to set.
- **A cgroup memory limit** (Docker's ``--memory``, systemd's ``MemoryMax``, Kubernetes' limits, Slurm's
  ``--mem``) counts the pages the run's processes touch, the shared segment included, once each. Past it
  the kernel's OOM killer SIGKILLs a process. ``check_cgroup_memory`` refuses a limit below what the
  segment and the processes' own memory need; ``death_note`` names the limit when a worker was killed
  under one, so that a SIGKILL is not a mystery.

Both checks are floors, not forecasts: a run that passes them can still outgrow a limit (a large replay of
an LSTM, a user's model), and then it ends as any dead worker ends it, cleanly, with the limit named.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass
from pathlib import Path

from fastrl.config import ConfigError

MIB = 2**20
IMPORT_FLOOR = 1024 * MIB  # address space a process needs to import torch, numba and fastrl (0.82 GiB measured)
PROCESS_HEADROOM = 512 * MIB  # a worker's models, optimizer, thread stacks and malloc arenas beyond its imports
PROCESS_MEMORY = 160 * MIB  # resident memory of a process of its own (the imported pages are shared: forked)
SERVER_MEMORY = 300 * MIB  # the fork server's imported pages, which its workers share
UNLIMITED_CGROUP = 2**60  # cgroup v1 writes "no limit" as a page-rounded 2**63 - 1


class MachineLimitError(ConfigError):
    """The machine's limits leave the run too little memory: refused before anything starts (exit code 2)."""


@dataclass(frozen=True)
class CgroupLimit:
    nbytes: int
    path: Path  # the file the limit was read from (memory.max or memory.limit_in_bytes)
    events: Path | None  # where the kernel counts OOM kills for it (cgroup v2's memory.events), if there is one


def address_space_limit() -> int | None:
    """RLIMIT_AS's soft limit in bytes (``ulimit -v``), or None where there is none."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else soft


def cgroup_memory_limit(root: Path = Path("/sys/fs/cgroup"), membership: Path = Path("/proc/self/cgroup")):
    """This process's cgroup memory limit (v2's ``memory.max``, v1's ``memory.limit_in_bytes``), or None."""
    try:
        lines = membership.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, group = line.split(":", 2)
        if controllers == "":  # cgroup v2: one hierarchy
            limit = _read_limit(root / group.lstrip("/") / "memory.max", root / "memory.max")
            if limit is not None:
                return CgroupLimit(limit[0], limit[1], limit[1].parent / "memory.events")
        elif "memory" in controllers.split(","):
            limit = _read_limit(
                root / "memory" / group.lstrip("/") / "memory.limit_in_bytes", root / "memory" / "memory.limit_in_bytes"
            )
            if limit is not None:
                return CgroupLimit(limit[0], limit[1], None)
    return None


def _read_limit(*candidates: Path) -> tuple[int, Path] | None:
    """The first readable limit among ``candidates`` (inside a container the group's own path is often the
    hierarchy's root), as (bytes, file); None where it says there is no limit or none can be read."""
    for path in candidates:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text == "max" or not text.isdigit() or int(text) >= UNLIMITED_CGROUP:
            return None
        return int(text), path
    return None


def check_import_floor() -> None:
    """Before torch is imported: an address-space limit too small to import it is refused by name."""
    limit = address_space_limit()
    if limit is not None and limit < IMPORT_FLOOR:
        raise MachineLimitError(
            f"the address-space limit (ulimit -v) is {limit // MIB} MiB, and a fastrl process needs "
            f"~{IMPORT_FLOOR // MIB} MiB of address space to import torch alone: raise it "
            f"(ulimit -v {2 * IMPORT_FLOOR // 1024}) or lift it (ulimit -v unlimited). It counts virtual memory, "
            "not memory used; a cgroup limit (systemd-run -p MemoryMax=..., docker --memory) caps what a run uses"
        )


def check_address_space(segment_bytes: int) -> None:
    """Once the run's segment is sized: each process maps it beside its imports and its models."""
    limit = address_space_limit()
    if limit is None:
        return
    imports = _own_address_space()
    need = imports + segment_bytes + PROCESS_HEADROOM
    if limit < need:
        advised = -(-(need + PROCESS_HEADROOM // 4) // (64 * MIB)) * 64 * MIB  # a margin, in whole 64 MiB
        raise MachineLimitError(
            f"the address-space limit (ulimit -v) is {limit // MIB} MiB, and each of the run's processes maps "
            f"~{need // MIB} MiB (its imports {imports // MIB} MiB, the run's shared memory "
            f"{segment_bytes // MIB} MiB, models and threads ~{PROCESS_HEADROOM // MIB} MiB): raise it "
            f"(ulimit -v {advised // 1024}), lift it (ulimit -v unlimited), or shrink the shared memory (fewer "
            "engine.envs or a shorter engine.rollout)"
        )


def check_cgroup_memory(segment_bytes: int, processes: int, limit: CgroupLimit | None = None) -> None:
    """The shared segment, the fork server's pages and each process's own memory within a cgroup's limit."""
    limit = limit or cgroup_memory_limit()
    if limit is None:
        return
    need = segment_bytes + SERVER_MEMORY + processes * PROCESS_MEMORY
    if limit.nbytes < need:
        raise MachineLimitError(
            f"the cgroup memory limit ({limit.path}) is {limit.nbytes // MIB} MiB, and the run needs at least "
            f"~{need // MIB} MiB (its shared memory {segment_bytes // MIB} MiB, the fork server "
            f"{SERVER_MEMORY // MIB} MiB, {processes} processes x ~{PROCESS_MEMORY // MIB} MiB): give the "
            "container or job more memory (docker --memory, systemd MemoryMax, Slurm --mem), or use fewer "
            "engine.envs, a shorter engine.rollout, or fewer engine.executors and engine.actors"
        )


def death_note(limit: CgroupLimit | None = None) -> str:
    """For a worker killed by SIGKILL that reported nothing: the cgroup limit it ran under, if any (the OOM
    killer's usual signature), with the kernel's count of OOM kills where cgroup v2 keeps one."""
    limit = limit or cgroup_memory_limit()
    if limit is None:
        return ""
    kills = _oom_kills(limit.events) if limit.events is not None else None
    counted = f"; the kernel counts {kills} OOM kill(s) in it" if kills else ""
    return (
        f" (the run is under a cgroup memory limit of {limit.nbytes // MIB} MiB, {limit.path}{counted}: the OOM "
        "killer ends a process with SIGKILL when the group reaches it; give the job more memory, or use fewer "
        "engine.envs, a shorter engine.rollout, fewer processes)"
    )


def _oom_kills(events: Path) -> int | None:
    try:
        for line in events.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        return None
    return None


def _own_address_space() -> int:
    """This process's address space now (VmSize): what a worker forked with the same imports starts from."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return IMPORT_FLOOR
