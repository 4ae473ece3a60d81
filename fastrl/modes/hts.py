"""``hts`` (HTS-RL, Liu, Yeh, Schwing 2020): rollout and learning run at once on two storages.

Two slots per env (storage A and B): the envs fill one while the learner reads the other, and
the roles swap at each barrier. Eq. 6 of the paper: θ_{j+1} = θ_j − η·g_{j−1}, with g_{j−1} the
gradient of D(θ_{j−1}) taken at θ_{j−1}, so the policy lag is exactly one (asserted) and needs no
correction. θ_1 = θ_0: there is no D(θ_{−1}).

The envs run ahead. θ_{j+1} only needs D(θ_{j−1}), so it is published (into the second of two
weight slots; rollout j acts with slot j mod 2) while rollout j runs, and an env that finishes
rollout j begins j+1 at once, without waiting for the slowest env or for the learner. At barrier
j (all of rollout j in) the learner takes g_j at θ_j, applies it to θ_{j+1}, publishes θ_{j+2}
and sends "go j+2" while the envs fill rollout j+1. Versions, gradients and optimizer steps are
those of the HTS-RL schedule, bit for bit; only the waiting goes. A barrier that must find every
env parked (a checkpoint, the last one) is decided one barrier early: its "go" for the next
rollout is held back.
"""

from __future__ import annotations

from fastrl.modes.base import BarrierSteps, Mode, ModeSpec, Schedule


class RunAhead(Schedule):
    def start(self, steps: BarrierSteps, rollout: int) -> None:
        steps.advance()  # θ_{r+1} as well, so an env that finishes rollout r goes straight on
        steps.publish()
        steps.release(self.release_target(steps, rollout - 1))

    def update(self, steps: BarrierSteps, storage: dict, j: int, last: bool, save: bool) -> dict | None:
        steps.move_to(j + 1)  # θ_{j+1} is published already: the counters go with it
        steps.learn(storage, j)  # g_j at θ_j, on D(θ_j)
        resume_state = steps.state(copied=True) if save else None  # θ_{j+1} with g_j pending
        steps.advance()  # θ_{j+2} = θ_{j+1} − η g_j
        steps.publish_next(j, last, save)
        return resume_state

    def release_target(self, steps: BarrierSteps, j: int) -> int:
        """j+2, unless barrier j+1 must find the envs parked (it checkpoints, or it is the last)."""
        return j + 1 if steps.parks_at(j + 1) else j + 2


SPEC = ModeSpec("hts", storages=2, policy_lag=1, lockstep=False, run_ahead=True, schedule=RunAhead())
MODE = Mode(
    "hts",
    (1,),
    "lag 1: the delayed gradient, or PPO's clipped ratio",
    lambda config: SPEC,
    summary="two storages, lag 1",
)
