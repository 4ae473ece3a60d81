"""The layers that ship with fastrl: each registers its parts (learner extensions, row roles) here or from its
own package, and the core finds them through its registries without naming them. Removing a layer is removing
its module and its lines here. The registrations name their factories by path, so loading them imports no torch.

The order of the learner extensions' hooks (``fastrl.learning.extensions``): the self-play pool reads a storage's
raw rewards (10), reward scaling scales them (20), named policies take their own rows (30), GALA's gossip mixes
θ once it is updated (40).
"""

from __future__ import annotations

import importlib

from fastrl.learning.extensions import register_learner_extension

BUILT_IN_PACKAGES = ("fastrl.multiagent",)  # layers that register from their own package

_loaded = False


def load_layers() -> None:
    """Register every built-in layer, once (cheap: registrations only)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    register_learner_extension("reward_scaling", "fastrl.learning.reward_normalization:reward_scaling", order=20)
    register_learner_extension("gossip", "fastrl.learning.gossip:gossip", order=40)
    for package in BUILT_IN_PACKAGES:
        importlib.import_module(package)
