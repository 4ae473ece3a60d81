"""The config sections of the multi-agent layers (PettingZoo, docs/multi-agent.md), declared by their ``Layer``s
(``fastrl.layers.agent_rows``): who plays the agents besides the learning policy (``selfplay``) and which named policy
plays each agent (``multiagent``)."""

from __future__ import annotations

from dataclasses import dataclass

from fastrl.tables import documented_field as _f


@dataclass
class SelfPlayConfig:
    """Multi-agent envs (PettingZoo, docs/multi-agent.md): who plays the agents other than the learning policy."""

    opponents: str = _f(
        "shared",
        "'shared': every agent is the learning policy and every agent's row learns (parameter sharing); 'pool': "
        "in each env one seat learns (env e's agent e mod k, so every seat in turn) and the other seats are "
        "played by snapshots of the policy from a pool, drawn at each rollout (sync and hts, one learner)",
        choices=("shared", "pool"),
    )
    pool_size: int = _f(8, "'pool': snapshots kept (the oldest leaves when a new one comes)", min=1, max=256)
    snapshot_every: int = _f(10, "'pool': updates between snapshots of the learning policy", min=1)
    sampling: str = _f(
        "uniform",
        "'pool': each env's opponent at each rollout: 'uniform' over the pool, 'latest' (the newest snapshot) or "
        "'rating': weighted (1 - p)^2 by p, the learner's Elo-expected score against it (the opponents it beats "
        "least, most often)",
        choices=("uniform", "latest", "rating"),
    )
    random_share: float = _f(
        0.0,
        "'pool': the share of each rollout's games whose opponent is a uniformly random legal player instead of a "
        "snapshot (drawn per env from the run seed's stream): games the policy's own past selves would never "
        "play, so one line of play both seats repeat cannot take over",
        min=0.0,
        max=1.0,
    )
    scripted: str = _f(
        "",
        "'pool': a scripted player for selfplay.scripted_share of the games: 'connect_four_lookahead' (wins if it "
        "can, blocks if it must, else random; connect_four_v3) or a model name or 'package.module:factory' whose "
        "network maps the observation rows to fixed logits (fastrl.models.scripted); never trained",
    )
    scripted_share: float = _f(
        0.0,
        "'pool': the share of each rollout's games whose opponent is selfplay.scripted instead of a snapshot "
        "(drawn per env with random_share's draw; random_share + scripted_share <= 1): a player that punishes "
        "what self-play alone never meets, such as a missed block",
        min=0.0,
        max=1.0,
    )
    elo_k: float = _f(16.0, "the Elo ratings' step: rating change per game = elo_k x (score - expected)", min=0.0)
