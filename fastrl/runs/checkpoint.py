"""Checkpoints: numbered, written atomically, the last K kept, ``latest.pt`` always the newest.

``RUN_DIR/checkpoints/`` holds:

- ``ckpt-<rollout>.pt``: a ``torch.save``d dict (``build_checkpoint``, format ``FORMAT``);
  ``<rollout>`` is the rollout the run goes on with. Keys: ``model`` (the last good parameters:
  evaluate or deploy these), ``optimizer``, ``version``, ``updates``, ``frames``, ``rollout``,
  ``config`` (resolved), ``rng`` (the learner's), ``kind`` (``barrier``, ``final``, ``stop``,
  ``periodic``, ``shared-params``, ``gala-average``), ``exact`` (env states were saved with it),
  ``env_states`` (the folder below, or None) and ``resume`` (the learner state to go on from: in
  ``hts`` a final checkpoint's ``model`` has the last gradient applied, ``resume`` holds the
  state before it and the pending gradient).
- ``ckpt-<rollout>.envs/executor-<i>.pkl``: every env's state, RNG stream, episode counters and
  last observation at that barrier, written by the executors while the envs were parked; beside each,
  ``executor-<i>.episodes.json``: each env's last ``run.return_window`` finished episodes, from which a
  resumed run's return windows start where the stopped run's were.
- ``latest.pt``: a hard link to the newest ``ckpt-*.pt``.
- ``.reserve``: disk space held for the next checkpoint (a checkpoint's size and a quarter), given up
  to the checkpoint a full disk would otherwise refuse: the run then stops with that state saved.

Every file goes to a temporary name, is fsynced, then renamed: a crash mid-write leaves the
previous checkpoint intact, never a torn one. Torch is imported lazily: executors use the
env-state half of this module and never import torch.

Trust: a checkpoint is read with ``torch.load(weights_only=True)``, which unpickles tensors and
plain data only, never code, so any checkpoint may be opened. The env-state pickles can hold any
object (they are the envs themselves) and unpickling them can run code: they are read only when a
run is resumed, and only from files this user owns that nobody else may write.
"""

from __future__ import annotations

import io
import json
import logging
import os
import pickle
import re
import shutil
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastrl.buffers.arena import pid_alive
from fastrl.errors import DISK_FULL, ConfigError, DiskFullError, no_room

log = logging.getLogger(__name__)

LATEST = "latest.pt"
RESERVE = ".reserve"
RESERVE_SLACK = 1.25  # the next checkpoint may be a little larger (optimizer state appears after the first step)
FORMAT = 1  # of the dict build_checkpoint makes
SAVED = ("model", "optimizer", "version", "rollout", "updates", "frames")  # of a learner's state, at the top
_NUMBERED = re.compile(r"^ckpt-(\d+)\.pt$")
_ENV_DIR = re.compile(r"^ckpt-(\d+)\.envs$")
_TEMPORARY = re.compile(r"^\..+\.(\d+)\.tmp$")  # atomic_write's, named after the writing pid
FILE_MODE = 0o640  # a run's files: env.kwargs and env states may hold secrets, so no one outside the group reads them


def build_checkpoint(kind: str, state: dict, config: dict, resume: dict | None, **extra: Any) -> dict:
    """The one layout of a checkpoint file: ``state``'s parameters and counters (``SAVED``), the run's
    resolved ``config``, the learner state a resumed run goes on from, and ``extra`` keys (``rng``;
    ``exact`` and ``env_states`` where the executors saved the envs with it; gala's ``gala``)."""
    return {
        "format": FORMAT,
        "kind": kind,
        **{k: state[k] for k in SAVED},
        "config": config,
        "exact": False,
        "env_states": None,
        "resume": resume,
        **extra,
    }


def checkpoint_name(rollout: int) -> str:
    return f"ckpt-{rollout:08d}"


