"""What every worker is told at start: the config, the buffer plan and how to reach it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fastrl.buffers import BufferPlan
from fastrl.buffers.arena import ArenaSpec
from fastrl.config import Config
from fastrl.envs import EnvInfo
from fastrl.modes import ModeSpec, mode_of

if TYPE_CHECKING:
    from fastrl.process.ranks import Ranks


@dataclass(frozen=True)
class ResumePoint:
    """Where a resumed run goes on: read once by the main process, so executors never load torch files."""

    checkpoint: str  # the checkpoint file the learner loads
    rollout: int  # the rollout the envs fill first
    env_states: str | None  # folder of the envs' saved states (exact resume), or None (seeded restarts)


@dataclass(frozen=True)
class RunSpec:
    config: Config
    plan: BufferPlan
    arena: ArenaSpec
    env_info: EnvInfo
    run_dir: str
    resume: ResumePoint | None = None
    ranks: Ranks | None = None  # this rank of a torchrun launch (fastrl.process.ranks), or None: one engine
    log_file: str | None = None  # every process of a rank also logs here (RUN/logs/rank-<r>.log)

    @property
    def checkpoint_dir(self) -> str:
        return f"{self.run_dir}/checkpoints"

    @property
    def mode(self) -> ModeSpec:
        return mode_of(self.config)

    @property
    def envs(self) -> int:
        return self.config.engine.envs

    @property
    def steps(self) -> int:
        return self.config.engine.rollout

    @property
    def learners(self) -> int:
        return self.config.engine.learners

    @property
    def gala(self) -> bool:
        return self.config.engine.mode == "gala"

    @property
    def rank_count(self) -> int:
        return self.ranks.ranks if self.ranks else 1

    def global_env(self, env: int) -> int:
        """The index of this rank's env ``env`` over every rank: what its random streams are seeded by."""
        return env + (self.ranks.env_offset if self.ranks else 0)

    def learner_envs(self, learner: int) -> range:
        """The contiguous envs a learner owns (all of them with one learner), so its storage is a view."""
        share = self.envs // self.learners
        return range(learner * share, (learner + 1) * share)


@dataclass(frozen=True)
class WorkerIds:
    """Worker numbering shared by heartbeats and timing rows: executors, then actors, then learners."""

    executors: int
    actors: int
    learners: int

    def executor(self, i: int) -> int:
        return i

    def actor(self, i: int) -> int:
        return self.executors + i

    def learner(self, i: int) -> int:
        return self.executors + self.actors + i

    @property
    def total(self) -> int:
        return self.executors + self.actors + self.learners

    def name(self, worker: int) -> str:
        if worker < self.executors:
            return f"executor-{worker}"
        if worker < self.executors + self.actors:
            return f"actor-{worker - self.executors}"
        return f"learner-{worker - self.executors - self.actors}"
