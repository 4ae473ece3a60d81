"""Strategies built from the schema (the config dataclasses, their field types and rules) and from gymnasium's
spaces, never from lists of examples.

``LEAVES``: every leaf key of a config (the core's sections, the layers' sections, each built-in algorithm's
``[algo.options]``) with its type and rules. ``valid(leaf)`` draws a value the key's rules allow (``small=True``:
near its minimum, for configs that must run); ``bad(leaf)`` one they refuse (wrong type, out of range, not a
choice, not finite, not a multiple); ``extreme()`` values at the edges of every type (0, -1, 2**63, inf, nan,
empty, very long, non-ASCII, a lone surrogate). ``toml(value)`` writes a value as TOML text, as a file or a
``--set`` line holds it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from hypothesis import strategies as st

from fastrl.config import Config
from fastrl.config.reference import algorithm_options
from fastrl.layer import layer_sections
from fastrl.tables import AUTO, INT64_MAX, choices_of


@dataclass(frozen=True)
class Leaf:
    key: str  # dotted: "engine.envs", "algo.options.clip"
    tp: Any  # its annotation: int, float, str, bool, list[int], dict, int | str
    meta: dict
    default: Any
    owner: str | None = None  # algo.options.*: the algorithm whose option it is

    @property
    def concrete(self) -> Any:
        """The type a value must have ("auto" aside)."""
        if typing.get_origin(self.tp) in (typing.Union, types.UnionType):
            return next(t for t in typing.get_args(self.tp) if t is not str)
        return self.tp


def _leaves(cls: type, prefix: str, owner: str | None = None) -> list[Leaf]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if f.metadata.get("layers"):
            continue
        tp = hints[f.name]
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            out += _leaves(tp, f"{prefix}{f.name}.", owner)
        else:
            out.append(Leaf(f"{prefix}{f.name}", tp, dict(f.metadata), default, owner))
    return out


def schema_leaves() -> list[Leaf]:
    leaves = _leaves(Config, "")
    for name, cls in layer_sections().items():
        leaves += _leaves(cls, f"{name}.")
    for name, options in algorithm_options():
        leaves += _leaves(options, "algo.options.", owner=name)
    return leaves


LEAVES = schema_leaves()
KEYS = [leaf.key for leaf in LEAVES]
SECTIONS = sorted({key.split(".")[0] for key in KEYS})

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
EXTREME_TEXT = st.one_of(
    st.just(""),
    st.just("\ud800"),  # a lone surrogate: no UTF-8, no TOML
    st.integers(256, 5000).map(lambda n: "ü" * n),  # very long, non-ASCII
    st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=["Cs"]), max_size=6),
    st.sampled_from(["\x00", "a\nb", " ", "'", '"', "\\", "../..", "/", "~"]),
)
EXTREME_INT = st.sampled_from([0, -1, 1, 2**31, 2**63 - 1, 2**63, -(2**63), 2**64, -(2**64), 10**30])
EXTREME_FLOAT = st.one_of(
    st.sampled_from([0.0, -0.0, -1.0, math.inf, -math.inf, math.nan, 1e308, -1e308, 5e-324, 2.0**63]),
    st.floats(allow_nan=True, allow_infinity=True),
)


def extreme() -> st.SearchStrategy:
    """A value at the edge of some type: what any key might be given."""
    return st.one_of(
        EXTREME_INT, EXTREME_FLOAT, EXTREME_TEXT, st.booleans(), st.none(),
        st.lists(EXTREME_INT, max_size=3), st.dictionaries(TEXT, EXTREME_INT, max_size=2), st.just([]), st.just({}),
    )


def _int_bounds(leaf: Leaf) -> tuple[int, int]:
    meta = leaf.meta
    low = meta.get("min", -INT64_MAX)
    if "min_exclusive" in meta:
        low = max(low, math.floor(meta["min_exclusive"]) + 1)
    return int(math.ceil(low)), int(meta.get("max", INT64_MAX))


def _float_bounds(leaf: Leaf) -> tuple[float, float, bool]:
    meta = leaf.meta
    low = float(meta.get("min", meta.get("min_exclusive", -1e300)))
    return low, float(meta.get("max", 1e300)), "min_exclusive" in meta


def valid(leaf: Leaf, small: bool = False) -> st.SearchStrategy:
    """A value ``leaf``'s type and rules allow; ``small``: at most a little above its minimum."""
    meta, tp = leaf.meta, leaf.concrete
    if "choices" in meta:
        out: st.SearchStrategy = st.sampled_from(list(choices_of(meta)))
    elif tp is bool:
        out = st.booleans()
    elif tp is int:
        low, high = _int_bounds(leaf)
        if small:
            low, high = max(low, 0), min(high, max(low, 0) + 8)
        step = meta.get("multiple_of", 1)
        out = st.integers(-(-low // step), high // step).map(lambda k: k * step)
    elif tp is float:
        low, high, exclusive = _float_bounds(leaf)
        if small:
            low, high = max(low, 0.0), min(high, max(low, 0.0) + 1.0)
        out = st.floats(low, high, exclude_min=exclusive, allow_nan=False)
        if meta.get("allow_inf") and not small:
            out = st.one_of(out, st.just(math.inf))
    elif tp is str:
        out = TEXT
    elif typing.get_origin(tp) is list:
        low, high = meta.get("item_range", (-INT64_MAX, INT64_MAX))
        out = st.lists(st.integers(low, min(high, low + 64) if small else high), max_size=3)
    elif tp is dict or typing.get_origin(tp) is dict:
        out = st.dictionaries(st.from_regex(r"[a-z_]{1,8}", fullmatch=True), st.integers(-5, 5), max_size=2)
    else:
        raise AssertionError(f"{leaf.key}: no strategy for {tp}")
    return st.one_of(out, st.just(AUTO)) if meta.get("auto") else out


def bad(leaf: Leaf) -> st.SearchStrategy:
    """A value ``leaf``'s type or rules refuse, whatever the other keys say."""
    meta, tp = leaf.meta, leaf.concrete
    wrong_type = {
        bool: st.one_of(st.integers(), st.floats(), TEXT.filter(lambda s: s != AUTO), st.lists(st.booleans())),
        int: st.one_of(st.floats(), st.booleans(), TEXT.filter(lambda s: s != AUTO), st.lists(st.integers())),
        float: st.one_of(st.booleans(), TEXT, st.lists(st.floats()), st.dictionaries(TEXT, st.integers())),
        str: st.one_of(st.integers(), st.floats(), st.booleans(), st.lists(TEXT), st.just("\ud800")),
    }
    options = []
    if tp in wrong_type:
        options.append(wrong_type[tp])
    elif typing.get_origin(tp) is list:
        options.append(st.one_of(st.integers(), TEXT, st.lists(TEXT, min_size=1), st.lists(st.floats(), min_size=1)))
    else:  # a free table
        options.append(st.one_of(st.integers(), TEXT, st.lists(st.integers()), st.just({"k": None})))
    if "choices" in meta:
        allowed = choices_of(meta)  # engine.mode's are what is registered: a function of the registry
        options.append(TEXT.filter(lambda s: s not in allowed and s != AUTO))
    if tp is int:
        low, high = _int_bounds(leaf)
        outside = [low - 1, high + 1, -(2**63), 2**63, 2**64]
        options.append(st.sampled_from([v for v in outside if v < low or v > high]))
        if "multiple_of" in meta:
            step = meta["multiple_of"]
            options.append(st.integers(low, high).filter(lambda v: v % step))
    if tp is float:
        low, high, exclusive = _float_bounds(leaf)
        outside = [math.nan] + ([] if meta.get("allow_inf") else [math.inf, -math.inf])
        if "min" in meta or "min_exclusive" in meta:
            outside += [low - 1.0, -math.inf] + ([low] if exclusive else [])
        if "max" in meta:
            outside += [high + 1.0, math.inf]
        options.append(st.sampled_from(outside))
    if "item_range" in meta:
        low, high = meta["item_range"]
        options.append(st.lists(st.sampled_from([low - 1, high + 1, -(2**63)]), min_size=1, max_size=3))
    return st.one_of(options)


def typo(text: str) -> st.SearchStrategy:
    """``text`` with one character changed, dropped or doubled: a misspelt key."""
    def change(data):
        i, how, char = data
        i %= max(len(text), 1)
        if how == 0:
            return text[:i] + char + text[i + 1 :]
        if how == 1:
            return text[:i] + text[i + 1 :]
        return text[:i] + text[i] * 2 + text[i + 1 :] if text else char

    return st.tuples(st.integers(0, 200), st.integers(0, 2), st.sampled_from("aeiouxz_-.")).map(change).filter(
        lambda t: t != text
    )


def toml(value: Any) -> str:
    """``value`` as a TOML value's text (floats' nan and inf as TOML writes them)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_string(str(k))} = {toml(v)}" for k, v in value.items()) + "}"
    if value is None:
        return "''"  # TOML has no null: nothing, as a file would write it
    raise AssertionError(value)


def _toml_string(text: str) -> str:
    """A TOML basic string: printable ASCII as it is, every other character escaped (a lone surrogate, which TOML
    cannot hold, left raw: the document is then not TOML)."""
    out = []
    for char in text:
        code = ord(char)
        if 0x20 <= code < 0x7F and char not in '"\\':
            out.append(char)
        elif 0xD800 <= code <= 0xDFFF:
            out.append(char)
        else:
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def nested(key: str, value: Any) -> dict:
    parts = key.split(".")
    out: dict = {parts[-1]: value}
    for part in reversed(parts[:-1]):
        out = {part: out}
    return out


def merge(into: dict, extra: dict) -> dict:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value
    return into


@st.composite
def leaf_and_bad_value(draw, leaves=LEAVES):
    leaf = draw(st.sampled_from(leaves))
    return leaf, draw(bad(leaf))


@st.composite
def config_tables(draw, max_keys: int = 6) -> dict:
    """A config as tables: schema keys with valid, bad or extreme values, misspelt keys, unknown sections."""
    data: dict = {}
    for _ in range(draw(st.integers(0, max_keys))):
        leaf = draw(st.sampled_from(LEAVES))
        key = leaf.key
        how = draw(st.integers(0, 9))
        value = draw(bad(leaf) if how < 3 else extreme() if how < 5 else valid(leaf))
        if how == 9:
            key = draw(typo(key))
        elif how == 8:
            key = draw(typo(draw(st.sampled_from(SECTIONS)))) + "." + key.split(".", 1)[-1]
        if all(key.split(".")):
            merge(data, nested(key, value))
    return data


def document(data: dict) -> str:
    """Tables as a TOML file writes them: a [section] per table, its scalars first."""
    lines = [f"{json.dumps(k)} = {toml(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for name, table in data.items():
        if isinstance(table, dict):
            lines.append(f"[{json.dumps(name)}]")
            lines += [f"{json.dumps(k)} = {toml(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


@st.composite
def toml_documents(draw) -> str:
    """A whole config file: generated tables, sometimes broken as files are (a section repeated, a line cut,
    stray bytes)."""
    text = document(draw(config_tables()))
    how = draw(st.integers(0, 5))
    if how == 0 and "[" in text:
        header = text[text.index("[") :].split("\n", 1)[0]
        text += header + "\n"  # the section again
    elif how == 1 and text:
        text = text[: draw(st.integers(0, len(text)))]
    elif how == 2:
        text += draw(st.text(max_size=20))
    return text


@st.composite
def set_lines(draw) -> list[str]:
    """``--set`` lines: schema keys (or misspelt ones, sections, empty parts) and values as TOML text or not."""
    out = []
    for _ in range(draw(st.integers(1, 4))):
        leaf = draw(st.sampled_from(LEAVES))
        key = draw(st.one_of(st.just(leaf.key), typo(leaf.key), st.sampled_from(SECTIONS), st.just(leaf.key + ".")))
        value = draw(st.one_of(bad(leaf), extreme(), valid(leaf)))
        raw = draw(st.one_of(st.just(toml(value)), st.just(str(value)), TEXT))
        out.append(draw(st.sampled_from([f"{key}={raw}", f"{key} = {raw}", f"{key}", f"={raw}"])))
    return out


# --------------------------------------------------------------------------- spaces

DTYPES = [np.uint8, np.int64, np.float32, np.float64]


@st.composite
def box_spaces(draw, dtypes=DTYPES) -> gym.spaces.Box:
    dtype = np.dtype(draw(st.sampled_from(dtypes)))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    if dtype.kind == "f":
        low = draw(st.one_of(st.just(-np.inf), st.floats(-10, 0)))
        high = draw(st.one_of(st.just(np.inf), st.floats(0.5, 10)))
    else:
        info = np.iinfo(dtype)
        low = draw(st.integers(max(info.min, -10), 0))
        high = draw(st.integers(1, min(info.max, 255)))
    return gym.spaces.Box(low, high, shape, dtype)


def observation_spaces() -> st.SearchStrategy:
    """Spaces an env may declare for its observations: Box of each dtype, Discrete, MultiDiscrete, MultiBinary,
    and a Dict of them."""
    flat = st.one_of(
        box_spaces(),
        st.builds(gym.spaces.Discrete, st.integers(1, 6), start=st.integers(-3, 3)),
        st.lists(st.integers(1, 5), min_size=1, max_size=3).map(lambda nvec: gym.spaces.MultiDiscrete(nvec)),
        st.integers(1, 6).map(gym.spaces.MultiBinary),
    )
    return st.one_of(flat, st.dictionaries(st.from_regex(r"[a-z]{1,5}", fullmatch=True), flat, min_size=1,
                                           max_size=3).map(gym.spaces.Dict))


def action_spaces() -> st.SearchStrategy:
    return st.one_of(
        st.builds(gym.spaces.Discrete, st.integers(1, 6), start=st.integers(-3, 3)),
        st.lists(st.integers(1, 4), min_size=1, max_size=2).map(lambda nvec: gym.spaces.MultiDiscrete(nvec)),
        box_spaces(dtypes=[np.float32]).filter(lambda s: np.isfinite(s.low).all() and np.isfinite(s.high).all()),
    )


def space_spec(space: gym.Space) -> dict:
    """A space as a TOML table (env.kwargs), rebuilt by ``tests.fuzz.envs.space_of``."""
    if isinstance(space, gym.spaces.Box):
        return {"kind": "box", "low": np.asarray(space.low).ravel().tolist(), "high": np.asarray(space.high).ravel()
                .tolist(), "shape": list(space.shape), "dtype": space.dtype.name}
    if isinstance(space, gym.spaces.Discrete):
        return {"kind": "discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.MultiDiscrete):
        return {"kind": "multidiscrete", "nvec": space.nvec.tolist()}
    if isinstance(space, gym.spaces.MultiBinary):
        return {"kind": "multibinary", "n": int(space.n)}
    if isinstance(space, gym.spaces.Dict):
        return {"kind": "dict", "parts": {k: space_spec(v) for k, v in space.spaces.items()}}
    raise AssertionError(space)
