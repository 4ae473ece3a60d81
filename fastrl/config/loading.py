"""Building a Config: TOML files and ``--set key=value`` overrides into the schema's dataclasses,
each value checked against its field's type and rules so the error names the key, the bad value
and what is allowed, before any worker starts."""

from __future__ import annotations

import dataclasses
import difflib
import math
import sys
import types
import typing
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI (a dependency there)
    import tomli as tomllib

from fastrl.config.schema import AUTO, Config
from fastrl.config.validation import validate
from fastrl.errors import ConfigError

INT64_MAX = 2**63 - 1
# The configs that ship in the package; a checkout's top-level configs/ is a link to this folder.
SHIPPED_CONFIGS = Path(__file__).resolve().parent.parent / "configs"
# The job `fastrl train` runs with no CONFIG, and fastrl.train() with none: the shipped pong_sync.toml.
# A config (a file, a dict, a Config) starts from the schema's defaults, which an empty file gets.
DEFAULT_JOB = SHIPPED_CONFIGS / "pong_sync.toml"


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
    allowed = meta.get("choices")
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
        raise ConfigError(f"{prefix.rstrip('.')}: expected a table, got {table!r}")
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


def _merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def parse_override(text: str) -> dict:
    """``a.b.c=value`` -> ``{"a": {"b": {"c": value}}}``; the value is read as TOML, else as a string."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected key=value, e.g. engine.envs=8")
    dotted, raw = text.split("=", 1)
    parts = [p.strip() for p in dotted.strip().split(".")]
    if not all(parts):
        raise ConfigError(f"--set {text!r}: empty key part")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    out: dict = {parts[-1]: value}
    for part in reversed(parts[:-1]):
        out = {part: out}
    return out


def apply_overrides(data: dict, overrides: list[str] | tuple[str, ...]) -> dict:
    for text in overrides:
        data = _merge(data, parse_override(text))
    return data


def config_from_dict(data: dict) -> Config:
    config = _build(Config, data, "")
    validate(config)
    return config


def shipped_configs() -> list[str]:
    """The names of the configs that ship in the package (``fastrl/configs``)."""
    return sorted(p.stem for p in SHIPPED_CONFIGS.glob("*.toml"))


def config_path(path: str | Path) -> Path:
    """A config file: ``path`` where it exists, else the shipped config it names (``pong_sync``,
    ``pong_sync.toml`` or ``configs/pong_sync.toml``), so the shipped configs work outside a checkout."""
    given = Path(path)
    if given.is_file():
        return given
    if given.parent in (Path("."), Path("configs")):
        shipped = SHIPPED_CONFIGS / (given.name if given.suffix == ".toml" else f"{given.name}.toml")
        if shipped.is_file():
            return shipped
    raise ConfigError(
        f"config file {str(path)!r} does not exist (and names no shipped config: {', '.join(shipped_configs())})"
    )


def load_config(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """Read a TOML file (or a shipped config by name; None: nothing, the schema's defaults) and apply
    ``key=value`` overrides, then validate."""
    data: dict = {}
    if path is not None:
        path = config_path(path)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    return config_from_dict(apply_overrides(data, overrides))
