"""gala's arrays in the run's segment: what its learners gossip through (``fastrl.learning.gossip``).

- ``mailbox`` [learners, n_params]: each learner's outgoing message (the half-step it sends its
  out-peer), a seqlocked vector like the published weights (``fastrl.buffers.params``);
  ``mailbox_header`` [learners, 8]: its seqlock and version, then gossip's own columns.
- ``allreduce`` [2, learners, n_params]: each learner's gradient of update k in row k % 2 (two
  updates' worth, so no learner overwrites one a peer has not read); ``allreduce_header``
  [learners, 8]: the update each learner posted, and whether it finished.

A header row is 8 int64, one cache line, so learners never write into each other's lines.
A run that is not gala has none of them (a gala run under torchrun may have one learner per rank). Under
torchrun they are per rank (its own learners): the messages between learners of different ranks go point
to point, their header columns kept as counters in the launch's store (``fastrl.ranks.gala_ring``).
"""

from __future__ import annotations


def gossip_arrays(n_params: int, learners: int) -> list[tuple[str, tuple[int, ...], str]]:
    return [
        ("mailbox", (learners, n_params), "float32"),
        ("mailbox_header", (learners, 8), "int64"),
        ("allreduce", (2, learners, n_params), "float32"),
        ("allreduce_header", (learners, 8), "int64"),
    ]
