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
  last observation at that barrier, written by the executors while the envs were parked.
- ``latest.pt``: a hard link to the newest ``ckpt-*.pt``.

Every file goes to a temporary name, is fsynced, then renamed: a crash mid-write leaves the
previous checkpoint intact, never a torn one. Torch is imported lazily: executors use the
env-state half of this module and never import torch.
"""

from __future__ import annotations

import logging
import os
import pickle
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastrl.buffers.arena import pid_alive

log = logging.getLogger(__name__)

LATEST = "latest.pt"
FORMAT = 1  # of the dict build_checkpoint makes
SAVED = ("model", "optimizer", "version", "rollout", "updates", "frames")  # of a learner's state, at the top
_NUMBERED = re.compile(r"^ckpt-(\d+)\.pt$")
_ENV_DIR = re.compile(r"^ckpt-(\d+)\.envs$")
_TEMPORARY = re.compile(r"^\..+\.(\d+)\.tmp$")  # atomic_write's, named after the writing pid


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
        with open(tmp, "wb") as f:
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
        import torch

        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.path(rollout)
        atomic_write(path, lambda f: torch.save(state, f))
        self.point_latest_at(rollout)
        self.prune()
        return path

    def point_latest_at(self, rollout: int) -> None:
        """Make ``latest.pt`` the checkpoint of ``rollout`` (a hard link; a copy where links fail)."""
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


def checkpoint_file(path: str | Path) -> Path:
    """A run directory, its ``checkpoints`` folder or a checkpoint file -> the checkpoint file."""
    path = Path(path)
    if path.is_dir() and (path / "checkpoints").is_dir():
        path = path / "checkpoints"
    if path.is_dir():
        path = path / LATEST
    return path


def load_checkpoint(path: str | Path) -> dict:
    import torch

    return torch.load(checkpoint_file(path), map_location="cpu", weights_only=False)


# ---------------------------------------------------------------- env states (no torch)


def write_env_states(directory: Path, worker: str, states: dict[int, dict]) -> None:
    """One executor's env states ``{env index: state}`` at a barrier, as ``directory/<worker>.pkl``."""
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write(directory / f"{worker}.pkl", lambda f: pickle.dump(states, f, protocol=pickle.HIGHEST_PROTOCOL))


def read_env_states(directory: Path) -> dict[int, dict]:
    """Every executor's env states in ``directory``, by env index (any executor layout can read them)."""
    states: dict[int, dict] = {}
    for path in sorted(directory.glob("*.pkl")):
        with open(path, "rb") as f:
            states.update(pickle.load(f))
    return states