def atomic_write(path: Path, write: Callable[[Any], None]) -> None:
    """``write(file)`` into a temporary sibling, fsync, rename over ``path``."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE), "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class CheckpointStore:
    def __init__(self, directory: str | Path, keep: int = 3):
        self.directory = Path(directory)
        self.keep = keep
        self.used_reserve = False  # a checkpoint went into the reserved space: the disk is full

    @property
    def latest(self) -> Path:
        return self.directory / LATEST

    def path(self, rollout: int) -> Path:
        return self.directory / f"{checkpoint_name(rollout)}.pt"

    def env_dir(self, rollout: int) -> Path:
        return self.directory / f"{checkpoint_name(rollout)}.envs"

    def rollouts(self) -> list[int]:
        if not self.directory.is_dir():
            return []
        return sorted(int(m[1]) for m in map(_NUMBERED.match, os.listdir(self.directory)) if m)

    def save(self, state: dict, rollout: int) -> Path:
        """Write the checkpoint of ``rollout``; on a full disk, into the space the reserve held (``used_reserve``)."""
        data = _serialized(state)  # in memory first: a full disk is then an OSError here, not a torn zip in torch
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.path(rollout)
        try:
            atomic_write(path, lambda f: f.write(data))
        except OSError as exc:
            if exc.errno not in DISK_FULL:
                raise
            try:
                if not self._give_up_reserve():
                    raise
                atomic_write(path, lambda f: f.write(data))
            except OSError as again:
                raise DiskFullError(
                    f"the disk holding {self.directory} {no_room(again.errno)}: checkpoint {path.name} could not be "
                    f"written ({again.strerror}); free space, then resume from the newest checkpoint there"
                ) from exc
            self.used_reserve = True
            log.warning("the disk holding %s is full: %s went into the space reserved for it", self.directory, path)
        self.point_latest_at(rollout)
        self.prune()
        if not self.used_reserve:
            self.reserve(len(data))
        return path

    def reserve(self, nbytes: int) -> None:
        """Hold room for a checkpoint of ``nbytes`` (and a quarter more) in ``.reserve``; where there is none
        left, or the OS cannot allocate ahead (no ``posix_fallocate``), nothing is held."""
        path, want = self.directory / RESERVE, int(nbytes * RESERVE_SLACK)
        try:
            if path.is_file() and path.stat().st_size >= want:
                return
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, FILE_MODE)
            try:
                os.posix_fallocate(fd, 0, want)  # blocks on the disk, not a sparse file: they are there to give up
            finally:
                os.close(fd)
        except (OSError, AttributeError) as exc:
            path.unlink(missing_ok=True)  # none, rather than one too small to hold a checkpoint
            log.debug("could not reserve %d bytes for the next checkpoint in %s: %s", want, self.directory, exc)

    def reserve_for(self, state: dict, grow: float = 1.0) -> None:
        """Reserve room for a checkpoint like ``state``, ``grow`` times as large, before the first is written."""
        self.reserve(int(len(_serialized(state)) * grow))

    def _give_up_reserve(self) -> bool:
        """Free the reserved space; False where there was none."""
        path = self.directory / RESERVE
        try:
            held = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            return False
        return held > 0

    def point_latest_at(self, rollout: int) -> None:
        """Make ``latest.pt`` the checkpoint of ``rollout`` (a hard link; a copy where links fail)."""
        if self.latest.exists() and os.path.samefile(self.latest, self.path(rollout)):
            return  # already: a rename onto the same file would do nothing and leave the temporary link behind
        tmp = self.directory / f".{LATEST}.{os.getpid()}.tmp"
        if tmp.exists():
            tmp.unlink()
        try:
            os.link(self.path(rollout), tmp)
        except OSError:
            shutil.copyfile(self.path(rollout), tmp)
        os.replace(tmp, self.latest)
        _fsync_dir(self.directory)

    def prune(self) -> None:
        """Keep the newest ``keep`` numbered checkpoints; drop older ones and env-state folders without one."""
        rollouts = self.rollouts()
        kept = set(rollouts[-self.keep :])
        for rollout in rollouts:
            if rollout not in kept:
                self.path(rollout).unlink(missing_ok=True)
        oldest_kept = min(kept) if kept else None
        for name in os.listdir(self.directory):
            m = _ENV_DIR.match(name)
            if m and int(m[1]) not in kept and (oldest_kept is None or int(m[1]) < oldest_kept):
                shutil.rmtree(self.directory / name, ignore_errors=True)
            m = _TEMPORARY.match(name)
            if m and not pid_alive(int(m[1])):  # a writer killed mid-write (kill -9 after a stop timeout)
                (self.directory / name).unlink(missing_ok=True)

    def set_aside_after(self, rollout: int) -> Path | None:
        """Resuming from an older checkpoint: move the newer ones (a future now abandoned) aside, never delete them."""
        newer = [r for r in self.rollouts() if r > rollout]
        if not newer:
            return None
        aside = self.directory / f"abandoned-{time.strftime('%Y%m%d-%H%M%S')}"
        aside.mkdir(exist_ok=True)
        for r in newer:
            for path in (self.path(r), self.env_dir(r)):
                if path.exists():
                    os.replace(path, aside / path.name)
        log.warning("resuming from rollout %d: moved %d newer checkpoints to %s", rollout, len(newer), aside)
        return aside


def _serialized(state: dict) -> memoryview:
    import torch

    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getbuffer()


def checkpoint_file(path: str | Path) -> Path:
    """A run directory, its ``checkpoints`` folder or a checkpoint file -> the checkpoint file."""
    path = Path(path)
    if path.is_dir() and (path / "checkpoints").is_dir():
        path = path / "checkpoints"
    if path.is_dir():
        path = path / LATEST
    return path


def load_checkpoint(path: str | Path) -> dict:
    """The checkpoint's dict, read with ``weights_only=True``: tensors and plain data, never code. A
    ``ConfigError`` names a file that holds anything else, or that is truncated or not a checkpoint."""
    import torch

    file = checkpoint_file(path)
    try:
        checkpoint = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch reports a torn zip archive as OSError or RuntimeError
        reason = _refused_global(exc)
        if reason:
            raise ConfigError(
                f"checkpoint {str(file)!r} holds more than tensors and plain data ({reason}); fastrl reads "
                "checkpoints with torch.load(weights_only=True) and runs no code from one: it was not written "
                "by fastrl, or was altered"
            ) from None
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ConfigError(
            f"cannot read checkpoint {str(file)!r}: it is truncated or not a torch checkpoint "
            f"({type(exc).__name__}: {first}); the run's older checkpoints are its checkpoints/ckpt-*.pt"
        ) from None
    if not isinstance(checkpoint, dict):
        raise ConfigError(f"checkpoint {str(file)!r} holds a {type(checkpoint).__name__}, not a fastrl checkpoint")
    return checkpoint


def _refused_global(exc: Exception) -> str | None:
    """torch's words for an object the weights-only unpickler refused (e.g. ``GLOBAL posix.system``), or None."""
    if not isinstance(exc, pickle.UnpicklingError):
        return None
    lines = [line.strip().rstrip(".") for line in str(exc).splitlines()]
    return next((line for line in lines if "GLOBAL" in line), None)


