"""``--param KEY=KIND:...``: one searched config key and the range ``fastrl tune`` draws it from.

Grammar (``PARAM_GRAMMAR``): ``loguniform:LOW:HIGH`` and ``uniform:LOW:HIGH`` (floats), ``int:LOW:HIGH``
and ``intlog:LOW:HIGH`` (integers, both ends included), ``choice:A,B,...`` (TOML values: numbers, booleans,
quoted strings). The key must be a config key (``fastrl config``): a section's (``algo.lr``), or a nested
table's such as an algorithm's own options (``algo.options.clip``); every value drawn is checked by the config's
own rules before a trial starts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from fastrl.config import ConfigError, tomllib  # tomli on Python 3.10, which has no tomllib

PARAM_GRAMMAR = (
    "KEY=loguniform:LOW:HIGH | uniform:LOW:HIGH | int:LOW:HIGH | intlog:LOW:HIGH | choice:A,B,... "
    "(e.g. algo.lr=loguniform:1e-4:1e-3, algo.epochs=int:2:4, algo.options.clip=uniform:0.08:0.25, "
    "algo.lr_schedule=choice:'linear','constant')"
)
RANGES = ("loguniform", "uniform", "int", "intlog")


@dataclass(frozen=True)
class ParamSpec:
    key: str  # "section.name", or a nested table's: "algo.options.clip"
    kind: str  # one of RANGES, or "choice"
    low: float = 0.0
    high: float = 0.0
    choices: tuple = ()

    def suggest(self, trial) -> Any:
        """Draw this key's value for an Optuna trial."""
        if self.kind == "choice":
            return trial.suggest_categorical(self.key, list(self.choices))
        if self.kind in ("int", "intlog"):
            return trial.suggest_int(self.key, int(self.low), int(self.high), log=self.kind == "intlog")
        return trial.suggest_float(self.key, self.low, self.high, log=self.kind == "loguniform")

    def override(self, value: Any) -> str:
        """The ``--set`` text that gives this key ``value``."""
        return f"{self.key}={_toml(value)}"


def parse_param(text: str) -> ParamSpec:
    """``KEY=KIND:...`` -> ParamSpec; ConfigError naming the key and the grammar for anything else."""
    key, sep, spec = text.partition("=")
    key = key.strip()
    kind, _, rest = spec.partition(":")
    parts = key.split(".")
    if not sep or len(parts) < 2 or not all(parts) or not kind:
        raise ConfigError(f"--param {text!r}: expected {PARAM_GRAMMAR}")
    if kind == "choice":
        return ParamSpec(key, kind, choices=_choices(text, key, rest))
    if kind not in RANGES:
        raise ConfigError(f"--param {text!r}: {key}'s kind {kind!r} is not one of {', '.join((*RANGES, 'choice'))}")
    bounds = rest.split(":")
    try:
        low, high = (float(b) for b in bounds) if len(bounds) == 2 else (math.nan, math.nan)
    except ValueError:
        low = high = math.nan
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ConfigError(f"--param {text!r}: {key} needs {kind}:LOW:HIGH with numbers LOW < HIGH")
    if kind in ("int", "intlog") and not (low.is_integer() and high.is_integer()):
        raise ConfigError(f"--param {text!r}: {key}'s {kind} bounds must be whole numbers")
    if kind in ("loguniform", "intlog") and low <= 0:
        raise ConfigError(f"--param {text!r}: {key}'s {kind} range must be above 0")
    return ParamSpec(key, kind, low, high)


def _choices(text: str, key: str, rest: str) -> tuple:
    try:
        values = tomllib.loads(f"v = [{rest}]")["v"] if rest.strip() else []
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"--param {text!r}: {key}'s choices must be TOML values (quote strings): {exc}") from None
    if len(values) < 2:
        raise ConfigError(f"--param {text!r}: {key} needs at least two choices, choice:A,B")
    return tuple(values)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    return repr(value)  # int, float: Python's repr is valid TOML for finite numbers
