"""Multi-agent play as layers on the core: agent rows' checks, the self-play pool, named policies. Importing this
package registers them (light: the implementations are named by path and imported when a run needs them)."""

from __future__ import annotations

from fastrl.layers import Layer, register_layer

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
        "self-play against a pool of past snapshots, rated by Elo",
        order=10,  # reads a storage's raw rewards, before reward scaling
        learner_extension="fastrl.multiagent.selfplay:selfplay_pool",
        row_roles="fastrl.multiagent.row_roles:PoolRoles",
        plays_rows=lambda config: config.selfplay.opponents == "pool",
        metrics="fastrl.multiagent.metrics:pool_metrics",
    )
)
register_layer(
    Layer(
        "named_policies",
        "each agent played by its own named policy: learning, frozen at a checkpoint, or scripted",
        order=30,
        learner_extension="fastrl.multiagent.named_policies:named_policies",
        row_roles="fastrl.multiagent.row_roles:NamedRoles",
        plays_rows=lambda config: bool(config.multiagent.policies),
        metrics="fastrl.multiagent.metrics:named_policy_metrics",
    )
)
