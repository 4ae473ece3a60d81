"""The core names none of its layers, and none of an algorithm's own figures: their words appear in no code of the
core's folders (prose may give them as examples); with every layer unregistered the core still runs single-agent
configs in every mode. PPO's clip range, clip fraction and KL estimate are its registration's declared metrics
(``Algorithm.metrics``), placed and read by name."""

import io
import re
import tokenize
from pathlib import Path

import pytest

import fastrl
from fastrl.layer import LAYERS
from fastrl.runs.checkpoint import load_checkpoint
from tests.helpers.runs import cartpole

ROOT = Path(fastrl.__file__).resolve().parent
# the core: every folder but the layers' own (fastrl/layers), the algorithms, envs and models it is given, and the
# tools around a run (evaluation, bench, tuning, the command line)
CORE = ("buffers", "config", "learning", "modes", "process", "ranks", "runs", "sampling", "schema", "telemetry")
CORE_FILES = ("spec.py", "partition.py", "api.py")
# the words of the layers that ship with fastrl: the self-play pool, named policies, reward scaling, gala's gossip
LAYER_WORDS = re.compile(
    r"selfplay|self_play|named_polic|reward_scal|multiagent|opponents|pool_|gala|gossip|mailbox"
    r"|(?<![a-z])(elo|pool)(?![a-z])"
)
PPO_WORDS = re.compile(r"clip_fraction|approx_kl|^['\"]?clip['\"]?$")


def _code_words(path: Path) -> set[str]:
    """The names and non-docstring strings of a module, lower-cased: what its code says, not its prose."""
    words, previous = set(), tokenize.NEWLINE
    for token in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
        if token.type == tokenize.NAME or (
            token.type == tokenize.STRING
            and previous not in (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT)
        ):
            words.add(token.string.lower())
        if token.type not in (tokenize.COMMENT, tokenize.NL):
            previous = token.type
    return words


def _core_words(words: re.Pattern) -> dict[str, list[str]]:
    """Each core module's code words that ``words`` matches."""
    core = [path for folder in CORE for path in sorted((ROOT / folder).rglob("*.py"))]
    named = {}
    for path in core + [ROOT / name for name in CORE_FILES]:
        hits = sorted(w for w in _code_words(path) if words.search(w))
        if hits:
            named[str(path.relative_to(ROOT))] = hits
    return named


@pytest.mark.unit
def test_no_core_module_names_a_layer_in_its_code():
    assert not _core_words(LAYER_WORDS)


@pytest.mark.unit
def test_no_core_module_names_ppos_figures_in_its_code():
    assert not _core_words(PPO_WORDS)


@pytest.mark.unit
def test_the_grep_sees_a_layer_word_where_code_says_one(tmp_path):
    """The scan itself: a name or a string in code counts, a docstring or a comment does not."""
    module = tmp_path / "probe.py"
    module.write_text('"""the self-play pool"""\n# selfplay\nx = config.selfplay\ny = "pool_size"\n')
    assert {"selfplay", '"pool_size"'} <= _code_words(module)
    assert not any(LAYER_WORDS.search(w) for w in ("preload", "development", "spool"))  # words that hold one
    assert not any("self-play" in w for w in _code_words(module))
    assert PPO_WORDS.search("clip") and PPO_WORDS.search('"clip"') and not PPO_WORDS.search("clip_grad")


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
