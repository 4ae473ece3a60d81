"""The core names none of its layers: their words appear in no code of the core's folders (prose may give them as
examples), and with every layer unregistered the core still runs single-agent configs in every mode."""

import io
import re
import tokenize
from pathlib import Path

import pytest

import fastrl
from fastrl.layers import LAYERS
from fastrl.runs.checkpoint import load_checkpoint
from tests.helpers.runs import cartpole

ROOT = Path(fastrl.__file__).resolve().parent
CORE = ("buffers", "config", "process", "sampling", "schema", "telemetry", "learning")
# the layers' own modules inside the core's folders, still to move into folders of their own
LAYER_MODULES = {"learning/gossip.py", "learning/gossip_layer.py", "learning/gossip_metrics.py",
                 "learning/reward_normalization.py"}
# the self-play pool, named policies and reward scaling; gala's gossip is not in the list yet: the gala mode and
# its mailboxes are still the core's (docs/architecture.md, "A core and its layers")
LAYER_WORDS = re.compile(
    r"selfplay|self_play|named_polic|reward_scal|multiagent|opponents|pool_|(?<![a-z])(elo|pool)(?![a-z])"
)


def _code_words(path: Path) -> set[str]:
    """The names and non-docstring strings of a module, lower-cased: what its code says, not its prose."""
    words, previous = set(), tokenize.NEWLINE
    for token in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
        if token.type == tokenize.NAME or (token.type == tokenize.STRING and previous not in
                                           (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT)):
            words.add(token.string.lower())
        if token.type not in (tokenize.COMMENT, tokenize.NL):
            previous = token.type
    return words


@pytest.mark.unit
def test_no_core_module_names_a_layer_in_its_code():
    named = {}
    for folder in CORE:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if str(path.relative_to(ROOT)) in LAYER_MODULES:
                continue
            hits = sorted(w for w in _code_words(path) if LAYER_WORDS.search(w))
            if hits:
                named[str(path.relative_to(ROOT))] = hits
    assert not named, named


@pytest.mark.unit
def test_the_grep_sees_a_layer_word_where_code_says_one(tmp_path):
    """The scan itself: a name or a string in code counts, a docstring or a comment does not."""
    module = tmp_path / "probe.py"
    module.write_text('"""the self-play pool"""\n# selfplay\nx = config.selfplay\ny = "pool_size"\n')
    assert {"selfplay", '"pool_size"'} <= _code_words(module)
    assert not any(LAYER_WORDS.search(w) for w in ("preload", "development", "spool"))  # words that hold one
    assert not any("self-play" in w for w in _code_words(module))


@pytest.mark.engine
@pytest.mark.parametrize("mode, algo", [("sync", "ppo"), ("hts", "a2c"), ("async", "impala")])
def test_the_core_runs_single_agent_configs_with_no_layer_registered(tmp_path, mode, algo):
    config, base = cartpole(tmp_path, "engine.serial=true", f"algo.name='{algo}'", mode=mode)
    with LAYERS.scoped():
        for name in LAYERS.names():
            LAYERS.unregister(name)
        assert not fastrl.api.resolve_config(config, base).sections  # no layer: no layer section either
        summary = fastrl.train(config, base, run_dir=tmp_path / "run")
    assert summary["status"] == "complete" and summary["frames"] == 800
    assert load_checkpoint(tmp_path / "run")["frames"] == 800
