"""``fastrl export``: ONNX and TorchScript files that compute what ``fastrl.load_policy`` computes, from the
env's raw observation (normalisers, uint8 scaling, value de-normalisation and the LSTM state inside)."""
import json

import numpy as np
import onnxruntime
import pytest
import torch

import fastrl
from fastrl import cli
from fastrl.config import ConfigError
from tests.helpers.runs import cartpole

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

# onnx in the slow tier: the docs example keeps an onnxruntime check in the default one
FORMATS = [pytest.param("onnx", marks=pytest.mark.slow), "torchscript"]
TOLERANCE = 1e-5
PONG = ["env.id='PongNoFrameskip-v4'", "model.name='nature'", "model.normalize_obs=true", "algo.name='ppo'",
        "algo.minibatches=1", "algo.normalize_returns=true", "engine.serial=true", "engine.envs=2",
        "run.total_frames=400", "model.precision='fp32'"]  # export writes fp32: "auto" is bf16 on AMX, as load_policy's


def _train(tmp_path, name, *overrides):
    config, base = cartpole(tmp_path, *overrides)
    fastrl.train(config, base, run_dir=tmp_path / name)
    return tmp_path / name


def _run(path, fmt: str, *inputs: np.ndarray) -> list[np.ndarray]:
    """The exported file, run as its user would: onnxruntime or torch.jit, no fastrl."""
    if fmt == "onnx":
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return session.run(None, {arg.name: x for arg, x in zip(session.get_inputs(), inputs)})
    loaded = torch.jit.load(str(path))
    with torch.no_grad():
        return [t.numpy() for t in loaded(*(torch.from_numpy(x) for x in inputs))]


def _close(got: np.ndarray, want: torch.Tensor) -> None:
    np.testing.assert_allclose(got, want.numpy(), rtol=TOLERANCE, atol=TOLERANCE)


@pytest.fixture(scope="module")
def pong_run(tmp_path_factory):
    return _train(tmp_path_factory.mktemp("pong"), "pong", *PONG)


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_atari_cnn_with_its_normalisers_gives_what_load_policy_gives(pong_run, tmp_path, fmt):
    exported = fastrl.export_policy(pong_run, fmt, out=tmp_path / f"pong.{fmt}")
    policy = fastrl.load_policy(pong_run)
    # statistics that moved away from their prior: a file without them would differ
    assert float(policy.obs_normalizer.mean.abs().max()) > 0.01 and float(policy.value_normalizer.count) > 1
    obs = np.random.default_rng(0).integers(0, 256, (64, 4, 84, 84), dtype=np.uint8)  # raw frames, as the env's
    logits, value = _run(exported.path, fmt, obs)
    with torch.no_grad():
        want_logits, want_value = policy(torch.from_numpy(obs))
    _close(logits, want_logits)
    _close(value, want_value)
    assert exported.inputs == {"obs": [["B", 4, 84, 84], "uint8"]}
    assert list(exported.outputs) == ["logits", "value"] and exported.outputs["logits"][0] == ["B", 6]


@pytest.mark.parametrize("fmt", FORMATS)
def test_greedy_adds_the_argmax_action_first(pong_run, tmp_path, fmt):
    exported = fastrl.export_policy(pong_run, fmt, out=tmp_path / f"greedy.{fmt}", greedy=True)
    obs = np.random.default_rng(1).integers(0, 256, (64, 4, 84, 84), dtype=np.uint8)
    action, logits, _ = _run(exported.path, fmt, obs)
    assert list(exported.outputs) == ["action", "logits", "value"]
    np.testing.assert_array_equal(action, logits.argmax(-1))


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_lstm_policy_carries_its_state_through_20_steps(tmp_path, fmt):
    run_dir = _train(tmp_path, "lstm", "model.lstm=16", "model.normalize_obs=true", "engine.serial=true")
    exported = fastrl.export_policy(run_dir, fmt)
    assert exported.path == run_dir / ("policy.onnx" if fmt == "onnx" else "policy.pt")
    assert list(exported.inputs) == ["obs", "hidden"] and list(exported.outputs) == ["logits", "value", "hidden_out"]
    policy = fastrl.load_policy(run_dir)
    rng = np.random.default_rng(2)
    hidden = np.zeros((64, 32), np.float32)
    want_hidden = torch.zeros(64, 32)
    for _ in range(20):
        obs = rng.normal(size=(64, 4)).astype(np.float32)
        logits, value, hidden = _run(exported.path, fmt, obs, hidden)
        with torch.no_grad():
            want_logits, want_value, want_hidden = policy(torch.from_numpy(obs), want_hidden)
        _close(logits, want_logits)
        _close(value, want_value)
        _close(hidden, want_hidden)


