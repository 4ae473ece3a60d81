"""Trajectory slots: S slots of T+1 steps per field, the one buffer every mode shares.

A slot is one env's trajectory segment. Row ``slot * (T + 1) + t`` addresses step t of a
slot in the flat views that executors and actors use; the learner reads whole storages
(a contiguous run of slots) as ``[slots, T + 1, ...]`` views, never copies.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from csrc_free_kernels.step_end import TRUNCATED

# name -> dtype; obs takes the env's own dtype. u is float64 so inverse-CDF sampling
# resolves probabilities far below float32's resolution. done holds how step t ended
# (csrc_free_kernels.step_end: continues, terminated, truncated by a time limit).
# action and u are scalars per row for Discrete; MultiDiscrete and Box widen both to the action's
# D dimensions (``SlotShape.action_shape``: one uniform per dimension) and a Box stores float32.
STEP_FIELDS = {
    "action": "int64",
    "reward": "float32",
    "done": "uint8",
    "logp": "float32",
    "value": "float32",
    "u": "float64",
    "version": "int64",
}


# Observation-shaped fields. final_obs[t] is written only at a TRUNCATED step t: the episode's
# final observation, which the reset overwrites in obs[t + 1] and the learner needs to bootstrap
# the cut return from its value. Keeping the observation (not the actor's value of it) costs one
# more obs-sized array, but no change to the executor/actor protocol, and the learner values it
# with the very parameters it values row T with (which in hts PPO and IMPALA are not the actor's).
OBS_FIELDS = ("obs", "final_obs")

# How each row of a multi-agent env takes part in learning (fastrl.envs.base: ACTING, WAITING, ABSENT): only
# runs whose envs have several agents have the field; the learners weigh their losses by it.
LIVE_FIELD = "live"

# A recurrent policy's state (``model.lstm``, fastrl.models.recurrent): hidden[t] is what the policy
# reads at row t, float32 of the core's width; only runs with an LSTM have the field.
HIDDEN_FIELD = "hidden"


@dataclass(frozen=True)
class SlotShape:
    slots: int
    steps: int  # T: transitions per slot; each field holds T + 1 rows
    obs_shape: tuple[int, ...]
    obs_dtype: str
    action_shape: tuple[int, ...] = ()  # per row, of ``action`` and ``u`` (fastrl.envs.actions.ActionSpec.slot_shape)
    action_dtype: str = "int64"
    hidden_size: int = 0  # a recurrent policy's state row (2 H); 0: no ``hidden`` field
    live: bool = False  # a ``live`` field: the envs have several agents, which may wait or leave

    def arrays(self) -> list[tuple[str, tuple[int, ...], str]]:
        rows = (self.slots, self.steps + 1)
        hidden: list[tuple[str, tuple[int, ...], str]] = (
            [(HIDDEN_FIELD, rows + (self.hidden_size,), "float32")] if self.hidden_size else []
        )
        hidden += [(LIVE_FIELD, rows, "uint8")] if self.live else []
        return (
            [(name, rows + tuple(self.obs_shape), self.obs_dtype) for name in OBS_FIELDS]
            + [
                (name, rows + self._per_row(name), self.action_dtype if name == "action" else dtype)
                for name, dtype in STEP_FIELDS.items()
            ]
            + hidden
        )

    def _per_row(self, name: str) -> tuple[int, ...]:
        return tuple(self.action_shape) if name in ("action", "u") else ()


@dataclass(frozen=True)
class SlotMap:
    """Where each step of each env lives: the one place the data path's addressing is computed.

    Slot s holds rows ``s * (T + 1) .. s * (T + 1) + T`` of the flat views. In a barrier mode rollout j of
    env e fills slot ``(j % storages) * envs + e``, so one rollout's storage is ``envs`` consecutive slots
    and its rows run from ``storage_slot(j) * (T + 1)``; a queued mode hands slots out from a queue."""

    steps: int  # T
    envs: int = 0  # this rank's envs (barrier modes)
    storages: int = 1  # slots per env (barrier modes): 2 where the envs run ahead (hts)

    def first_row(self, slot: int) -> int:
        return slot * (self.steps + 1)

    def slot_of(self, row: int) -> int:
        return row // (self.steps + 1)

    def storage_slot(self, rollout: int) -> int:
        """The first slot of the storage rollout ``rollout`` fills."""
        return (rollout % self.storages) * self.envs

    def slot(self, env: int, rollout: int) -> int:
        return self.storage_slot(rollout) + env

    def storage_of_row(self, row: int) -> int:
        """Which storage a row belongs to (0 .. storages - 1): in hts, whose weights act on it."""
        return (row // ((self.steps + 1) * self.envs)) % self.storages


class TrajectorySlots:
    def __init__(self, arrays: dict[str, np.ndarray], shape: SlotShape):
        self.shape = shape
        self.steps = shape.steps
        self.map = SlotMap(shape.steps)
        self.fields = {name: arrays[name] for name, _, _ in shape.arrays()}
        n_rows = shape.slots * (shape.steps + 1)
        # Flat [rows, ...] views of the same memory: one fancy-index gathers a whole batch.
        self.rows: dict[str, np.ndarray] = {name: a.reshape((n_rows,) + a.shape[2:]) for name, a in self.fields.items()}

    def row(self, slot: int, t: int) -> int:
        return self.map.first_row(slot) + t

    def gather(self, slots: list[int]) -> dict[str, np.ndarray]:
        """``[len(slots), T + 1, ...]`` copies of any slots (async batches are not contiguous).

        ``final_obs`` is copied only at truncated steps, the only rows anyone reads: copying all
        of it would double the gather's cost for a few rows per batch (the zeros are not touched)."""
        index = np.asarray(slots, np.int64)
        batch = {name: np.take(a, index, axis=0) for name, a in self.fields.items() if name != "final_obs"}
        final_obs = self.fields["final_obs"]
        batch["final_obs"] = np.zeros((len(index),) + final_obs.shape[1:], final_obs.dtype)
        where = np.nonzero(batch["done"] == TRUNCATED)
        batch["final_obs"][where] = final_obs[index[where[0]], where[1]]
        return batch

    def storage(self, first_slot: int, count: int) -> dict[str, np.ndarray]:
        """Views ``[count, T + 1, ...]`` of consecutive slots (no copy)."""
        return {name: a[first_slot : first_slot + count] for name, a in self.fields.items()}
