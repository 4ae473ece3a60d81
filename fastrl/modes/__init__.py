"""Modes: which slot an env fills next and when a storage is handed to the learner.

All modes use the same trajectory slots. A barrier mode (sync, hts) gives every env
``storages`` slots; rollout j of env e goes to slot ``(j % storages) * envs + e``, so a
storage (all envs' slots of one rollout) is contiguous and the learner reads it as a view.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModeSpec:
    name: str
    storages: int  # slots per env
    policy_lag: int  # learner version minus the behaviour version of the data it learns from
    lockstep: bool  # actors wait for all their envs every step (one batched forward, PAAC)
    overlap: bool  # learning runs while the next rollout is collected (HTS-RL)

    def slot(self, env: int, rollout: int, envs: int) -> int:
        return self.first_slot(rollout, envs) + env

    def first_slot(self, rollout: int, envs: int) -> int:
        return (rollout % self.storages) * envs


MODES = {
    # PAAC / A2C: lockstep every step, learn after each rollout, then continue.
    "sync": ModeSpec("sync", storages=1, policy_lag=0, lockstep=True, overlap=False),
    # HTS-RL: two storages; envs fill one while the learner reads the other; barrier each rollout.
    "hts": ModeSpec("hts", storages=2, policy_lag=1, lockstep=False, overlap=True),
}


def get_mode(name: str) -> ModeSpec:
    try:
        return MODES[name]
    except KeyError:
        raise ValueError(f"engine.mode = {name!r} is not implemented; available: {', '.join(MODES)}") from None