@pytest.mark.parametrize("fmt", FORMATS)
def test_box_actions_give_the_gaussians_mean_and_log_std(tmp_path, fmt):
    run_dir = _train(tmp_path, "pendulum", "env.id='Pendulum-v1'", "algo.name='ppo'", "algo.minibatches=1",
                     "model.normalize_obs=true", "engine.serial=true")
    exported = fastrl.export_policy(run_dir, fmt, greedy=True)
    assert list(exported.outputs) == ["action", "mean", "log_std", "value"]
    policy = fastrl.load_policy(run_dir)
    obs = np.random.default_rng(3).normal(size=(64, 3)).astype(np.float32)
    action, mean, log_std, value = _run(exported.path, fmt, obs)
    with torch.no_grad():
        head, want_value = policy(torch.from_numpy(obs))
    _close(mean, head[:, :1])
    _close(log_std, head[:, 1:])
    _close(value, want_value)
    np.testing.assert_array_equal(action, mean)


def test_the_cli_writes_the_file_and_prints_its_signature(pong_run, tmp_path, capsys):
    out = tmp_path / "cli.pt"
    assert cli.main(["export", str(pong_run), "--format", "torchscript", "--out", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["path"] == str(out) and out.is_file()
    assert printed["format"] == "torchscript" and printed["params"] == "model"


def test_bad_input_is_named_before_anything_is_written(pong_run, tmp_path, monkeypatch, capsys):
    with pytest.raises(ConfigError, match="format = 'tflite'; allowed: 'onnx', 'torchscript'"):
        fastrl.export_policy(pong_run, "tflite")
    with pytest.raises(ConfigError, match="its folder .* does not exist"):
        fastrl.export_policy(pong_run, "torchscript", out=tmp_path / "no" / "policy.pt")
    with pytest.raises(ConfigError, match="is a directory"):
        fastrl.export_policy(pong_run, "torchscript", out=tmp_path)
    with pytest.raises(ConfigError, match="nothing to evaluate at"):
        fastrl.export_policy(tmp_path / "nope", "torchscript")
    import fastrl.evaluation.export as export

    monkeypatch.setattr(export, "_importable", lambda name: name != "onnxruntime")
    with pytest.raises(ConfigError, match=r"needs onnxruntime: pip install 'fastrl-engine\[export\]'"):
        fastrl.export_policy(pong_run, "onnx")
    assert cli.main(["export", str(pong_run), "--format", "onnx"]) == 2
    assert "fastrl-engine[export]" in capsys.readouterr().err
    assert not (pong_run / "policy.onnx").exists()


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_masked_dict_policy_is_fed_its_flattened_row_and_masks_inside(tmp_path, fmt):
    import gymnasium as gym

    from fastrl.models.action_mask import MASKED_LOGIT
    from tests.helpers import masked_env

    run_dir = _train(tmp_path, "masked", "env.id='tests.helpers.masked_env:masked'", "algo.name='ppo'",
                     "algo.minibatches=2",
                     "model.normalize_obs=true", "engine.serial=true")
    exported = fastrl.export_policy(run_dir, fmt, greedy=True, trust_code=True)  # a module:factory env
    env = masked_env.masked()
    rows = np.stack([gym.spaces.flatten(env.observation_space, env.reset(seed=s)[0]) for s in range(64)])
    rows = rows.astype(np.float32)
    action, logits, value = _run(exported.path, fmt, rows)
    with torch.no_grad():
        want_logits, want_value = fastrl.load_policy(run_dir, trust_code=True)(torch.from_numpy(rows))
    _close(logits, want_logits)
    _close(value, want_value)
    mask = rows[:, :4]  # flatten's order: action_mask, then obs
    assert ((logits == MASKED_LOGIT) == (mask == 0)).all() and (mask == 0).any()
    assert mask[np.arange(64), action].all()  # the greedy action is an allowed one


def test_the_docs_onnxruntime_example_runs_without_fastrl(tmp_path):
    import re
    import subprocess
    import sys
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "evaluation-and-export.md").read_text()
    section = page[page.index("### Exporting a policy"):]
    example = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert "fastrl" not in example.replace("runs/<run>/policy.onnx", "")
    run_dir = _train(tmp_path, "cartpole", "algo.name='ppo'", "algo.minibatches=2", "engine.serial=true")
    fastrl.export_policy(run_dir, "onnx")
    script = example.replace("runs/<run>/policy.onnx", str(run_dir / "policy.onnx"))
    # -I: isolated, so the checkout is not on the path; the script imports gymnasium, numpy, onnxruntime only
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout.strip()) >= 1.0  # an episode's score
