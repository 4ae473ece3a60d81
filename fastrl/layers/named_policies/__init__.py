"""Named policies (docs/multi-agent.md, ``[multiagent]``): each agent of a multi-agent env played by a policy of
its own name, learning or frozen. One layer, registered here; its parts are named by path, so importing this
package imports none of them."""

from __future__ import annotations

from fastrl.layer import Layer, register_layer
from fastrl.layers.agent_rows import RATINGS

LAYER = register_layer(
    Layer(
        "named_policies",
        "multi-agent envs: named policies per agent",
        order=30,
        plan="fastrl.layers.named_policies.checks:plan_named_policies",
        learner_extension="fastrl.layers.named_policies.policies:named_policies",
        row_roles="fastrl.layers.named_policies.roles:NamedRoles",
        plays_rows=lambda config: bool(config.multiagent.policies),
        metrics="fastrl.layers.named_policies.metrics:named_policy_metrics",
        curves=((RATINGS, "policy_elo"),),
        config="fastrl.layers.named_policies.config:MultiAgentConfig",
        section="multiagent",
    )
)
