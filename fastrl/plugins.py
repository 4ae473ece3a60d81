"""Code named by path: ``"package.module:attr"``, as configs and registrations name what a run imports when it
starts (an algorithm's rule, a layer's factory, an env or model factory), never when a config is merely read."""

from __future__ import annotations

import importlib
from typing import Any

from fastrl.errors import ConfigError


def imported(path: str, what: str) -> Any:
    """The object ``path`` names; bad paths and modules that fail to import are ``ConfigError`` naming ``what``."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"{what}: expected 'package.module:Name', got {path!r}")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the user's module failed to import: bad input, named
        raise ConfigError(f"{what}: cannot import {module_name!r}: {type(exc).__name__}: {exc}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"{what}: module {module_name!r} has no {attr!r}") from None


def resolved(thing: Any, what: str) -> Any:
    """``thing`` itself, or the object it names where it is a ``"package.module:attr"`` path."""
    return imported(thing, what) if isinstance(thing, str) else thing
