"""Every key's default and documentation, as ``fastrl config`` prints them and as
``docs/config-reference.md`` lists them (``fastrl config --markdown > docs/config-reference.md``;
``tests/config/test_config.py`` fails when the page and the schema differ)."""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from typing import Any

from fastrl.algos import registry
from fastrl.layer import layer_section_docs, layer_sections
from fastrl.schema import Config
from fastrl.tables import choices_of, doc_of

SUMMARY_CHARS = 80  # of a shipped config's header sentence in `fastrl configs`
REFERENCE_PAGE_HEADER = """\
# Configuration reference

Every key of a fastrl config: its default (what a config file that leaves it out gets) and its meaning.
Generated from the schema's own field documentation (`fastrl/schema/`) by
`fastrl config --markdown > docs/config-reference.md`; a test fails when this page is stale. How configs
are read and overridden, and the shipped configs: [configuration.md](configuration.md).
"""


def field_docs(cls: type = Config, prefix: str = "") -> list[tuple[str, Any, str]]:
    """(key, default, documentation) for every leaf key, for ``fastrl config`` and the reference page; the whole
    config's lists each built-in algorithm's own ``algo.options.KEY`` after ``algo.options``, its doc led by the
    algorithm's name."""
    rows = []
    for key, default, field in _leaves(cls, prefix):
        rows.append((key, default, doc_of(field.metadata)))
        if cls is Config and key == "algo.options":
            for name, options in algorithm_options():
                rows += [(k, d, f"{name}: {doc_of(f.metadata)}") for k, d, f in _leaves(options, f"{key}.")]
    return rows


def algorithm_options() -> list[tuple[str, type]]:
    """(name, options dataclass) of each built-in algorithm with options of its own (``[algo.options]``), in the
    registry's order; a plug-in's are its own docs'."""
    found = [(name, registry.known(name)) for name in registry.names() if registry.is_built_in(name)]
    classes = [(name, algorithm.options_class()) for name, algorithm in found if algorithm and algorithm.options]
    return [(name, options) for name, options in classes if options is not None]


def _tables(cls: type) -> list[tuple[str, type, dataclasses.Field | None]]:
    """The sub-tables of ``cls``: its dataclass fields, and at the top the layers' sections after the core's."""
    hints = typing.get_type_hints(cls)
    tables: list[tuple[str, type, dataclasses.Field | None]] = [
        (f.name, hints[f.name], f) for f in dataclasses.fields(cls) if not f.metadata.get("layers")
    ]
    if cls is Config:
        tables += [(name, section, None) for name, section in layer_sections().items()]
    return tables


def _leaves(cls: type, prefix: str) -> list[tuple[str, Any, dataclasses.Field]]:
    rows = []
    for name, tp, f in _tables(cls):
        if f is None or (isinstance(tp, type) and dataclasses.is_dataclass(tp)):  # a section: a layer's, or a table
            rows += _leaves(tp, f"{prefix}{name}.")
        else:
            default = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
            rows.append((f"{prefix}{f.name}", default, f))
    return rows


def reference_markdown() -> str:
    """The reference page: one table per section (key, default, allowed values, meaning)."""
    parts = [REFERENCE_PAGE_HEADER.rstrip("\n")]
    for section in _sections(Config, ""):
        name, cls, doc = section
        parts.append(f"\n## `{name}`\n\n{doc}\n")
        parts.append("| key | default | allowed | meaning |\n|---|---|---|---|")
        for key, default, f in _leaves(cls, f"{name}."):
            if key.count(".") == name.count(".") + 1:
                parts.append(_row(key, default, f))
        if name == "algo":  # each algorithm's own [algo.options], after the keys they share
            for algorithm, options in algorithm_options():
                own = (inspect.getdoc(options) or "").replace("``", "`")  # a docstring's literals, as markdown's
                parts.append(f"\n## `algo.options` of `{algorithm}`\n\n{_cell(own)} Set as `algo.options.KEY`.\n")
                parts.append("| key | default | allowed | meaning |\n|---|---|---|---|")
                parts += [_row(key, default, f) for key, default, f in _leaves(options, "algo.options.")]
    return "\n".join(parts) + "\n"


def _row(key: str, default: Any, f: dataclasses.Field) -> str:
    return f"| `{key}` | `{_toml(default)}` | {_allowed(f)} | {_cell(doc_of(f.metadata))} |"


def _sections(cls: type, prefix: str) -> list[tuple[str, type, str]]:
    """Each table of the config (nested ones too, e.g. ``env.atari``), depth first, with its description."""
    out = []
    docs = layer_section_docs() if cls is Config else {}
    for name, tp, f in _tables(cls):
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            doc = docs.get(name, "") if f is None else doc_of(f.metadata)
            own = inspect.getdoc(tp) if tp.__doc__ and not tp.__doc__.startswith(tp.__name__ + "(") else ""
            text = ". ".join(s for s in (doc[:1].upper() + doc[1:], own) if s).rstrip(".") + "."
            out.append((f"{prefix}{name}", tp, _cell(text)))
            out += _sections(tp, f"{prefix}{name}.")
    return out


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, dict):
        return "{}" if not value else "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return repr(value)


def _allowed(f: dataclasses.Field) -> str:
    meta = f.metadata
    rules = []
    allowed = choices_of(meta)
    if allowed is not None:
        rules.append(", ".join(f"`{_toml(c)}`" for c in allowed))
    for rule, sign in (("min", ">="), ("min_exclusive", ">"), ("max", "<=")):
        if rule in meta:
            rules.append(f"{sign} {meta[rule]}")
    if "multiple_of" in meta:
        rules.append(f"a multiple of {meta['multiple_of']}")
    if meta.get("auto"):
        rules.append('or `"auto"`')
    return _cell(", ".join(rules))


def _cell(text: str) -> str:
    """Markdown table cells cannot hold a bare pipe or a line break."""
    return " ".join(text.split()).replace("|", "\\|")


def shipped_config_lines() -> list[str]:
    """One line per shipped config, for ``fastrl configs``: its name, env, mode and algorithm, and the
    first sentence of its header comment."""
    from fastrl.config.loading import SHIPPED_CONFIGS, load_config, shipped_configs

    lines = []
    for name in shipped_configs():
        config = load_config(SHIPPED_CONFIGS / f"{name}.toml")
        header = " ".join(
            line.lstrip("# ").strip()
            for line in (SHIPPED_CONFIGS / f"{name}.toml").read_text(encoding="utf-8").splitlines()
            if line.startswith("#")
        )
        first = re.split(r"(?<! al)\. ", header)[0].split(": ")[0].rstrip(".")
        if len(first) > SUMMARY_CHARS:
            first = first[:SUMMARY_CHARS].rsplit(" ", 1)[0] + " ..."
        what = f"{config.env.id}, {config.engine.mode} {config.algo.name}"
        lines.append(f"{name:20s} {what:36s} {first}")
    return lines
