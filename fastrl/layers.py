"""The layers that ship with fastrl: each module below registers its parts (learner extensions, row roles, plan
hooks, metrics sections) when imported, and the core finds them through its registries without naming them.
Removing a layer is removing its module and its line here.

The order of the learner extensions' hooks (``fastrl.learning.extensions``) is their registrations' ``order``:
the self-play pool reads a storage's raw rewards (10), reward scaling scales them (20), named policies take
their own rows (30), GALA's gossip mixes θ once it is updated (40).
"""

from __future__ import annotations

import importlib

BUILT_IN_LAYERS = (
    "fastrl.learning.reward_normalization",  # algo.normalize_rewards
    "fastrl.learning.gossip",  # gala's mixing between learners
    "fastrl.multiagent",  # agent rows, the self-play pool, named policies
)

_loaded = False


def load_layers() -> None:
    """Import every built-in layer once, so that its registrations are in place."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in BUILT_IN_LAYERS:
        importlib.import_module(module)
