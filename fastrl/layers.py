"""The layers that ship with fastrl, each a package that registers its parts (row roles, learner extensions) when
imported: the core looks them up through its registries and never names them. Removing a layer is removing its
package and its line here."""

from __future__ import annotations

import importlib

BUILT_IN_LAYERS = ("fastrl.multiagent",)

_loaded = False


def load_layers() -> None:
    """Import every built-in layer once, so that its registrations are in place (cheap: registrations only)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in BUILT_IN_LAYERS:
        importlib.import_module(module)
