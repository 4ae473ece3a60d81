"""Trajectory slots: S slots of T+1 steps per field, the one buffer every mode shares.

A slot is one env's trajectory segment. Row ``slot * (T + 1) + t`` addresses step t of a
slot in the flat views that executors and actors use; the learner reads whole storages
(a contiguous run of slots) as ``[slots, T + 1, ...]`` views, never copies.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# name -> dtype; obs takes the env's own dtype. u is float64 so inverse-CDF sampling
# resolves probabilities far below float32's resolution.
STEP_FIELDS = {
    "action": "int64",
    "reward": "float32",
    "done": "uint8",
    "logp": "float32",
    "value": "float32",
    "u": "float64",
    "version": "int64",
}


@dataclass(frozen=True)
class SlotShape:
    slots: int
    steps: int  # T: transitions per slot; each field holds T + 1 rows
    obs_shape: tuple[int, ...]
    obs_dtype: str

    def arrays(self) -> list[tuple[str, tuple[int, ...], str]]:
        rows = (self.slots, self.steps + 1)
        return [("obs", rows + tuple(self.obs_shape), self.obs_dtype)] + [
            (name, rows, dtype) for name, dtype in STEP_FIELDS.items()
        ]


class TrajectorySlots:
    def __init__(self, arrays: dict[str, np.ndarray], shape: SlotShape):
        self.shape = shape
        self.steps = shape.steps
        self.fields = {name: arrays[name] for name in ["obs", *STEP_FIELDS]}
        n_rows = shape.slots * (shape.steps + 1)
        # Flat [rows, ...] views of the same memory: one fancy-index gathers a whole batch.
        self.rows = {name: a.reshape((n_rows,) + a.shape[2:]) for name, a in self.fields.items()}

    def row(self, slot: int, t: int) -> int:
        return slot * (self.steps + 1) + t

    def gather(self, slots: list[int]) -> dict[str, np.ndarray]:
        """``[len(slots), T + 1, ...]`` copies of any slots (async batches are not contiguous)."""
        index = np.asarray(slots, np.int64)
        return {name: np.take(a, index, axis=0) for name, a in self.fields.items()}

    def storage(self, first_slot: int, count: int) -> dict[str, np.ndarray]:
        """Views ``[count, T + 1, ...]`` of consecutive slots (no copy)."""
        return {name: a[first_slot : first_slot + count] for name, a in self.fields.items()}
