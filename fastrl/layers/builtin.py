"""The layers that ship with fastrl, imported plainly (``fastrl/__init__.py`` imports this module, so every
process of a run has them). Each is a folder of ``fastrl.layers`` whose ``__init__`` registers its ``Layer``,
naming its parts by path, so registering it imports none of its implementation. Removing a layer is removing its
folder and its line here.

The order of the learner extensions' hooks is their layers' ``order``: the self-play pool reads a storage's raw
rewards (10), reward scaling scales them (20), named policies take their own rows (30), GALA's gossip mixes θ
once it is updated (40).
"""

import fastrl.layers.agent_rows  # noqa: F401  a multi-agent env's rows
import fastrl.layers.gossip  # noqa: F401  gala: the learners' mixing of θ, and its mode
import fastrl.layers.named_policies  # noqa: F401  a policy of its own per agent
import fastrl.layers.reward_scaling  # noqa: F401  rewards scaled by the return's spread
import fastrl.layers.selfplay  # noqa: F401  opponents from a pool of snapshots
