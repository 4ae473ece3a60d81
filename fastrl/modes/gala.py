"""``gala`` (GALA, Assran et al. 2019): n learners, each an A2C agent on its own share of the envs,
mixing parameters by gossip (``fastrl.learning.gossip``; ``gala.mixing``).

Each learner runs its base mode (``gala.base``) on its envs and its own storage rows, and gossips
after its local step, at every barrier in turn:

- base ``sync``: sync's lockstep schedule, unchanged.
- base ``hts``: two storages and lag 1, but no running ahead (the learners gossip at each barrier
  in turn, so one weight slot each). At barrier j the learner applies g_{j−1} to get θ_{j+1}
  (gossiping it), publishes it and releases rollout j+1 first, then takes g_j at θ_j on D(θ_j)
  while the envs fill rollout j+1: the overlap of learning and acting that HTS-RL is about.
"""

from __future__ import annotations

from dataclasses import replace

from fastrl.modes import hts, sync
from fastrl.modes.base import BarrierSteps, Mode, ModeSpec, Schedule

BASES = {"sync": sync.SPEC, "hts": hts.SPEC}  # the spec of each of gala.base's values (fastrl.schema.GALA_BASES)


class Overlap(Schedule):
    def update(self, steps: BarrierSteps, storage: dict, j: int, last: bool, save: bool) -> dict | None:
        steps.advance()  # θ_{j+1} = θ_j − η g_{j−1}
        steps.move_to(j + 1)
        steps.publish_next(j, last, save)
        steps.learn(storage, j)  # g_j at θ_j, while the envs fill rollout j+1
        if not last:
            return None
        resume_state = steps.state(copied=True)  # a resumed run goes on from before the last step
        steps.advance()
        return resume_state


OVERLAP = Overlap()


def compose(base: str) -> ModeSpec:
    """A gala learner's slot schedule: its base mode's, named after both; hts without running ahead."""
    spec = BASES[base]
    if spec.run_ahead:
        spec = replace(spec, run_ahead=False, schedule=OVERLAP)
    return replace(spec, name=f"gala ({base})")


MODE = Mode("gala", (0, 1), "GALA-A2C", lambda config: compose(config.gala.base), gossip=True)
