"""What every worker is told at start: the config, the buffer plan and how to reach it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from fastrl.buffers import BufferPlan
from fastrl.buffers.arena import ArenaSpec
from fastrl.buffers.slots import SlotMap
from fastrl.envs import EnvInfo
from fastrl.errors import ConfigError
from fastrl.modes import ModeSpec, mode_of
from fastrl.schema import Config, resolved_int


@dataclass(frozen=True)
class Ranks:
    """One rank of a torchrun launch, as every process of that rank's engine needs to know it."""

    rank: int
    ranks: int
    addr: str
    port: int
    agent_store: bool  # torchrun's agent hosts the store at addr:port; else rank 0's main process does
    prefix: str  # the store keys of this launch and restart: a restarted launch never reads a stale key
    backend: str  # 'gloo' or 'nccl' (resolved)
    timeout_s: float
    local_envs: int  # this rank's share of engine.envs
    local_rank: int = 0  # torchrun's LOCAL_RANK: which of the node's GPUs this rank's processes use

    @property
    def leader(self) -> bool:
        return self.rank == 0

    @property
    def env_offset(self) -> int:
        """The global index of this rank's first env."""
        return self.rank * self.local_envs

    def connect(self, host: bool = False):
        """A client of the launch's store (``host``: rank 0 serving it when torchrun's agent does not)."""
        import torch.distributed as dist

        try:
            store = dist.TCPStore(
                self.addr,
                self.port,
                is_master=host,
                timeout=timedelta(seconds=self.timeout_s),
                wait_for_workers=False,
                use_libuv=False,
            )
        except Exception as exc:  # noqa: BLE001 - whatever the store says, it is a fault of the launch
            raise ConfigError(
                f"rank {self.rank}: cannot reach the rendezvous store at {self.addr}:{self.port} within "
                f"dist.timeout_s = {self.timeout_s:g}: {exc}"
            ) from None
        return dist.PrefixStore(self.prefix, store)


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
    ranks: Ranks | None = None  # this rank of a torchrun launch (fastrl.ranks.launch), or None: one engine
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
    def env_unit(self) -> int:
        """Rows that stay together in one executor: a multi-agent env's agents (1 for single-agent envs)."""
        return self.env_info.agents

    @property
    def steps(self) -> int:
        return self.config.engine.rollout

    @property
    def learners(self) -> int:
        return self.config.engine.learners

    @property
    def independent(self) -> bool:
        """Its learners step on their own (``ModeSpec.independent``): a checkpoint folder each, no env states."""
        return self.mode.independent

    @property
    def worker_ids(self) -> WorkerIds:
        """The run's worker numbering (its layout keys are resolved before any worker starts)."""
        return WorkerIds.of(self.config)

    @property
    def rank_count(self) -> int:
        return self.ranks.ranks if self.ranks else 1

    @property
    def slot_map(self) -> SlotMap:
        """Where each env's steps live in the slots (the data path's addressing, in one place)."""
        return SlotMap(self.steps, self.envs, self.mode.storages)

    @property
    def local_rank(self) -> int:
        """torchrun's LOCAL_RANK of this rank (0 without torchrun): the GPU its processes compute on."""
        return self.ranks.local_rank if self.ranks else 0

    def global_env(self, env: int) -> int:
        """The index of this rank's env ``env`` over every rank: what its random streams are seeded by."""
        return env + (self.ranks.env_offset if self.ranks else 0)

    def agent_steps_per_update(self, learner: int) -> int:
        """Agent steps one update of ``learner`` learns from: a rollout of each of its envs, or one async batch."""
        slots = self.mode.slots_per_update(len(self.learner_envs(learner)), self.config.algo.batch_slots)
        return slots * self.steps

    def frames_per_update(self, learner: int) -> int:
        """Env frames one update learns from: version v (rollout v) has learned from v times this many."""
        return self.agent_steps_per_update(learner) * self.env_info.frames_per_step

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

    @classmethod
    def of(cls, config: Config) -> WorkerIds:
        """The numbering of ``config``'s workers; its layout keys are resolved (``plan_run``)."""
        engine = config.engine
        return cls(
            resolved_int(engine.executors, "engine.executors"),
            resolved_int(engine.actors, "engine.actors"),
            engine.learners,
        )

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
