"""Reward scaling (``reward_scaling.normalize``): each storage's rewards divided by a running estimate of the
discounted return's spread, before the loss reads them. One layer, registered here; its parts are named by path,
so importing this package imports none of them."""

from __future__ import annotations

from fastrl.layer import Layer, register_layer

LAYER = register_layer(
    Layer(
        "reward_scaling",
        "rewards scaled by a running estimate of the discounted return's spread",
        order=20,  # after the pool reads the raw rewards
        learner_extension="fastrl.layers.reward_scaling.scaler:reward_scaling",
        warm_up="fastrl.layers.reward_scaling.scaler:warm_up",
        config="fastrl.layers.reward_scaling.config:RewardScalingConfig",
        check="fastrl.layers.reward_scaling.config:check",
        moved_keys=(("algo.normalize_rewards", "normalize"), ("algo.reward_clip", "clip")),
    )
)
