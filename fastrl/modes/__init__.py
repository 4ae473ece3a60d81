"""Modes: which slot an env fills next and when a slot is handed to the learner.

All modes use the same trajectory slots. A barrier mode (sync, hts) gives every env
``storages`` slots; rollout j of env e goes to slot ``(j % storages) * envs + e``, so a
storage (all envs' slots of one rollout) is contiguous and the learner reads it as a view.

``async`` (IMPALA) has no barrier and no fixed slot per env: the slots circulate through a
free and a full queue of slot indices. An env takes any free slot, fills it, pushes it full;
the learner takes ``algo.batch_slots`` full slots (a gather: a copy, since they are not
contiguous), learns, and frees them. ``engine.envs + 2 * algo.batch_slots`` slots: one being
filled per env, one batch being learned from and one batch queueing, so an env waits for a
free slot only when the learner falls more than a batch behind.
"""
from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class ModeSpec:
    name: str
    storages: int  # slots per env (barrier modes)
    policy_lag: int | None  # learner version minus the behaviour version it learns from; None: measured, not fixed
    lockstep: bool  # actors wait for all their envs every step (one batched forward, PAAC)
    overlap: bool  # learning runs while the next rollout is collected (HTS-RL)
    queued: bool = False  # slots circulate through free/full queues, no barrier (IMPALA)
    run_ahead: bool = False  # an env that finished rollout j starts j+1 before the barrier of j (hts)

    @property
    def weight_slots(self) -> int:
        """Published parameter sets per learner: with run-ahead, one per storage (rollout j acts
        with θ_j from slot j % 2 while θ_{j+1} may already sit in the other)."""
        return self.storages if self.run_ahead else 1

    def slot(self, env: int, rollout: int, envs: int) -> int:
        return self.first_slot(rollout, envs) + env

    def first_slot(self, rollout: int, envs: int) -> int:
        return (rollout % self.storages) * envs

    def slot_count(self, envs: int, batch_slots: int) -> int:
        return envs + 2 * batch_slots if self.queued else envs * self.storages


MODES = {
    # PAAC / A2C: lockstep every step, learn after each rollout, then continue.
    "sync": ModeSpec("sync", storages=1, policy_lag=0, lockstep=True, overlap=False),
    # HTS-RL: two storages; envs fill one while the learner reads the other; barrier each rollout.
    # Envs run ahead: θ_{j+2} = θ_{j+1} - η g_j is ready as soon as D(θ_j) is learned from, so
    # "go j+2" is sent at barrier j and an env finishing rollout j+1 goes straight on.
    "hts": ModeSpec("hts", storages=2, policy_lag=1, lockstep=False, overlap=True, run_ahead=True),
    # IMPALA: free/full queues of slots, no barrier; the lag is whatever the queues make it.
    "async": ModeSpec("async", storages=0, policy_lag=None, lockstep=False, overlap=True, queued=True),
}


def get_mode(name: str) -> ModeSpec:
    try:
        return MODES[name]
    except KeyError:
        raise ValueError(f"engine.mode = {name!r} is not implemented; available: {', '.join(MODES)}, gala") from None


def mode_of(config) -> ModeSpec:
    """The slot schedule of a run: its mode's, or for ``gala`` its base mode's, named after both."""
    engine = config.engine
    if engine.mode == "gala":
        # gala's learners gossip at each barrier in turn, so its envs do not run ahead
        return replace(get_mode(config.gala.base), name=f"gala ({config.gala.base})", run_ahead=False)
    return get_mode(engine.mode)
