"""GALA (Assran et al. 2019) as a layer: ``engine.mode = "gala"``'s learners, each an agent on its share of the envs,
mixing θ by gossip. Its parts: the mode (``mode``), its section ``[gala]`` (``config``), the mailboxes it plans in
the run's segment (``mailboxes``), each learner's mixing (``mixing``, over ranks ``ring`` and ``group``), the
consensus bound (``bounds``), its metrics (``metrics``) and the checkpoint of the learners' average
(``checkpoint``). The mode is registered here (light: it is a schedule over sync's and hts's); every other part is
named by path, so registering the layer imports none of them."""

from fastrl.layer import Layer, register_layer
from fastrl.layers.gossip.mode import MODE
from fastrl.modes import register_mode

# its columns of each learner's stats row: ‖x_i − x̄‖ after the last mix (x̄ the average of every learner's
# published θ), the bound on that distance from the update norms (``bounds``), messages mixed, seconds blocked on
# peers, the most consecutive updates without a new message from the in-peer, this learner's update minus the
# update of the in-peer's message it last mixed, and under torchrun the max over every rank's learners of
# ‖x_g − x̄‖ at the previous consensus round
GOSSIP_STATS = ("consensus", "bound", "mixes", "gossip_wait_s", "staleness", "message_age", "radius")

register_mode(MODE)
LAYER = register_layer(
    Layer(
        "gossip",
        "gala: the learners' mixing of θ over a ring, and the consensus bound",
        order=40,  # mixes θ once every other layer has updated it
        plan="fastrl.layers.gossip.mailboxes:plan_mailboxes",
        learner_extension="fastrl.layers.gossip.mixing:gossip",
        metrics="fastrl.layers.gossip.metrics:gossip_metrics",
        stats=GOSSIP_STATS,
        config="fastrl.layers.gossip.config:GalaConfig",
        section="gala",
    )
)
