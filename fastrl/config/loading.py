"""Building a Config: TOML files and ``--set key=value`` overrides into the schema's dataclasses,
each value checked against its field's type and rules (``fastrl.tables``) so the error names the key,
the bad value and what is allowed, before any worker starts."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI (a dependency there)
    import tomli as tomllib

from fastrl.config.moved_keys import place_moved_keys, take_moved_keys
from fastrl.config.validation import validate
from fastrl.errors import ConfigError
from fastrl.schema import Config
from fastrl.tables import build_section

# The configs that ship in the package; a checkout's top-level configs/ is a link to this folder.
SHIPPED_CONFIGS = Path(__file__).resolve().parent.parent / "configs"
# The job `fastrl train` runs with no CONFIG, and fastrl.train() with none: the shipped pong_sync.toml.
# A config (a file, a dict, a Config) starts from the schema's defaults, which an empty file gets.
DEFAULT_JOB = SHIPPED_CONFIGS / "pong_sync.toml"


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
    data, moved = take_moved_keys(data)  # [algo]'s old keys of PPO's and IMPALA's options, read where they moved
    config = build_section(Config, data, "")
    place_moved_keys(config, moved)  # once algo.name is resolved: the options it takes
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