# ---------------------------------------------------------------- env states (no torch)


def write_env_states(directory: Path, worker: str, states: dict[int, dict]) -> None:
    """One executor's env states ``{env index: state}`` at a barrier, as ``directory/<worker>.pkl``."""
    directory.mkdir(mode=0o750, parents=True, exist_ok=True)  # never group-writable: resume unpickles it
    atomic_write(directory / f"{worker}.pkl", lambda f: pickle.dump(states, f, protocol=pickle.HIGHEST_PROTOCOL))


def read_env_states(directory: Path) -> dict[int, dict]:
    """Every executor's env states in ``directory``, by env index (any executor layout can read them)."""
    states: dict[int, dict] = {}
    for path in env_state_files(directory):
        with open(path, "rb") as f:
            states.update(pickle.load(f))
    return states


def write_env_episodes(directory: Path, worker: str, episodes: dict[int, list]) -> None:
    """One executor's last finished episodes per env, ``{env index: [(rollout, step, return, length), ...]}``, as
    ``directory/<worker>.episodes.json`` beside its env states: plain JSON, so the main process seeds a resumed
    run's return windows from it without unpickling anything."""
    directory.mkdir(mode=0o750, parents=True, exist_ok=True)
    text = json.dumps({str(env): ended for env, ended in episodes.items()})
    atomic_write(directory / f"{worker}.episodes.json", lambda f: f.write(text.encode()))


def read_env_episodes(directory: Path) -> dict[int, list[tuple[int, int, float, int]]]:
    """Every executor's ``write_env_episodes`` in ``directory``, by env index ({} for a checkpoint made before
    they were saved)."""
    episodes: dict[int, list[tuple[int, int, float, int]]] = {}
    for path in sorted(directory.glob("*.episodes.json")):
        try:
            read = {
                int(env): [(int(r), int(t), float(ret), int(n)) for r, t, ret, n in ended]
                for env, ended in json.loads(path.read_text(encoding="utf-8")).items()
            }
        except (OSError, ValueError, TypeError, AttributeError) as exc:  # a damaged file: its envs' windows start empty
            log.warning("%s cannot be read (%s): its envs' return windows start empty", path, exc)
            continue
        episodes.update(read)
    return episodes


def env_state_files(directory: Path) -> list[Path]:
    """The pickles of ``directory``, each checked to be this user's own: unpickling runs whatever code a
    file names, so a file another user wrote, or could have rewritten, is refused (``ConfigError``)."""
    files = sorted(directory.glob("*.pkl"))
    for path in [directory, *files]:
        try:
            st = path.stat()
        except OSError as exc:  # a dangling link, a loop
            raise ConfigError(f"the env states {str(path)!r} cannot be read: {exc.strerror}") from None
        if st.st_uid != os.geteuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise ConfigError(
                f"refusing to unpickle the env states in {str(directory)!r}: {str(path)!r} is "
                + ("owned by uid " + str(st.st_uid) if st.st_uid != os.geteuid() else "writable by others")
                + "; unpickling runs code, so fastrl reads env states only from a run of this user's own. "
                "Delete that folder to resume from the checkpoint with seeded resets"
            )
    return files
