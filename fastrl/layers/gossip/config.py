"""GALA's config section (``[gala]``), declared by the gossip layer (``fastrl.layers.gossip``)."""

from __future__ import annotations

from dataclasses import dataclass

from fastrl.tables import documented_field as _f

BASES = ("sync", "hts")  # gala.base's values: the barrier modes a gala agent runs on its envs (``mode.BASES``)


@dataclass
class GalaConfig:
    """GALA (Assran et al. 2019): engine.learners agents that mix parameters after each local update."""

    mixing: str = _f(
        "ring",
        "'ring': each agent averages its parameters with its in-peer's last message (directed ring, non-blocking); "
        "'allreduce': gradients averaged over all agents every update (one big A2C, learners stay identical); "
        "'none': independent agents",
        choices=("ring", "allreduce", "none"),
    )
    base: str = _f("sync", "each agent's schedule on its envs: 'sync' (A2C) or 'hts' (HTS-RL)", choices=BASES)
    max_staleness: int = _f(
        8,
        "tau': an agent blocks only when more than this many of its updates passed without a new message from its "
        "in-peer (ring); a faster agent runs at most tau'+1 updates per update of its in-peer",
        min=0,
        max=1 << 20,
    )
    deterministic: bool = _f(
        False,
        "fixed gossip schedule: update k mixes the in-peer's message of update k (a sender waits until it is read), "
        "so the run is bit-reproducible across executor/actor counts",
    )
