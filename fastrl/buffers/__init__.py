"""Shared-memory buffers: one segment per run holding trajectory slots, weights and control."""
from __future__ import annotations

from dataclasses import dataclass

from fastrl.buffers.arena import Arena, ArenaSpec
from fastrl.buffers.control import Control, control_arrays
from fastrl.buffers.layout import Layout
from fastrl.buffers.slots import SlotShape, TrajectorySlots


def param_arrays(n_params: int, learners: int) -> list[tuple[str, tuple[int, ...], str]]:
    # header rows are 8 int64 = one cache line per learner: [seqlock counter, version, ...]
    arrays = [("params", (learners, n_params), "float32"), ("params_header", (learners, 8), "int64")]
    if learners > 1:  # gala: each learner's outgoing message, and gradients for allreduce (two iterations' worth)
        arrays += [("mailbox", (learners, n_params), "float32"), ("mailbox_header", (learners, 8), "int64"),
                   ("allreduce", (2, learners, n_params), "float32"), ("allreduce_header", (learners, 8), "int64")]
    return arrays


@dataclass(frozen=True)
class BufferPlan:
    """Sizes of everything a run shares; computed in the main process before any worker starts."""

    slot_shape: SlotShape
    n_params: int
    learners: int
    workers: int

    def layout(self) -> Layout:
        return Layout.plan(
            self.slot_shape.arrays()
            + param_arrays(self.n_params, self.learners)
            + control_arrays(self.workers, self.learners)
        )


class RunBuffers:
    """A process's typed views onto the run's segment."""

    def __init__(self, arena: Arena, plan: BufferPlan):
        self.arena = arena
        self.plan = plan
        self.slots = TrajectorySlots(arena.arrays, plan.slot_shape)
        self.control = Control(arena.arrays)

    def shared_params(self, learner: int = 0, name: str = "params"):
        """The learner's published weights, or its gala ``mailbox`` (imports torch, so executors never call it)."""
        from fastrl.buffers.params import SharedParams

        return SharedParams(self.arena.arrays, learner, name)

    @classmethod
    def create(cls, plan: BufferPlan) -> "RunBuffers":
        return cls(Arena.create(plan.layout()), plan)

    @classmethod
    def attach(cls, spec: ArenaSpec, plan: BufferPlan) -> "RunBuffers":
        return cls(Arena.attach(spec), plan)

    @property
    def spec(self) -> ArenaSpec:
        return self.arena.spec

    def close(self) -> None:
        self.slots = self.control = None  # drop views before unmapping
        self.arena.close()
