"""Family 3, run directories given to ``--resume``, ``eval``, ``plot``, ``export``, ``bench crafter`` and
``load_policy``: any file of a real run truncated at every length class, bit-flipped, overwritten, deleted, made a
folder or a symlink (dangling, a loop). Each command answers with exit 0, 1 or 2 and no traceback; a refused run is
never written to, and the reading commands never write into the run at all."""

import random
import shutil
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import fastrl
from tests.fuzz.cases import fuzz
from tests.fuzz.checks import assert_nothing_left, assert_unchanged, breach, command, outcome, tree_digest
from tests.helpers.runs import cartpole

pytestmark = pytest.mark.engine
FAMILY = "run_dirs"


@pytest.fixture(scope="module")
def base_run(tmp_path_factory):
    """A small CartPole run with numbered checkpoints, env states, metrics and a summary."""
    tmp = tmp_path_factory.mktemp("base")
    _, overrides = cartpole(tmp, "engine.serial=true", "run.total_frames=400", "run.checkpoint_interval_frames=160")
    fastrl.train(None, overrides, run_dir=tmp / "run")
    files = sorted(str(p.relative_to(tmp / "run")) for p in (tmp / "run").rglob("*") if p.is_file())
    return tmp / "run", files


DAMAGES = ("truncate", "bitflip", "overwrite", "delete", "folder", "dangling_link", "link_loop", "text")


@st.composite
def damages(draw, files):
    """(file, how, argument): which file of the run, how it is damaged."""
    return draw(st.sampled_from(files)), draw(st.sampled_from(DAMAGES)), draw(st.integers(0, 2**32))


def damage(run: Path, rel: str, how: str, arg: int, text: str) -> None:
    path = run / rel
    data = path.read_bytes()
    if how == "truncate":  # every length class: empty, a byte, a header, most of it, all but the last byte
        cuts = [0, 1, 7, 64, len(data) // 2, len(data) - 1]
        path.write_bytes(data[: max(0, cuts[arg % len(cuts)])])
    elif how == "bitflip" and data:
        at = arg % len(data)
        path.write_bytes(data[:at] + bytes([data[at] ^ (1 << (arg >> 20) % 8)]) + data[at + 1 :])
    elif how == "overwrite":
        path.write_bytes(random.Random(arg).randbytes(1 + arg % 512))  # seeded: a failing case can be replayed
    elif how == "delete":
        path.unlink()
    elif how == "folder":
        path.unlink()
        path.mkdir()
    elif how == "dangling_link":
        path.unlink()
        path.symlink_to(run / "nowhere")
    elif how == "link_loop":
        path.unlink()
        path.symlink_to(path)
    else:  # text: what an editor or a cut write leaves
        path.write_text(text, encoding="utf-8", errors="surrogatepass")


COMMANDS = ("eval", "plot", "export", "resume", "load_policy", "bench_crafter")


def _run(command_name: str, run: Path, out: Path):
    if command_name == "load_policy":
        kind, _ = outcome(FAMILY, lambda: fastrl.load_policy(run))
        return {"accepted": 0, "refused": 2, "run_failed": 1}[kind]
    argv = {
        "eval": ["eval", str(run), "--episodes", "1", "--max-steps", "20"],
        "plot": ["plot", str(run), "--out", str(out / "plot.png")],
        "export": ["export", str(run), "--format", "torchscript", "--out", str(out / "policy.pt")],
        "resume": ["train", "--resume", str(run), "--set", "run.total_frames=480"],
        "bench_crafter": ["bench", "crafter", str(run)],
    }[command_name]
    return command(FAMILY, *argv)[0]


@fuzz(sample=4, full=100)
@given(st.data(), st.sampled_from(COMMANDS), st.text(max_size=40))
@example(None, "resume", "")
def test_a_damaged_run_is_refused_and_never_written_to(base_run, tmp_path_factory, data, command_name, text):
    source, files = base_run
    if data is None:  # the pinned example: the run as it was
        rel, how, arg = files[0], "none", 0
    else:
        rel, how, arg = data.draw(damages(files))
    tmp = tmp_path_factory.mktemp("case")
    run = tmp / "run"
    shutil.copytree(source, run, symlinks=True)
    if how != "none":
        damage(run, rel, how, arg, text)
    before = tree_digest(run)
    code = _run(command_name, run, tmp)
    if command_name != "resume" or code != 0:  # only a resume that went on may write into the run
        assert_unchanged(FAMILY, before, run, f"{command_name} of a run with {rel} {how} (exit {code})")
    if command_name == "resume" and how == "none" and code != 0:
        raise breach(FAMILY, "did_not_run", "an intact run did not resume")
    assert_nothing_left(FAMILY)


@pytest.mark.parametrize(("pattern", "how", "command_name"), [
    ("metrics.jsonl", "overwrite", "plot"),  # found: bytes that are no UTF-8 were a UnicodeDecodeError's traceback
    (".episodes.json", "text", "resume"),  # found: a damaged episodes file was a JSONDecodeError's traceback
    (".episodes.json", "overwrite", "resume"),
    (".pkl", "truncate", "resume"),  # found: a cut env-state pickle ended the resumed run in an EOFError (exit 1)
    (".pkl", "dangling_link", "resume"),
    ("metrics.jsonl", "folder", "resume"),  # found: config.toml rewritten, then an IsADirectoryError (exit 1)
    ("checkpoints/.reserve", "folder", "resume"),  # found: the resumed learner's IsADirectoryError (exit 1)
])
def test_found_damages_answer_cleanly(base_run, tmp_path, pattern, how, command_name):
    source, files = base_run
    rel = next(f for f in files if f.endswith(pattern))
    run = tmp_path / "run"
    shutil.copytree(source, run, symlinks=True)
    damage(run, rel, how, 3, "{'not': json")
    before = tree_digest(run)
    code = _run(command_name, run, tmp_path)
    assert code in (0, 2)
    if command_name != "resume" or code:
        assert_unchanged(FAMILY, before, run, f"{command_name} of a run with {rel} {how}")

