"""The core names no algorithm's own figures: PPO's clip range, clip fraction and KL estimate are its
registration's declared metrics (``Algorithm.metrics``), placed and read by name, so no code of the control block,
the learner or the telemetry says them (prose may give them as examples)."""

import io
import re
import tokenize
from pathlib import Path

import pytest

import fastrl

pytestmark = pytest.mark.unit

ROOT = Path(fastrl.__file__).resolve().parent
CORE = ("buffers", "learning", "telemetry")
# a layer's module still in the core's folders: reward scaling clips the scaled rewards (algo.reward_clip)
NOT_CORE = {"learning/reward_normalization.py"}
PPO_WORDS = re.compile(r"clip_fraction|approx_kl|^['\"]?clip['\"]?$")


def _code_words(path: Path) -> set[str]:
    """The names and strings of a module's code, lower-cased; its docstrings and comments left out."""
    words, previous = set(), tokenize.NEWLINE
    for token in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
        if token.type == tokenize.NAME or (token.type == tokenize.STRING and previous not in
                                           (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT)):
            words.add(token.string.lower())
        if token.type not in (tokenize.COMMENT, tokenize.NL):
            previous = token.type
    return words


def test_no_core_module_names_ppos_figures_in_its_code():
    named = {}
    for folder in CORE:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if str(path.relative_to(ROOT)) in NOT_CORE:
                continue
            hits = sorted(w for w in _code_words(path) if PPO_WORDS.search(w))
            if hits:
                named[str(path.relative_to(ROOT))] = hits
    assert not named, named


def test_the_scan_sees_ppos_words_where_code_says_them(tmp_path):
    module = tmp_path / "probe.py"
    module.write_text('"""the clip range"""\n# clip_fraction\nstats[Stat.CLIP_FRACTION] = rule.clip\nk = "approx_kl"\n')
    assert {"clip_fraction", "clip", '"approx_kl"'} <= {w for w in _code_words(module) if PPO_WORDS.search(w)}
    assert not any(PPO_WORDS.search(w) for w in ("clip_grad_norm_", "reward_clip", "clipped"))
