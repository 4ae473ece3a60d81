"""GALA's gossip as a layer (``fastrl.layers.Layer``): its learner extension (``fastrl.learning.gossip``) and
metrics (``fastrl.learning.gossip_metrics``) named by path, so registering it imports neither."""

from fastrl.layers import Layer, register_layer

# its columns of each learner's stats row: ‖x_i − x̄‖ after the last mix (x̄ the average of every learner's
# published θ), the bound on that distance from the update norms (fastrl.algos.gossip_bounds), messages mixed,
# seconds blocked on peers, the most consecutive updates without a new message from the in-peer, this learner's
# update minus the update of the in-peer's message it last mixed, and under torchrun the max over every rank's
# learners of ‖x_g − x̄‖ at the previous consensus round
GOSSIP_STATS = ("consensus", "bound", "mixes", "gossip_wait_s", "staleness", "message_age", "radius")

LAYER = register_layer(
    Layer(
        "gossip",
        "gala: the learners' mixing of θ over a ring, and the consensus bound",
        order=40,  # mixes θ once every other layer has updated it
        learner_extension="fastrl.learning.gossip:gossip",
        metrics="fastrl.learning.gossip_metrics:gossip_metrics",
        stats=GOSSIP_STATS,
    )
)
