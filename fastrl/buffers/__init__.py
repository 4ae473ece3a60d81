"""Shared-memory buffers: one segment per run holding trajectory slots, weights, the players' parameter slots,
the layers' own arrays and control."""

from __future__ import annotations

from dataclasses import dataclass

from fastrl.buffers.arena import Arena, ArenaSpec
from fastrl.buffers.control import Control, control_arrays
from fastrl.buffers.layout import Layout
from fastrl.buffers.slots import SlotShape, TrajectorySlots


def param_arrays(n_params: int, learners: int, weight_slots: int = 1) -> list[tuple[str, tuple[int, ...], str]]:
    """The published weights (``fastrl.buffers.params``): learner l's slot k is row l * weight_slots + k;
    its header row, 8 int64 = one cache line, is [seqlock counter, version, ...]. With one slot per learner,
    a ``params_rescue`` copy of it (row l), written after it: a learner killed while publishing leaves one
    whole set of the two for the main process to save (with two slots, the other slot is that set)."""
    sets = learners * weight_slots
    arrays: list[tuple[str, tuple[int, ...], str]] = [
        ("params", (sets, n_params), "float32"),
        ("params_header", (sets, 8), "int64"),
    ]
    if weight_slots == 1:
        arrays += [("params_rescue", (learners, n_params), "float32"), ("params_rescue_header", (learners, 8), "int64")]
    return arrays


ArrayPlan = tuple[str, tuple[int, ...], str]  # (name, shape, dtype) of one shared array


def player_arrays(n_params: int, slots: int) -> list[ArrayPlan]:
    """The players' parameter slots: weights other than the learner's that the actors play rows with (a row
    role's slot k, ``fastrl.sampling.row_roles``), each with a header as the published weights have."""
    return [("players", (slots, n_params), "float32"), ("players_header", (slots, 8), "int64")]


@dataclass(frozen=True)
class BufferPlan:
    """Sizes of everything a run shares; computed in the main process before any worker starts."""

    slot_shape: SlotShape
    n_params: int
    learners: int
    workers: int
    weight_slots: int = 1  # published parameter sets per learner (2 where envs run ahead: hts)
    player_slots: int = 0  # parameter slots of weights other than the learner's (a layer's LayerNeeds)
    layer_arrays: tuple[ArrayPlan, ...] = ()  # the layers' own arrays, by name (their LayerNeeds)
    layer_stats: tuple[str, ...] = ()  # the layers' columns of each learner's stats row, after the core's
    # the algorithm's own metrics (its registration's ``metrics``): their columns of each stats row, after the layers'
    metrics: tuple[str, ...] = ()

    def layout(self) -> Layout:
        return Layout.plan(
            self.slot_shape.arrays()
            + param_arrays(self.n_params, self.learners, self.weight_slots)
            + (player_arrays(self.n_params, self.player_slots) if self.player_slots else [])
            + list(self.layer_arrays)
            + control_arrays(self.workers, self.learners, len(self.layer_stats) + len(self.metrics))
        )


class RunBuffers:
    """A process's typed views onto the run's segment."""

    def __init__(self, arena: Arena, plan: BufferPlan):
        self.arena = arena
        self.plan = plan
        self.slots = TrajectorySlots(arena.arrays, plan.slot_shape)
        self.control = Control(arena.arrays, plan.layer_stats, plan.metrics)

    def shared_params(self, learner: int = 0, name: str = "params", slot: int = 0):
        """The learner's published weights (``slot`` of its ``plan.weight_slots``), or its row of another array of
        weights with a header, such as ``params_rescue`` or a layer's (imports torch, so executors never call it)."""
        from fastrl.buffers.params import SharedParams

        row = learner * self.plan.weight_slots + slot if name == "params" else learner
        return SharedParams(self.arena.arrays, row, name)

    def player_params(self, slot: int):
        """Players' parameter slot ``slot`` (``BufferPlan.player_slots``)."""
        from fastrl.buffers.params import SharedParams

        return SharedParams(self.arena.arrays, slot, "players")

    def layer_array(self, name: str):
        """A layer's own array, by the name its ``LayerNeeds`` gave it."""
        return self.arena.arrays[name]

    def rescue_params(self, learner: int = 0):
        """The copy a learner with one weight slot keeps of it (``param_arrays``); None with two slots."""
        return self.shared_params(learner, "params_rescue") if self.plan.weight_slots == 1 else None

    def snapshot_last_whole(self, model, learner: int = 0, torn_wait_s: float = 1.0) -> int | None:
        """A dead learner's last good weights into ``model``: of every set it published (slots and rescue), the
        newest whole one (a set its death left half-written is passed over); their version, or None when none
        was ever published."""
        sets = [self.shared_params(learner, slot=k) for k in range(self.plan.weight_slots)]
        rescue = self.rescue_params(learner)
        for weights in sorted(sets + ([rescue] if rescue is not None else []), key=lambda params: -params.version):
            version = weights.snapshot_into(model, torn_wait_s)
            if version is not None:
                return version
        return None

    @classmethod
    def create(cls, plan: BufferPlan) -> RunBuffers:
        return cls(Arena.create(plan.layout()), plan)

    @classmethod
    def attach(cls, spec: ArenaSpec, plan: BufferPlan) -> RunBuffers:
        return cls(Arena.attach(spec), plan)

    @property
    def spec(self) -> ArenaSpec:
        return self.arena.spec

    def close(self) -> None:
        # drop views before unmapping: removed rather than set to None, so every other use keeps them non-optional;
        # pop, so a second close() still does nothing more than the first
        for view in ("slots", "control"):
            vars(self).pop(view, None)
        self.arena.close()
