"""gala's arrays in the run's segment, planned by the gossip layer (``plan_mailboxes``, a plan hook): what its
learners gossip through (``fastrl.layers.gossip.mixing``).

- ``mailbox`` [learners, n_params]: each learner's outgoing message (the half-step it sends its
  out-peer), a seqlocked vector like the published weights (``fastrl.buffers.params``);
  ``mailbox_header`` [learners, 8]: its seqlock and version, then gossip's own columns.
- ``allreduce`` [2, learners, n_params]: each learner's gradient of update k in row k % 2 (two
  updates' worth, so no learner overwrites one a peer has not read); ``allreduce_header``
  [learners, 8]: the update each learner posted, and whether it finished.

A header row is 8 int64, one cache line, so learners never write into each other's lines.
A run that is not gala has none of them (a gala run under torchrun may have one learner per rank). Under
torchrun they are per rank (its own learners): the messages between learners of different ranks go point
to point, their header columns kept as counters in the launch's store (``fastrl.layers.gossip.ring``).
"""

from __future__ import annotations

from typing import Any

from fastrl.layer import LayerNeeds


def plan_mailboxes(config: Any, info: Any, policy: Any, resuming: bool) -> tuple[Any, LayerNeeds]:
    """A gala run's mailboxes, sized by the policy's parameters; nothing for any other run."""
    from fastrl.buffers.params import count_parameters

    if config.engine.mode != "gala":
        return config, LayerNeeds()
    return config, LayerNeeds(arrays=tuple(gossip_arrays(count_parameters(policy), config.engine.learners)))


def gossip_arrays(n_params: int, learners: int) -> list[tuple[str, tuple[int, ...], str]]:
    return [
        ("mailbox", (learners, n_params), "float32"),
        ("mailbox_header", (learners, 8), "int64"),
        ("allreduce", (2, learners, n_params), "float32"),
        ("allreduce_header", (learners, 8), "int64"),
    ]
