"""The run directory: resolved config, metrics.jsonl, checkpoints/, summary.json."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from fastrl.config import Config

RANKS_FILE = "ranks.json"


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        if math.isnan(value):
            return "nan"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_string(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {value!r} as TOML")


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _toml_string(text: str) -> str:
    """A TOML basic string: control characters escaped, everything else (any Unicode) as is."""
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def to_toml(data: dict, prefix: str = "") -> str:
    """A small TOML writer for config dicts (tables of scalars, lists and inline tables)."""
    scalars = [(k, v) for k, v in data.items() if not (isinstance(v, dict) and _is_table(k, v))]
    tables = [(k, v) for k, v in data.items() if isinstance(v, dict) and _is_table(k, v)]
    lines = [f"{k} = {_toml_value(v)}" for k, v in scalars]
    for key, table in tables:
        name = f"{prefix}{key}"
        lines += ["", f"[{name}]", to_toml(table, f"{name}.")]
    return "\n".join(lines).strip("\n") + "\n"


def _is_table(key: str, value: dict) -> bool:
    return key not in ("kwargs",)  # free-form dicts stay inline


def default_run_dir(config: Config) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    env = config.env.id.replace("/", "-").replace(":", "-")
    return Path(config.run.dir) / f"{stamp}_{env}_{config.engine.mode}"


class RunDir:
    def __init__(self, path: str | Path):
        self.path = Path(path)

    @classmethod
    def create(cls, config: Config, path: str | Path | None = None, ranks: int = 1) -> RunDir:
        """``ranks``: how many torchrun ranks make the run (a resumed run needs as many), in ``ranks.json``."""
        run = cls(path or default_run_dir(config))
        (run.path / "checkpoints").mkdir(parents=True, exist_ok=True)
        (run.path / "config.toml").write_text(to_toml(config.to_dict()), encoding="utf-8")
        if ranks > 1:
            (run.path / RANKS_FILE).write_text(json.dumps({"ranks": ranks}) + "\n")
        else:
            (run.path / RANKS_FILE).unlink(missing_ok=True)
        return run

    def ranks(self) -> int:
        """The torchrun ranks that made this run (1: one engine)."""
        path = self.path / RANKS_FILE
        return int(json.loads(path.read_text())["ranks"]) if path.is_file() else 1

    @property
    def metrics(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    def write_summary(self, summary: dict) -> None:
        (self.path / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
