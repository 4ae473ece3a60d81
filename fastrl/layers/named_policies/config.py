"""The named-policies layer's config section (``multiagent``, PettingZoo, docs/multi-agent.md): which named
policy plays each agent."""

from __future__ import annotations

from dataclasses import dataclass

from fastrl.tables import documented_field as _f


@dataclass
class MultiAgentConfig:
    """Multi-agent envs (PettingZoo, docs/multi-agent.md): which policy plays each agent."""

    policies: dict = _f(
        {},
        "agent -> policy name, for every agent of the env ({}: one policy shared by every agent). Each named "
        "policy has its own parameters, optimizer and statistics, learned from its agents' rows alone (sync "
        "and hts, one learner); the first learning policy in the env's agent order is the run's own (its "
        "checkpoint's 'model', what eval and export play)",
    )
    frozen: dict = _f(
        {},
        "policy name -> a checkpoint (a run directory or a .pt file) whose parameters play that policy's agents "
        "and never learn (the run's model; only the tensors are read)",
    )
