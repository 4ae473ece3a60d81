"""Reward scaling's config section (``[reward_scaling]``), declared by its layer (``fastrl.layers.reward_scaling``);
its keys were ``algo.normalize_rewards`` and ``algo.reward_clip``, which still read (``Layer.moved_keys``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastrl.tables import documented_field as _f


@dataclass
class RewardScalingConfig:
    """Rewards scaled by a running estimate of the discounted return's spread, for the loss alone."""

    normalize: bool = _f(
        False,
        "train on rewards divided by the running std of each env's discounted return (gymnasium's "
        "NormalizeReward as CleanRL uses it, SB3's VecNormalize norm_reward), computed by the learner; the slots, "
        "episode returns and metrics keep the raw rewards; the statistics and accumulators are checkpointed",
    )
    clip: float = _f(
        10.0,
        "with normalize: the scaled rewards are clipped to +-this (inf: no clip)",
        min_exclusive=0.0,
        allow_inf=True,
    )


def check(config: Any) -> str | None:
    """Scaling rewards needs an algorithm that learns from them."""
    from fastrl.algos.registry import known

    algorithm = known(config.algo.name)
    if config.reward_scaling.normalize and algorithm is not None and not algorithm.learns:
        return (
            f"reward_scaling.normalize = true needs a learning algorithm: algo.name = {config.algo.name!r} trains on "
            "no reward"
        )
    return None
