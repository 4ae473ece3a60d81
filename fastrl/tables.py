"""Typed tables: a dict (a TOML table) read into a dataclass, every value checked against its field's type and
the rules in its metadata, so an error names the key, the bad value and what is allowed.

What the run configuration's sections (``fastrl.schema``) and a plug-in's own table, such as an algorithm's
``[algo.options]`` (``fastrl.algos.registry``), are read with. A field says what it takes in its metadata:
``doc`` (its documentation), ``choices``, ``min``, ``max``, ``min_exclusive``, ``multiple_of``, ``item_range``
(each item of a list), ``allow_inf`` (a float may be infinite) and ``auto`` (the string ``AUTO`` is taken as it
is, else a value of the field's other type); ``documented_field`` makes such a field.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from collections.abc import Callable
from dataclasses import field
from typing import Any

from fastrl.errors import ConfigError

AUTO = "auto"  # the value of a field with ``auto=True`` that is chosen later (engine.executors: for the machine)
INT64_MAX = 2**63 - 1


def documented_field(default: Any, doc: str | Callable[[], str], **rules: Any) -> Any:
    """A dataclass field with its documentation and validation rules in metadata."""
    if isinstance(default, (list, dict)) or dataclasses.is_dataclass(default):
        factory = (lambda d=default: type(d)(d)) if not dataclasses.is_dataclass(default) else type(default)
        return field(default_factory=factory, metadata={"doc": doc, **rules})
    return field(default=default, metadata={"doc": doc, **rules})


def choices_of(meta: Any) -> tuple | None:
    """A field's allowed values: its ``choices``, called where they are a function (values registered at run time,
    such as ``engine.mode``'s); None where any value of its type goes."""
    allowed = meta.get("choices")
    return tuple(allowed()) if callable(allowed) else allowed


def doc_of(meta: Any) -> str:
    """A field's documentation: its ``doc``, called where it is a function (one made from what is registered)."""
    doc = meta.get("doc", "")
    return doc() if callable(doc) else doc


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Check ``value`` against the annotation ``tp``; ints are accepted for floats."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        for option in typing.get_args(tp):
            try:
                return _coerce(value, option, key)
            except ConfigError:
                pass
        raise ConfigError(f"{key} = {value!r}: expected {tp}")
    if tp is type(None):
        if value is None:
            return None
        raise ConfigError(f"{key} = {value!r}: expected nothing")
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{key} = {value!r}: expected a list")
        (item_tp,) = typing.get_args(tp)
        return [_coerce(v, item_tp, f"{key}[{i}]") for i, v in enumerate(value)]
    if tp is dict or origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key} = {value!r}: expected a table")
        return dict(value)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        if abs(value) > INT64_MAX:
            raise ConfigError(f"{key} = {value!r}: out of range")
        return float(value)
    if tp in (int, float, str, bool):
        if type(value) is not tp:
            raise ConfigError(f"{key} = {value!r}: expected {_type_name(tp)}, got {type(value).__name__}")
        if tp is int and not -INT64_MAX <= value <= INT64_MAX:
            raise ConfigError(f"{key} = {value}: out of range (a 64-bit integer)")
        if tp is str:
            _check_text(value, key)
        return value
    raise ConfigError(f"{key}: unsupported annotation {tp}")


def _check_text(value: str, key: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(f"{key} = {value!r}: not valid Unicode text") from None


def _check_toml_value(value: Any, key: str) -> None:
    """Free-form tables (``kwargs``) must hold what a TOML file can: the run dir's config.toml repeats the run."""
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise ConfigError(f"{key}: keys must be strings, got {k!r}")
            _check_text(k, key)
            _check_toml_value(v, f"{key}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_toml_value(v, f"{key}[{i}]")
    elif not isinstance(value, (bool, int, float, str)):
        raise ConfigError(f"{key} = {value!r}: only strings, numbers, booleans, lists and tables are allowed")
    elif isinstance(value, int) and not -INT64_MAX <= value <= INT64_MAX:
        raise ConfigError(f"{key} = {value}: out of range (a 64-bit integer)")
    elif isinstance(value, str):
        _check_text(value, key)


def _check_rules(value: Any, meta: dict, key: str) -> None:
    if isinstance(value, float) and (math.isnan(value) or (math.isinf(value) and not meta.get("allow_inf"))):
        raise ConfigError(f"{key} = {value!r}: must be a finite number")
    if isinstance(value, dict):
        _check_toml_value(value, key)
    if isinstance(value, list) and "item_range" in meta:
        low, high = meta["item_range"]
        for i, item in enumerate(value):
            if not low <= item <= high:
                raise ConfigError(f"{key}[{i}] = {item!r}: must be between {low} and {high}")
    allowed = choices_of(meta)
    if allowed is not None and value not in allowed:
        raise ConfigError(f"{key} = {value!r}: allowed values are {', '.join(map(repr, allowed))}")
    if "multiple_of" in meta and value % meta["multiple_of"]:
        raise ConfigError(f"{key} = {value!r}: must be a multiple of {meta['multiple_of']}")
    if "min" in meta and value < meta["min"]:
        raise ConfigError(f"{key} = {value!r}: must be >= {meta['min']}")
    if "max" in meta and value > meta["max"]:
        raise ConfigError(f"{key} = {value!r}: must be <= {meta['max']}")
    if "min_exclusive" in meta and not value > meta["min_exclusive"]:
        raise ConfigError(f"{key} = {value!r}: must be > {meta['min_exclusive']}")


def _build(cls: type, data: dict, prefix: str) -> Any:
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key in data:
        if key not in fields:
            where = f"{prefix}{key}"
            close = difflib.get_close_matches(key, list(fields), n=1)
            hint = f"; did you mean '{prefix}{close[0]}'?" if close else f"; known keys: {', '.join(fields)}"
            raise ConfigError(f"unknown config key '{where}'{hint}")
    kwargs = {}
    for name, f in fields.items():
        if name not in data:
            continue
        key, tp, value = f"{prefix}{name}", hints[name], data[name]
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            if not isinstance(value, dict):
                raise ConfigError(f"{key}: expected a table, got {value!r}")
            kwargs[name] = _build(tp, value, f"{key}.")
        elif f.metadata.get("auto"):
            kwargs[name] = _coerce_auto(value, tp, dict(f.metadata), key)
        else:
            kwargs[name] = _coerce(value, tp, key)
            _check_rules(kwargs[name], dict(f.metadata), key)
    return cls(**kwargs)


def build_section(cls: type, table: Any, prefix: str) -> Any:
    """A dataclass of ``cls`` from a config table (keys, types and rules checked as every key of a config is):
    what a plug-in's own section, such as an algorithm's ``[algo.options]``, is read with. ``prefix`` names the
    table's keys in errors (``"algo.options."``)."""
    if not isinstance(table, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'the config'}: expected a table, got {table!r}")
    return _build(cls, table, prefix)


def _coerce_auto(value: Any, tp: Any, meta: dict, key: str) -> Any:
    """``"auto"`` as it is (resolved when a run starts), else a value of the key's concrete type and rules."""
    if value == AUTO:
        return AUTO
    concrete = next(t for t in typing.get_args(tp) if t is not str)
    allowed = "true, false or 'auto'" if concrete is bool else f"an int >= {meta.get('min', 1)} or 'auto'"
    try:
        value = _coerce(value, concrete, key)
    except ConfigError:
        raise ConfigError(f"{key} = {value!r}: allowed values are {allowed}") from None
    _check_rules(value, meta, key)
    return value
