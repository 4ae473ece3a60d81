"""``sync`` (PAAC, Clemente et al. 2017 / A2C): all envs step in lockstep, learn after every rollout.

One slot per env; the actors forward all their envs at once every step. At barrier j the
update rule takes D(θ_j) at θ_j and θ_{j+1} comes from it at once (policy lag 0, asserted); the
envs wait for θ_{j+1} before rollout j+1 begins.
"""

from __future__ import annotations

from fastrl.modes.base import BarrierSteps, Mode, ModeSpec, Schedule


class Lockstep(Schedule):
    def update(self, steps: BarrierSteps, storage: dict, j: int, last: bool, save: bool) -> None:
        steps.learn(storage, j)  # from D(θ_j) at θ_j ...
        steps.advance()  # ... θ_{j+1}
        steps.move_to(j + 1)
        steps.publish_next(j, last, save)
        return None


SPEC = ModeSpec("sync", storages=1, policy_lag=0, lockstep=True, schedule=Lockstep())
MODE = Mode("sync", (0,), "on-policy: lag 0", lambda config: SPEC, summary="lockstep, lag 0")
