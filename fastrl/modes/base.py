"""What a mode is made of, in two parts that different readers need.

- ``Mode``: one value of ``engine.mode``, with the algorithms it learns with (config validation and
  ``make_rule`` read these) and how a config turns it into the run's ``ModeSpec``.
- ``ModeSpec``: the run's slot schedule, which every process reads: how many storages, which
  slot an env fills next, whether actors wait for all their envs (lockstep), whether slots
  circulate through queues, whether envs run ahead, the policy lag the learner asserts, and
  the ``Schedule``: the order of the learner's steps at a barrier.

A ``Schedule`` orders steps the learner provides (``BarrierSteps``); it holds no state, so one
instance serves every run. Nothing here imports torch or the learner: ``fastrl.config`` imports
this package, and executors import it without ever loading torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol


class BarrierSteps(Protocol):
    """What a schedule may ask of the learner at barrier j (``fastrl.learning.learner.Learner``)."""

    def learn(self, storage: dict, rollout: int) -> None:
        """The update rule takes what D(θ_rollout) gives (gradients, PPO epochs) and keeps it pending."""

    def advance(self) -> None:
        """θ moves on by the pending update (unchanged when nothing is pending); the version counts up."""

    def move_to(self, rollout: int) -> None:
        """The counters (rollout, frames, agent steps) now stand at the start of ``rollout``."""

    def publish(self) -> None:
        """θ into the weight slot of the rollout that acts with it."""

    def release(self, newest: int) -> None:
        """Send "go" for every rollout up to ``newest`` not yet released."""

    def publish_next(self, rollout: int, last: bool, save: bool) -> None:
        """After barrier ``rollout``'s update: publish θ and release the envs, unless a checkpoint holds them."""

    def parks_at(self, rollout: int) -> bool:
        """Barrier ``rollout`` must find every env parked (it checkpoints, or it is the last)."""

    def state(self, copied: bool = False) -> dict:
        """What a resumed run goes on from, as of now."""


class Schedule:
    """The order of the learner's steps at each barrier; the default is lockstep (sync)."""

    def start(self, steps: BarrierSteps, rollout: int) -> None:
        """After θ_rollout is published and rollout ``rollout`` released: anything more before its barrier."""

    def update(self, steps: BarrierSteps, storage: dict, j: int, last: bool, save: bool) -> dict | None:
        """Barrier j: learn from D(θ_j), move θ on, publish, release. Returns the state a resumed run goes
        on from when it is not the state after these steps (None: that one)."""
        raise NotImplementedError

    def release_target(self, steps: BarrierSteps, j: int) -> int:
        """The newest rollout the envs may begin once barrier j is done."""
        return j + 1


@dataclass(frozen=True)
class ModeSpec:
    name: str
    storages: int  # slots per env (barrier modes)
    policy_lag: int | None  # learner version minus the behaviour version it learns from; None: measured, not fixed
    lockstep: bool  # actors wait for all their envs every step (one batched forward, PAAC)
    queued: bool = False  # slots circulate through free/full queues, no barrier (IMPALA)
    run_ahead: bool = False  # an env that finished rollout j starts j+1 before the barrier of j (hts)
    schedule: Schedule | None = None  # the learner's steps at a barrier; None: no barrier (queued)
    # its learners step on their own (each at its own rollout, on its own share of the envs): each keeps its own
    # checkpoints, no checkpoint waits for every env's state, the run cannot resume, the metrics have a line each
    independent: bool = False

    @property
    def weight_slots(self) -> int:
        """Published parameter sets per learner: with run-ahead, one per storage (rollout j acts
        with θ_j from slot j % 2 while θ_{j+1} may already sit in the other)."""
        return self.storages if self.run_ahead else 1

    def slot_count(self, envs: int, batch_slots: int) -> int:
        return envs + 2 * batch_slots if self.queued else envs * self.storages

    def slots_per_update(self, owned_envs: int, batch_slots: int) -> int:
        """Slots one update learns from: every owned env's (barrier modes) or one batch (queued)."""
        return batch_slots if self.queued else owned_envs


@dataclass(frozen=True)
class Mode:
    """One value of ``engine.mode``."""

    name: str
    lags: tuple[int | None, ...]  # the policy lags of its data: an algorithm learns here if it learns at one
    because: str  # why those, for the message that refuses another
    spec_of: Callable[[Any], ModeSpec]  # config -> the run's ModeSpec (gala composes it with its base)
    learners: bool = False  # runs engine.learners > 1 (every other mode has one learner)
    # which registered algorithms it learns with, of those learning at one of its lags; None: all of them
    takes: Callable[[Any], bool] | None = None
    check: Callable[[Any], str | None] | None = None  # its cross-key checks on the Config: the error, or None
    # (spec, [(path, checkpoint) of each learner], store) -> None: an independent mode's checkpoint of the whole
    # run from its learners' last (``fastrl.process.last_checkpoint``); None: the learners' own alone
    combine_learners: Callable[..., None] | None = None
    summary: str = ""  # one line for engine.mode's entry of the config reference
