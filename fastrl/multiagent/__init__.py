"""Multi-agent play as layers on the core: agent rows' checks, the self-play pool, named policies. Importing this
package registers them (light: the implementations are named by path and imported when a run needs them)."""

from __future__ import annotations

from fastrl.layers import Layer, register_layer

# the pool's columns of each learner's stats row: the learning policy's Elo rating, snapshots in the pool, the
# learning seat's mean score (win 1, draw 1/2) over its last games against the pool, games rated, and its mean score
# over its last games against the uniformly random player and against the scripted player
SELFPLAY_STATS = ("elo", "pool_size", "pool_score", "pool_games", "random_score", "scripted_score")
RATINGS = "Elo rating (against the self-play pool, or between named policies)"  # their shared panel of fastrl plot

register_layer(
    Layer(
        "multiagent",
        "a multi-agent env's agent rows: whole in every share of the envs, learned by an algorithm that reads them",
        plan="fastrl.multiagent.checks:plan_multiagent",
    )
)
register_layer(
    Layer(
        "selfplay_pool",
        "multi-agent envs: opponents from a pool of snapshots",
        order=10,  # reads a storage's raw rewards, before reward scaling
        learner_extension="fastrl.multiagent.selfplay:selfplay_pool",
        row_roles="fastrl.multiagent.row_roles:PoolRoles",
        plays_rows=lambda config: config.selfplay.opponents == "pool",
        metrics="fastrl.multiagent.metrics:pool_metrics",
        stats=SELFPLAY_STATS,
        curves=((RATINGS, "elo"),),
        config="fastrl.multiagent.config:SelfPlayConfig",
        section="selfplay",
    )
)
register_layer(
    Layer(
        "named_policies",
        "multi-agent envs: named policies per agent",
        order=30,
        learner_extension="fastrl.multiagent.named_policies:named_policies",
        row_roles="fastrl.multiagent.row_roles:NamedRoles",
        plays_rows=lambda config: bool(config.multiagent.policies),
        metrics="fastrl.multiagent.metrics:named_policy_metrics",
        curves=((RATINGS, "policy_elo"),),
        config="fastrl.multiagent.config:MultiAgentConfig",
        section="multiagent",
    )
)
