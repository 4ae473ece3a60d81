"""Opening a run someone else made runs none of its code: checkpoints are read as tensors and plain data
(``torch.load(weights_only=True)``), a ``module:factory`` a checkpoint's config names is called only with
``--trust-code``, and env-state pickles are unpickled only on resume, only from this user's own files.

Each fault is a real file: a checkpoint whose pickle calls ``os.system``, one cut in half, a config naming
``os:system``, an env-state pickle another user could have written. The payload would touch a marker file;
every test checks that it never ran, and that the refusal came before anything started (exit 2, one
``fastrl:`` line, no shared memory of the command's).
"""
import os
import pickle
import shutil
from pathlib import Path

import pytest
import torch

import fastrl
from fastrl.config import ConfigError
from fastrl.runs.checkpoint import load_checkpoint
from tests.helpers.runs import cartpole

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

ROOT = Path(__file__).resolve().parents[2]


class _Payload:
    """Pickles as a call of ``os.system``: what a hostile pickle does."""

    def __init__(self, marker: Path):
        self.command = f"touch {marker}"

    def __reduce__(self):
        return os.system, (self.command,)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny CartPole run whose last checkpoint is exact (env states saved beside it)."""
    tmp = tmp_path_factory.mktemp("trusted")
    config, overrides = cartpole(tmp, "engine.serial=true", "run.total_frames=200")
    fastrl.train(config, overrides, run_dir=tmp / "run")
    return tmp / "run"


def _copy(trained: Path, tmp_path: Path) -> Path:
    run = tmp_path / "shared"
    shutil.copytree(trained, run)
    return run


def _rewrite_latest(run: Path, checkpoint: dict) -> Path:
    """Replace the newest checkpoint (and latest.pt, its hard link) with ``checkpoint``, as torch.save writes it."""
    folder = run / "checkpoints"
    newest = max(folder.glob("ckpt-*.pt"))
    (folder / "latest.pt").unlink()
    newest.unlink()
    torch.save(checkpoint, newest)
    os.link(newest, folder / "latest.pt")
    return newest


def test_a_checkpoint_carrying_code_is_refused_by_every_reader(trained, tmp_path, in_process):
    marker = tmp_path / "ran"
    run = _copy(trained, tmp_path)
    _rewrite_latest(run, {**load_checkpoint(run), "note": _Payload(marker)})
    assert in_process("eval", str(run), "--episodes", "1") == 2, in_process.err
    assert in_process.err.startswith("fastrl: cannot evaluate: checkpoint") and "Traceback" not in in_process.err
    assert "holds more than tensors and plain data" in in_process.err and "GLOBAL posix.system" in in_process.err
    out = tmp_path / "policy.pt"
    readers = (lambda: fastrl.load_policy(run), lambda: fastrl.export_policy(run, "torchscript", out=out),
               lambda: fastrl.train(resume=run, overrides=["run.total_frames=400"]))
    for read in readers:
        with pytest.raises(ConfigError, match=r"holds more than tensors and plain data \(.*GLOBAL posix.system"):
            read()
    assert not marker.exists(), "the checkpoint's code ran"
    assert not out.exists()


def test_a_truncated_checkpoint_is_named_and_refused(trained, tmp_path, in_process):
    run = _copy(trained, tmp_path)
    latest = run / "checkpoints" / "latest.pt"
    with open(latest, "r+b") as f:  # latest.pt and the numbered file are one inode: both are cut
        f.truncate(latest.stat().st_size // 2)
    assert in_process("eval", str(run), "--episodes", "1") == 2, in_process.err
    message = f"cannot read checkpoint '{latest}': it is truncated or not a torch checkpoint"
    assert message in in_process.err and "checkpoints/ckpt-*.pt" in in_process.err and "Traceback" not in in_process.err
    with pytest.raises(ConfigError, match="it is truncated or not a torch checkpoint"):
        fastrl.train(resume=run, overrides=["run.total_frames=400"])


def test_a_config_naming_code_is_called_only_when_trusted(trained, tmp_path, in_process):
    marker = tmp_path / "ran"
    run = _copy(trained, tmp_path)
    checkpoint = load_checkpoint(run)
    config = checkpoint["config"]
    hostile = {**config, "env": {**config["env"], "id": "os:system", "kwargs": {"command": f"touch {marker}"}}}
    _rewrite_latest(run, {**checkpoint, "config": hostile})
    assert in_process("eval", str(run), "--episodes", "1") == 2, in_process.err
    assert (f"names code to import and call: env.id = 'os:system' with env.kwargs = {{'command': 'touch {marker}'}}"
            in in_process.err and "--trust-code" in in_process.err), in_process.err
    with pytest.raises(ConfigError, match="trust_code=True"):
        fastrl.load_policy(run)
    assert not marker.exists(), "the factory the checkpoint named was called"

    own = {**config, "env": {**config["env"], "id": "tests.helpers.faulty_envs:cartpole", "kwargs": {}}}
    _rewrite_latest(run, {**checkpoint, "config": own})
    with pytest.raises(ConfigError, match="env.id = 'tests.helpers.faulty_envs:cartpole'"):
        fastrl.evaluate(run, episodes=1)
    assert fastrl.evaluate(run, episodes=1, trust_code=True)["episodes"] == 1


@pytest.mark.parametrize("how", ["writable by others", "owned by another user"])
def test_env_states_another_user_could_have_written_are_not_unpickled(trained, tmp_path, how, in_process):
    if how == "owned by another user" and os.geteuid() != 0:
        pytest.skip("giving a file to another uid needs root")
    marker = tmp_path / "ran"
    run = _copy(trained, tmp_path)
    pickled = next((run / "checkpoints").glob("ckpt-*.envs/executor-0.pkl"))
    with open(pickled, "rb") as f:
        states = pickle.load(f)
    states[0]["note"] = _Payload(marker)
    with open(pickled, "wb") as f:
        pickle.dump(states, f)
    if how == "writable by others":
        pickled.chmod(0o666)
    else:
        os.chown(pickled, 65534, 65534)
    assert in_process("train", "--resume", str(run), "--set", "run.total_frames=400") == 2, in_process.err
    reason = "writable by others" if how == "writable by others" else "owned by uid 65534"
    assert f"refusing to unpickle the env states in '{pickled.parent}': '{pickled}' is {reason}" in in_process.err
    assert not marker.exists(), "the env-state pickle's code ran"
