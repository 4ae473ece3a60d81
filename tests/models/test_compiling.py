"""``model.compile``: a compiled policy acts as the eager one, stays batch-invariant and deterministic
across layouts, resumes exactly, and its checkpoints are the eager model's.

Compiling costs seconds a graph, so the models here are small (CartPole's MLP, one Nature CNN) and
inductor's on-disk cache makes every graph after the first in this module cheap.
"""
import copy

import numpy as np
import pytest
import torch

import fastrl
from fastrl.config import AUTO, Config, ConfigError
from fastrl.models import compiling
from fastrl.models.cnn import NatureCNN
from fastrl.models.compiling import COMPILE_PAYS_FRAMES, compile_policy, compiled_copy, compiles
from fastrl.models.distributions import distribution_for
from fastrl.models.microbatch import forward_microbatched
from fastrl.models.mlp import MLPPolicy
from fastrl.runs.checkpoint import load_checkpoint
from tests.helpers.batch_invariance import assert_rows_batch_invariant, random_frames
from tests.helpers.runs import cartpole

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

COMPILED = "model.compile=true"
CPU = torch.device("cpu")


def _identical(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _train(tmp_path, name, *overrides, mode="sync"):
    config, base = cartpole(tmp_path, *overrides, mode=mode)
    summary = fastrl.train(config, base, run_dir=tmp_path / name)
    return summary, tmp_path / name


@pytest.fixture(scope="module")
def nature_pair():
    """A Nature CNN (normalised inputs, as the default job) and a compiled copy with the same weights."""
    torch.manual_seed(0)
    eager = NatureCNN((4, 84, 84), 6, normalize_obs=True).eval()
    with torch.no_grad():  # statistics away from their prior, so the normaliser's arithmetic is exercised
        eager.obs_normalizer.observe(random_frames(64).float())
    return eager, compile_policy(copy.deepcopy(eager), "default")


@pytest.mark.slow  # cold inductor compiles
def test_compiled_policy_samples_the_actions_of_the_eager_one(nature_pair):
    eager, compiled = nature_pair
    obs = random_frames(40)
    u = np.random.default_rng(3).random(40)
    with torch.inference_mode():
        outputs = [forward_microbatched(model, obs, 8) for model in (eager, compiled)]
    (logits_e, value_e), (logits_c, value_c) = outputs
    torch.testing.assert_close(logits_c, logits_e, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(value_c, value_e, rtol=1e-5, atol=1e-6)
    sample = distribution_for(None).sample
    actions_e, logp_e = sample(logits_e.numpy(), u)
    actions_c, logp_c = sample(logits_c.numpy(), u)
    np.testing.assert_array_equal(actions_c, actions_e)
    np.testing.assert_allclose(logp_c, logp_e, rtol=1e-5, atol=1e-6)


@pytest.mark.slow  # cold inductor compiles
def test_compiled_micro_batches_are_batch_invariant(nature_pair):
    assert_rows_batch_invariant(nature_pair[1], random_frames(24), 8, np.random.default_rng(1), extra_partitions=1)


@pytest.mark.slow  # 24 s in CI: inductor's cold start costs that whatever the model (it was 25 s on a Nature CNN)
def test_a_copy_of_a_compiled_policy_computes_with_its_own_parameters():
    """hts's trainee and A2C's behaviour net are deep copies of the compiled learner model. The property is the
    compiled wrapper's, whatever the model: CartPole's MLP here, the cheapest graph to compile."""
    torch.manual_seed(0)
    compiled = compile_policy(MLPPolicy((4,), 2, normalize_obs=True), "default")
    twin = compiled_copy(compiled)
    with torch.no_grad():
        for p in twin.parameters():
            p.mul_(2.0)
        obs = torch.randn(8, 4)
        assert not torch.equal(twin(obs)[1], compiled(obs)[1])
    assert list(twin.state_dict()) == list(MLPPolicy((4,), 2, normalize_obs=True).state_dict())


def test_a_copy_of_a_compiled_policy_is_compiled_as_the_original_is():
    """``copy.deepcopy`` drops ``nn.Module.compile``'s wrapper (hts's second weight slot and PPO's trainee ran eager
    so); ``compiled_copy`` compiles the copy in the original's mode, and leaves an eager model's copy eager."""
    compiled = compile_policy(MLPPolicy((4,), 2), "default")
    assert copy.deepcopy(compiled)._compiled_call_impl is None  # torch's behaviour, which compiled_copy is for
    assert compiled_copy(compiled)._compiled_call_impl is not None
    assert compiled_copy(compile_policy(MLPPolicy((4,), 2), None))._compiled_call_impl is None


def _config(model_compile, total_frames=10_000_000) -> Config:
    config = Config()
    config.model.compile = model_compile
    config.run.total_frames = total_frames
    return config


def test_auto_compiles_image_models_in_long_runs_only():
    assert compiles(_config(AUTO), CPU, image_model=True)
    assert not compiles(_config(AUTO, COMPILE_PAYS_FRAMES - 1), CPU, image_model=True)  # start-up would not pay
    assert not compiles(_config(AUTO), CPU, image_model=False)  # an MLP's forward is too small to gain
    assert compiles(_config(True, 1), CPU, image_model=False)  # true: whatever the model and length
    assert not compiles(_config(False), CPU, image_model=True)


def test_auto_compiles_on_cuda_but_not_recurrent_models(monkeypatch):
    monkeypatch.setattr(compiling, "compile_unavailable", lambda device_type="cpu": None)  # as where Triton is
    cuda = torch.device("cuda", 0)
    assert compiles(_config(AUTO), cuda, image_model=True)  # measured on an H200: the actors' forward 7.9x
    recurrent = _config(AUTO)
    recurrent.model.lstm = 256
    assert not compiles(recurrent, cuda, image_model=True)  # CUDA graphs against carried states: not measured
    assert compiles(recurrent, CPU, image_model=True)


@pytest.mark.parametrize(
    ("mode", "device", "role", "expected"),
    [
        (AUTO, "cpu", "actor", "default"),
        (AUTO, "cpu", "learner", "default"),
        (AUTO, "cuda", "actor", "reduce-overhead"),  # the default job's bottleneck: launches of 16-row forwards
        (AUTO, "cuda", "learner", None),  # eager: compiling measured no faster, and it was not the limit
        ("reduce-overhead", "cuda", "learner", "reduce-overhead"),  # as set by hand
        ("max-autotune", "cpu", "learner", "max-autotune"),
    ],
)
def test_compile_mode_auto_replays_cuda_graphs_in_cuda_actors_only(mode, device, role, expected):
    config = _config(True)
    config.model.compile_mode = mode
    assert compiling.compile_mode_for(config, torch.device(device), role) == expected
    config.model.compile = False
    assert compiling.compile_mode_for(config, torch.device(device), role) is None  # eager: no mode at all


def test_compile_is_refused_where_torch_cannot_compile_and_auto_falls_back(monkeypatch):
    reason = "inductor compiles C++ for the CPU and no C++ compiler was found (install g++, or set CXX to one)"
    monkeypatch.setattr(compiling, "compile_unavailable", lambda device_type="cpu": reason)
    with pytest.raises(ConfigError, match=r"model.compile = true.*no C\+\+ compiler was found"):
        compiles(_config(True), CPU, image_model=True)
    assert not compiles(_config(AUTO), CPU, image_model=True)


def test_compile_true_is_refused_before_a_run_starts(tmp_path, monkeypatch):
    monkeypatch.setattr(compiling, "compile_unavailable", lambda device_type="cpu": "no compiler here")
    with pytest.raises(ConfigError, match="no compiler here"):
        _train(tmp_path, "refused", COMPILED, "engine.serial=true")
    assert not (tmp_path / "refused" / "checkpoints").exists()


def test_compile_key_takes_booleans_and_auto_only(tmp_path):
    with pytest.raises(ConfigError, match=r"model.compile.*true, false or 'auto'"):
        _train(tmp_path, "bad", "model.compile='yes'", "engine.serial=true")


@pytest.mark.slow  # cold inductor compiles: a minute
def test_compiled_runs_do_not_depend_on_the_process_layout(tmp_path):
    """1/1, 2/2 (inline actors) and 4/1: every actor runs the same compiled graph, so the same bits."""
    runs = []
    for executors, actors, inline in [(1, 1, False), (2, 2, True), (4, 1, False)]:
        summary, run = _train(tmp_path, f"x{executors}a{actors}", COMPILED, f"engine.executors={executors}",
                              f"engine.actors={actors}", f"engine.inline_actors={str(inline).lower()}",
                              "run.total_frames=400", mode="hts")
        assert summary["frames"] == 400
        runs.append(load_checkpoint(run)["model"])
    assert _identical(runs[0], runs[1]) and _identical(runs[0], runs[2])


@pytest.mark.slow  # cold inductor compiles
def test_compiled_run_resumes_exactly_and_its_checkpoint_goes_on_eager(tmp_path):
    ppo = "algo.name='ppo'"
    _, whole = _train(tmp_path, "whole", COMPILED, ppo, "engine.serial=true", "run.total_frames=800")
    _, half = _train(tmp_path, "half", COMPILED, ppo, "run.total_frames=400")
    assert load_checkpoint(half)["config"]["model"]["compile"] is True  # "true" is what config.toml records
    fastrl.train(resume=half, overrides=["run.total_frames=800"])
    assert _identical(load_checkpoint(half)["model"], load_checkpoint(whole)["model"])

    # the same checkpoint in an eager process: loads as it is (same keys) and goes on
    policy = fastrl.load_policy(whole)
    assert isinstance(policy, MLPPolicy) and policy._compiled_call_impl is None  # eager
    assert _identical(policy.state_dict(), load_checkpoint(whole)["model"])
    summary = fastrl.train(resume=whole, overrides=["run.total_frames=1200", "model.compile=false"])
    assert summary["frames"] == 1200
