"""A learner's checkpoints: when one is due (agreed by every rank at a barrier), what it holds (θ, the optimizer,
the rule's pending work, the extensions' states, the counters), the exact ones that wait for the executors' env
states, the one written at once when a signal asks for the stop, and the last good state saved whatever stops
the run.

``Checkpointing`` is the part of ``fastrl.learning.learner.Learner`` that writes and restores them; it reads the
learner's state (the attributes declared below).
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from fastrl.buffers.control import Done, Flag, Stat
from fastrl.config import resolved_int
from fastrl.errors import DiskFullError
from fastrl.runs.checkpoint import CheckpointStore, build_checkpoint

if TYPE_CHECKING:
    import numpy as np

    from fastrl.algos.update_rule import UpdateRule
    from fastrl.buffers.control import Control
    from fastrl.learning.extensions import LearnerExtension
    from fastrl.spec import RunSpec

log = logging.getLogger(__name__)


class Checkpointing:
    spec: RunSpec
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    rule: UpdateRule
    extensions: list[LearnerExtension]
    control: Control
    stats: np.ndarray
    cohort: Any
    store: CheckpointStore
    index: int
    version: int
    rollout: int
    finished: bool
    saved_first: bool
    finishing: bool
    time_due: bool
    pending_checkpoint: tuple[int, dict] | None
    last_checkpoint: tuple[float, int]
    move_to: Callable[[int], None]
    release_after: Callable[[int], None]

    def _restore(self, checkpoint: dict) -> None:
        state = checkpoint["resume"]
        self.model.load_state_dict(state["model"])
        if state.get("optimizer") is not None:
            self.optimizer.load_state_dict(state["optimizer"])
        else:
            log.warning(
                "the checkpoint has no optimizer state (saved from the shared weights): the optimizer starts fresh"
            )
        self.rule.load(state)
        for extension in self.extensions:
            if extension.key is not None:
                extension.load(state.get(extension.key))
        self.version = state["version"]
        self.stats[Stat.UPDATES] = state["updates"]
        self.move_to(state["rollout"])
        self.last_checkpoint = (time.monotonic(), int(self.stats[Stat.FRAMES]))
        if "rng" in checkpoint:
            torch.set_rng_state(checkpoint["rng"]["torch"])

    def _agree(self) -> None:
        """Whether to finish (Ctrl-C, the target, the time limit) and whether a checkpoint is due by the
        clock: read once per barrier and agreed by every rank (any rank's wish), so every rank parks,
        saves and finishes at the same barrier. With one rank: what this one sees."""
        at, _ = self.last_checkpoint
        due = time.monotonic() - at >= self.spec.config.run.checkpoint_interval_s
        self.finishing, self.time_due = self.cohort.agree(self.control.is_set(Flag.FINISH), due)

    def _checkpoint_due(self, frames: int) -> bool:
        interval = self.spec.config.run.checkpoint_interval_frames
        return bool(interval and frames - self.last_checkpoint[1] >= interval) or self.time_due

    def state(self, copied: bool = False) -> dict:
        """What a run goes on from: θ, optimizer, the rule's pending work (hts) and the counters."""
        state = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            **self.rule.state(),
            "version": self.version,
            "rollout": self.rollout,
            "updates": int(self.stats[Stat.UPDATES]),
            "frames": int(self.stats[Stat.FRAMES]),
        }
        for extension in self.extensions:
            if extension.key is not None:
                state[extension.key] = extension.state()
        return copy.deepcopy(state) if copied else state

    def _checkpoint(self, kind: str, resume_state: dict | None = None, exact: bool = False) -> dict:
        """``exact``: the executors save their env states beside it, in the folder it names."""
        state = self.state()
        return build_checkpoint(
            kind,
            state,
            self.spec.config.to_dict(),
            resume_state or _resumable(state),
            rng={"torch": torch.get_rng_state()},
            exact=exact,
            env_states=self.store.env_dir(self.rollout).name if exact else None,
        )

    def _begin_checkpoint(self, kind: str, resume_state: dict | None) -> None:
        """The envs are parked at this barrier: ask the executors for their env states, write when all are in."""
        exact = not self.spec.independent  # its learners are at different rollouts: no env-state barrier
        self.pending_checkpoint = (self.rollout, self._checkpoint(kind, resume_state, exact))
        self.last_checkpoint = (time.monotonic(), self.pending_checkpoint[1]["frames"])  # run-ahead plans on it now
        self.time_due = False
        if not exact:  # write now
            self._complete_checkpoint(0)
            return
        self.control.request_env_saves(self.rollout)

    def _complete_checkpoint(self, timeout: float) -> bool:
        assert self.pending_checkpoint is not None, "a checkpoint completes only once begun"
        rollout, checkpoint = self.pending_checkpoint
        executors = resolved_int(self.spec.config.engine.executors, "engine.executors")
        if not self.spec.independent and not self.control.env_saved(range(executors), rollout):
            if timeout > 0:
                time.sleep(min(timeout, 0.002))  # the executors answer within one poll
            return False
        self.store.save(checkpoint, rollout)
        self.pending_checkpoint = None
        if checkpoint["kind"] == "final":
            self._finish()
            self.control.mark_learner(self.index, Done.COMPLETE)
        elif self.store.used_reserve:  # the disk is full: the run stops here, this state saved
            raise DiskFullError(
                f"the disk holding {self.store.directory} is full: checkpoint {self.store.path(rollout).name} went "
                "into the space fastrl reserved for it, and the run stopped there; free space, then resume"
            )
        else:
            self.release_after(rollout - 1)
        return True

    def _save_first(self) -> None:
        """A signal asked for the stop: write the current state now, as a scheduler's SIGKILL may come before the
        barrier (its grace is 10-30 s); the exact checkpoint at the barrier then replaces it as ``latest.pt``."""
        self.saved_first = True
        if self.rollout not in self.store.rollouts():
            self.store.save(self._checkpoint("stop"), self.rollout)
            log.info("stop asked by a signal: the current state (rollout %d) is saved", self.rollout)

    def shutdown(self) -> None:
        """The run is stopping (or this process failed): save the last good state unless already saved."""
        if self.finished:
            return
        if self.pending_checkpoint is not None:  # the executors never finished saving: not exact
            rollout, checkpoint = self.pending_checkpoint
            checkpoint.update(kind="stop", exact=False, env_states=None)
        else:
            rollout, checkpoint = self.rollout, self._checkpoint("stop")
        if rollout in self.store.rollouts():  # a barrier checkpoint of this very state, and an exact one
            self.store.point_latest_at(rollout)
        else:
            self.store.save(checkpoint, rollout)
        self._finish()

    def _finish(self) -> None:
        self.finished = True
        for extension in self.extensions:
            extension.finish()
        self.control.mark_learner(self.index, Done.SAVED)


def _resumable(state: dict) -> dict:
    """Between run-ahead barriers θ is a version ahead of the rollout in flight and already holds
    every gradient taken: a resumed run acts with it from that rollout (nothing pending)."""
    return {**state, "version": state["rollout"]} if state["version"] > state["rollout"] else state
