"""Making a PettingZoo env from ``env.id``: one of PettingZoo's own (``"pettingzoo.classic:connect_four_v3"``) or a
``package.module:factory``'s. What the ``pettingzoo`` backend (``fastrl.envs.pettingzoo``) steps as is and
``fastrl.envs.atari_duel`` drives through fastrl's Atari protocol."""

from __future__ import annotations

import importlib
from typing import Any

from fastrl.envs.actions import UnsupportedEnvError
from fastrl.errors import install_hint

PREFIX = "pettingzoo."  # the module path of PettingZoo's own envs


def make_pettingzoo(env_id: str, kwargs: dict) -> Any:
    """The PettingZoo env ``env_id`` names: one of PettingZoo's own, from its registry (PettingZoo >= 1.27, whose
    module path now warns) or its module, as a ``parallel_env`` where it has one, else its AEC ``env``; or a
    ``package.module:factory``'s env."""
    module_name, _, attr = env_id.partition(":")
    registered = _from_registry(module_name, attr, kwargs)
    if registered is not None:
        return registered
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        hint = f" ({install_hint('multiagent')})" if module_name.startswith(PREFIX) else ""
        raise UnsupportedEnvError(f"env.id = {env_id!r}: cannot import {module_name!r}{hint}: {exc}") from None
    target = getattr(module, attr, None)
    if target is None:
        raise UnsupportedEnvError(f"env.id = {env_id!r}: module {module_name!r} has no {attr!r}")
    if callable(getattr(target, "parallel_env", None)):
        return target.parallel_env(**kwargs)
    if callable(getattr(target, "env", None)):
        return target.env(**kwargs)
    if callable(target):
        return target(**kwargs)
    raise UnsupportedEnvError(f"env.id = {env_id!r}: {attr!r} is neither a PettingZoo env module nor a factory")


def _from_registry(module_name: str, name: str, kwargs: dict) -> Any:
    """``pettingzoo.classic:connect_four_v3`` -> ``pettingzoo.make(kind, "classic/connect_four_v3")``, its parallel
    kind where registered; None where the id is not PettingZoo's or this PettingZoo has no registry."""
    if not module_name.startswith(PREFIX):
        return None
    try:
        import pettingzoo
    except ImportError as exc:
        raise UnsupportedEnvError(
            f"env.id = {module_name}:{name!r} needs PettingZoo ({install_hint('multiagent')}): {exc}"
        ) from None
    base, _, version = name.rpartition("_v")  # the module connect_four_v3 is registered as connect_four-v3
    key = f"{module_name[len(PREFIX) :]}/{base}-v{version}" if base and version.isdigit() else ""
    for kind in ("parallel", "aec"):
        if key in getattr(pettingzoo, f"{kind}_registry", {}):
            return pettingzoo.make(kind, key, **kwargs)
    return None
