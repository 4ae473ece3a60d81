"""Multi-agent play as a layer on the core: agent rows, the self-play pool, named policies. Importing this package
registers its parts (light: the implementations are named by path and imported when a run needs them)."""

from __future__ import annotations

from fastrl.layer_plans import register_plan_hook
from fastrl.learning.extensions import register_learner_extension
from fastrl.sampling.row_roles import register_row_roles
from fastrl.telemetry.sections import register_metrics_section

register_plan_hook("multiagent", "fastrl.multiagent.checks:plan_multiagent")
register_learner_extension("selfplay_pool", "fastrl.multiagent.selfplay:selfplay_pool", order=10)
register_learner_extension("named_policies", "fastrl.multiagent.named_policies:named_policies", order=30)

# who plays each agent's row: the seats of a self-play pool's snapshots, or each agent's named policy
register_row_roles(
    "selfplay_pool", lambda config: config.selfplay.opponents == "pool", "fastrl.multiagent.row_roles:PoolRoles"
)
register_row_roles(
    "named_policies", lambda config: bool(config.multiagent.policies), "fastrl.multiagent.row_roles:NamedRoles"
)

# their keys of the metrics lines
register_metrics_section("selfplay_pool", "fastrl.multiagent.metrics:pool_metrics")
register_metrics_section("named_policies", "fastrl.multiagent.metrics:named_policy_metrics")
