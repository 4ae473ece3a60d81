"""Building a Config: TOML files and ``--set key=value`` overrides into the schema's dataclasses,
each value checked against its field's type and rules (``fastrl.tables``) so the error names the key,
the bad value and what is allowed, before any worker starts."""

from __future__ import annotations

import dataclasses
import difflib
import logging
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI (a dependency there)
    import tomli as tomllib

from fastrl.algos import registry
from fastrl.config.moved_keys import moved_keys
from fastrl.config.validation import validate
from fastrl.errors import ConfigError
from fastrl.layer import layer_sections
from fastrl.schema import Config
from fastrl.tables import build_section

# The configs that ship in the package; a checkout's top-level configs/ is a link to this folder.
SHIPPED_CONFIGS = Path(__file__).resolve().parent.parent / "configs"
# The job `fastrl train` runs with no CONFIG, and fastrl.train() with none: the shipped pong_sync.toml.
# A config (a file, a dict, a Config) starts from the schema's defaults, which an empty file gets.
DEFAULT_JOB = SHIPPED_CONFIGS / "pong_sync.toml"
log = logging.getLogger(__name__)


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
    data = moved_keys(data)  # each source's old keys under their new names before the next source merges
    for text in overrides:  # so an old key's --set overrides what the file wrote under its new name
        data = _merge(data, moved_keys(parse_override(text)))
    return data


def config_from_dict(data: dict) -> Config:
    """A checked ``Config`` from a config's tables: the core's sections, and each layer's own
    (``fastrl.layers.Layer.config``), read and checked the same way."""
    if not isinstance(data, dict):
        raise ConfigError(f"the config: expected a table, got {data!r}")
    data = moved_keys(data)  # old keys (PPO's and IMPALA's options, the layers' own), read where they moved
    declared = layer_sections()
    known = _section_names(declared)
    for key in data:
        if key not in known:  # "sections", the field that holds the layers' sections, is no table of a file
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f"; known sections: {', '.join(known)}"
            raise ConfigError(f"unknown config key '{key}'{hint}")
    core = {key: value for key, value in data.items() if key not in declared}
    sections = {name: build_section(cls, data[name], f"{name}.") for name, cls in declared.items() if name in data}
    config = build_section(Config, core, "")
    _leave_out_others_options(config)
    config.sections.update(sections)  # checked above as the core's tables are; the defaults where not given
    validate(config)
    return config


def _leave_out_others_options(config: Config) -> None:
    """``[algo.options]`` keys that only other built-in algorithms take are left out, with a warning: a config of
    PPO run with ``--set algo.name='a2c'`` (or a mode whose algorithm differs) keeps working, as it did when those
    keys were ``[algo]``'s; a key no algorithm takes is still refused by the options' check."""
    algorithm = registry.known(config.algo.name)
    others = registry.others_options(algorithm, config.algo.options) if algorithm is not None else {}
    # algo.name = 'none' samples without learning (the sampling benches run any config so): nothing to warn of
    level = logging.DEBUG if config.algo.name == "none" else logging.WARNING
    for key, owners in others.items():
        log.log(
            level,
            "algo.options.%s is an option of %s; algo.name = %r leaves it out",
            key,
            " and ".join(owners),
            config.algo.name,
        )
    if others:
        config.algo.options = {key: value for key, value in config.algo.options.items() if key not in others}


def _section_names(declared: dict) -> list[str]:
    return [f.name for f in dataclasses.fields(Config) if f.name != "sections"] + list(declared)


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
        except UnicodeDecodeError as exc:  # TOML is UTF-8 text: a file of other bytes is bad input, not a crash
            raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}), so not a TOML file") from None
        except OSError as exc:
            raise ConfigError(f"{path}: cannot be read: {exc.strerror}") from None
    return config_from_dict(apply_overrides(data, overrides))
