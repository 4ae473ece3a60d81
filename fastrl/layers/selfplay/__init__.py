"""The self-play pool (docs/multi-agent.md): in each env one seat learns and the others are played by snapshots of
the policy drawn from a pool, the random or the scripted player. One layer, registered here; its parts are named
by path, so importing this package imports none of them."""

from __future__ import annotations

from fastrl.layer import Layer, register_layer
from fastrl.layers.agent_rows import RATINGS

# its columns of each learner's stats row: the learning policy's Elo rating, snapshots in the pool, the learning
# seat's mean score (win 1, draw 1/2) over its last games against the pool, games rated, and its mean score over
# its last games against the uniformly random player and against the scripted player
SELFPLAY_STATS = ("elo", "pool_size", "pool_score", "pool_games", "random_score", "scripted_score")

LAYER = register_layer(
    Layer(
        "selfplay_pool",
        "multi-agent envs: opponents from a pool of snapshots",
        order=10,  # reads a storage's raw rewards, before reward scaling
        plan="fastrl.layers.selfplay.checks:plan_selfplay",
        learner_extension="fastrl.layers.selfplay.pool:selfplay_pool",
        row_roles="fastrl.layers.selfplay.roles:PoolRoles",
        plays_rows=lambda config: config.selfplay.opponents == "pool",
        metrics="fastrl.layers.selfplay.metrics:pool_metrics",
        stats=SELFPLAY_STATS,
        curves=((RATINGS, "elo"),),
        config="fastrl.layers.selfplay.config:SelfPlayConfig",
        section="selfplay",
    )
)
