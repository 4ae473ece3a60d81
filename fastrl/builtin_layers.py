"""The layers that ship with fastrl, imported plainly (``fastrl/__init__.py`` imports this module, so every
process of a run has them). Each is a ``Layer`` (``fastrl.layers``) naming its parts by path, so registering it
imports none of its implementation. Removing a layer is removing its module and its registration here.

The order of the learner extensions' hooks is their layers' ``order``: the self-play pool reads a storage's raw
rewards (10), reward scaling scales them (20), named policies take their own rows (30), GALA's gossip mixes θ
once it is updated (40).
"""

import fastrl.learning.gossip_layer  # noqa: F401  gala's mixing between learners: its own registration
import fastrl.multiagent  # noqa: F401  agent rows, the self-play pool, named policies: its own registrations
from fastrl.layers import Layer, register_layer

register_layer(
    Layer(
        "reward_scaling",
        "algo.normalize_rewards: rewards scaled by a running estimate of the discounted return's spread",
        order=20,  # after the pool reads the raw rewards
        learner_extension="fastrl.learning.reward_normalization:reward_scaling",
        warm_up="fastrl.learning.reward_normalization:warm_up",
    )
)
