"""``gala`` (GALA, Assran et al. 2019): n learners, each an A2C agent on its own share of the envs,
mixing parameters by gossip (``fastrl.layers.gossip.mixing``; ``gala.mixing``).

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
from typing import Any

from fastrl.config.validation import launch_size
from fastrl.layers.gossip import config as section
from fastrl.modes import hts, sync
from fastrl.modes.base import BarrierSteps, Mode, ModeSpec, Schedule

BASES = {"sync": sync.SPEC, "hts": hts.SPEC}  # the spec of each of gala.base's values (``config.BASES``)
if tuple(BASES) != section.BASES:
    raise ImportError(f"gala.base's values are {section.BASES}; the gossip mode carries out {tuple(BASES)}")


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
    return replace(spec, name=f"gala ({base})", independent=True)


def check(config: Any) -> str | None:
    """gala's cross-key checks: two agents at least, an equal share of the envs each, a process each."""
    engine = config.engine
    if engine.learners * launch_size() < 2:
        return (
            "engine.mode = 'gala' needs engine.learners >= 2 (the number of gossiping agents; under "
            "torchrun engine.learners is per rank, and one per rank is enough)"
        )
    if engine.envs % engine.learners:
        return (
            f"engine.envs = {engine.envs} must be a multiple of engine.learners = {engine.learners}: "
            "each gala agent owns an equal share of the envs"
        )
    if engine.serial:
        return (
            "engine.serial = true cannot run gala: its learners wait on each other's messages, "
            "so they need processes of their own"
        )
    return None


def _average_learners(*args: Any) -> None:
    from fastrl.layers.gossip.checkpoint import average_learners

    average_learners(*args)


MODE = Mode(
    "gala",
    (0, 1),
    "GALA-A2C",
    lambda config: compose(config.gala.base),
    learners=True,
    takes=lambda algorithm: algorithm.gala,  # an algorithm registered as a GALA agent's rule
    check=check,
    combine_learners=_average_learners,
    summary="engine.learners agents, each sync or hts on its share of the envs, gossiping parameters",
)
