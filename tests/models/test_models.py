"""Policy networks, the model registry and the batch-invariant micro-batched forward.

Finding (measured, not asserted; torch 2.13 CPU, 2 threads, MLP and NatureCNN): a PLAIN
forward is not batch-invariant. Against the same rows forwarded one at a time, batches of
2..64 rows differ bitwise in 98-100% of the rows (max |diff| ~1e-8 on logits). Between larger
batch sizes the pattern follows the SIMD blocking: sizes 4, 8, 16, 20 agreed with each other,
sizes 1, 2 differed from all others, size 5 differed in the 20% of rows that fall in the
remainder block. Padding to a fixed micro-batch makes every row bit-identical (asserted
below); the offset/alignment of the input rows and 1 vs 2 threads made no difference at a
fixed micro-batch size.

Second finding: a fixed size is necessary but not sufficient; the size must also fill the CPU
kernels' row blocks. On this AMD EPYC, micro-batches of 5-7 and 9-11 rows break invariance
at the tail positions (4.., 8..: rows past the last full 4-row block take another code path),
while 1-4, 8 and every size >= 12 (checked up to 24) keep it. Use a multiple of 8 (default 16).
"""
from __future__ import annotations

import math
import sys
import textwrap

import numpy as np
import pytest
import torch
from torch import nn

from fastrl.models import (
    ImpalaResNet,
    MLPPolicy,
    NatureCNN,
    ShallowCNN,
    build_model,
    forward_microbatched,
    register_model,
)
from fastrl.models import microbatch as microbatch_module
from fastrl.models import registry as registry_module
from tests.helpers.batch_invariance import ATARI, assert_rows_batch_invariant, random_frames

pytestmark = pytest.mark.unit  # the fast tier: no engine run

CARTPOLE = (4,)


@pytest.fixture(autouse=True)
def _seeded_two_threads():
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    torch.manual_seed(0)
    yield
    torch.set_num_threads(threads)


def _vectors(n: int, shape=CARTPOLE, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn((n, *shape), generator=g)


# ---------------------------------------------------------------- shapes, dtypes, scaling


@pytest.mark.parametrize("model_fn, obs", [
    (lambda: MLPPolicy(CARTPOLE, 2), lambda: _vectors(3)),
    (lambda: MLPPolicy(CARTPOLE, 2, hidden=()), lambda: _vectors(3)),
    (lambda: MLPPolicy((2, 3), 5, hidden=[32]), lambda: _vectors(3, (2, 3))),
    (lambda: NatureCNN(ATARI, 6), lambda: random_frames(3)),
    (lambda: ShallowCNN(ATARI, 6), lambda: random_frames(3)),
    (lambda: NatureCNN(ATARI, 6, layer_norm=True), lambda: random_frames(3)),
    (lambda: ImpalaResNet(ATARI, 6), lambda: random_frames(2)),
    (lambda: ImpalaResNet(ATARI, 6, channels=(8, 16)), lambda: random_frames(2)),
])
def test_forward_shapes_and_dtypes(model_fn, obs):
    model, x = model_fn(), obs()
    logits, value = model(x)
    assert logits.shape == (x.shape[0], model.n_actions) and logits.dtype == torch.float32
    assert value.shape == (x.shape[0],) and value.dtype == torch.float32
    assert torch.isfinite(logits).all() and torch.isfinite(value).all()
    (logits.sum() + value.sum()).backward()  # differentiable end to end


def test_plain_cnn_widths_from_model_kwargs_and_bad_ones_named():
    """``channels`` widens the convolutions (same kernels and strides), ``fc`` the FC layer; a wrong width is a
    ValueError naming the key and what it takes."""
    wide = build_model("nature", ATARI, np.uint8, 6, kwargs={"channels": [64, 128, 128], "fc": 1024})
    convs = [m for m in wide.modules() if isinstance(m, nn.Conv2d)]
    assert [c.out_channels for c in convs] == [64, 128, 128]
    assert [c.kernel_size[0] for c in convs] == [8, 4, 3] and [c.stride[0] for c in convs] == [4, 2, 1]
    fc = [m for m in wide.modules() if isinstance(m, nn.Linear)][0]
    assert fc.out_features == 1024 and fc.in_features == 128 * 7 * 7
    logits, value = wide(random_frames(2))
    assert logits.shape == (2, 6) and value.shape == (2,)
    assert wide.channels == (64, 128, 128) and NatureCNN(ATARI, 6).channels == (32, 64, 64)
    with pytest.raises(ValueError, match=r"'shallow'.*channels must be 3 ints >= 1.*default \[32, 64, 32\]"):
        build_model("shallow", ATARI, np.uint8, 6, kwargs={"channels": [32, 64]})
    with pytest.raises(ValueError, match=r"'nature'.*channels must be 3 ints"):
        build_model("nature", ATARI, np.uint8, 6, kwargs={"channels": [32, 0, 64]})
    with pytest.raises(ValueError, match=r"'nature'.*fc must be an int >= 1.*got 0"):
        build_model("nature", ATARI, np.uint8, 6, kwargs={"fc": 0})


def test_plain_cnn_stack_from_model_kwargs_reads_a_tiled_frame_tile_by_tile():
    """``convs`` replaces the whole stack: on Crafter's 64x64 frame of 7-pixel tiles a 7x7/7 first convolution
    gives one cell a tile (9x9), two unpadded 3x3 convolutions leave 5x5; a malformed stack, or channels beside
    it, is a ValueError naming the key, what it takes and the default."""
    tiles = [[64, 7, 7], [64, 3, 1], [64, 3, 1]]
    model = build_model("nature", (3, 64, 64), np.uint8, 17, kwargs={"convs": tiles})
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert [[c.out_channels, c.kernel_size[0], c.stride[0]] for c in convs] == tiles
    fc = [m for m in model.modules() if isinstance(m, nn.Linear)][0]
    assert fc.in_features == 64 * 5 * 5 and model.channels == (64, 64, 64)
    logits, value = model(torch.randint(0, 256, (2, 3, 64, 64), dtype=torch.uint8))
    assert logits.shape == (2, 17) and value.shape == (2,)
    malformed = r"'nature'.*convs must be one or more \[out_channels, kernel, stride\].*"
    default = r"default \[\[32, 8, 4\], \[64, 4, 2\], \[64, 3, 1\]\]"
    for bad in ([], [[64, 7]], [[64, 7, 0]], [[64, 7, True]], "64,7,7", [[64, 7.0, 7]]):
        with pytest.raises(ValueError, match=malformed + default):
            build_model("nature", (3, 64, 64), np.uint8, 17, kwargs={"convs": bad})
    with pytest.raises(ValueError, match=r"'nature'.*channels or convs, not both"):
        build_model("nature", (3, 64, 64), np.uint8, 17, kwargs={"convs": tiles, "channels": [64, 64, 64]})
    with pytest.raises(ValueError, match=r"too small for its convolutions"):
        build_model("nature", (3, 64, 64), np.uint8, 17, kwargs={"convs": [[8, 7, 7], [8, 10, 1]]})


@pytest.mark.parametrize("cls", [NatureCNN, ShallowCNN, ImpalaResNet])
@pytest.mark.parametrize("shape", [(1, 84, 84), (4, 64, 64), (3, 84, 100)])
def test_image_models_size_features_from_obs_shape(cls, shape):
    logits, value = cls(shape, 3)(random_frames(2, shape))
    assert logits.shape == (2, 3) and value.shape == (2,)


def test_shallow_is_a_different_size_from_nature():
    n_params = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert n_params(ShallowCNN(ATARI, 6)) < 0.6 * n_params(NatureCNN(ATARI, 6))


@pytest.mark.parametrize("cls", [NatureCNN, ShallowCNN])
def test_layer_norm_puts_every_pre_activation_at_zero_mean_and_unit_scale(cls):
    """``layer_norm=True``: each conv's and the FC's output, per sample, has mean 0 and variance 1 before its
    ReLU (at init: the norms' weights are 1, their biases 0); without it, the scales are what the weights give."""
    plain, normed = cls(ATARI, 6), cls(ATARI, 6, layer_norm=True)
    assert not any(isinstance(m, nn.LayerNorm) for m in plain.modules())
    x = random_frames(4).float() / 255.0
    pre_activations = []
    hooks = [m.register_forward_hook(lambda _m, _i, out: pre_activations.append(out.detach().clone()))
             for m in normed.modules() if isinstance(m, nn.LayerNorm)]
    normed(x)
    for h in hooks:
        h.remove()
    assert len(pre_activations) == len(cls.CONVS) + 1  # one per conv, one for the FC layer
    for out in pre_activations:
        per_sample = out.flatten(1)
        torch.testing.assert_close(per_sample.mean(1), torch.zeros(4), atol=1e-4, rtol=0)
        torch.testing.assert_close(per_sample.var(1, unbiased=False), torch.ones(4), atol=1e-2, rtol=0)
    n_params = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert n_params(normed) > n_params(plain)  # the norms' elementwise weights and biases learn


def test_layer_norm_from_model_kwargs_and_its_bad_value_named():
    model = build_model("nature", ATARI, np.uint8, 6, kwargs={"layer_norm": True})
    assert sum(isinstance(m, nn.LayerNorm) for m in model.modules()) == 4
    with pytest.raises(ValueError, match=r"'shallow'.*layer_norm must be true or false, got 'yes'"):
        build_model("shallow", ATARI, np.uint8, 6, kwargs={"layer_norm": "yes"})
    with pytest.raises(ValueError, match=r"'impala'.*bad kwargs \['layer_norm'\]"):
        build_model("impala", ATARI, np.uint8, 6, kwargs={"layer_norm": True})


@pytest.mark.parametrize("cls", [NatureCNN, ShallowCNN, ImpalaResNet])
def test_uint8_frames_are_scaled_by_1_over_255(cls):
    model = cls(ATARI, 4)
    x = random_frames(2)
    got = model(x)
    want = model(x.float() / 255.0)  # float observations pass through unscaled
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7)
    far = model(x.float())  # unscaled input is a different function value
    assert not torch.allclose(far[1], got[1])


def test_mlp_flattens_and_scales_uint8():
    model = MLPPolicy((2, 3), 4)
    x = torch.randint(0, 256, (5, 2, 3), dtype=torch.uint8)
    torch.testing.assert_close(model(x), model(x.float() / 255.0))
    torch.testing.assert_close(model(x.double() / 255.0), model(x.float() / 255.0))


def _row_norms(layer: nn.Linear) -> torch.Tensor:
    return layer.weight.detach().norm(dim=1)


@pytest.mark.parametrize("cls, shape", [(MLPPolicy, CARTPOLE), (NatureCNN, ATARI), (ImpalaResNet, ATARI)])
def test_heads_have_the_a2c_orthogonal_init(cls, shape):
    model = cls(shape, 3)
    # orthogonal with n_out < n_in: rows are orthonormal, scaled by the gain
    torch.testing.assert_close(_row_norms(model.policy_head), torch.full((3,), 0.01))
    torch.testing.assert_close(_row_norms(model.value_head), torch.ones(1))
    assert not model.policy_head.bias.any() and not model.value_head.bias.any()


def test_mlp_hidden_layers_are_orthogonal_with_gain_sqrt2():
    model = MLPPolicy((100,), 2, hidden=(64, 32))
    for layer in (m for m in model.trunk if isinstance(m, nn.Linear)):
        s = torch.linalg.svdvals(layer.weight.detach())
        torch.testing.assert_close(s, torch.full_like(s, math.sqrt(2)), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- registry


def test_build_builtins_and_auto():
    assert isinstance(build_model("auto", CARTPOLE, np.float32, 2), MLPPolicy)
    assert isinstance(build_model("auto", ATARI, np.uint8, 6), NatureCNN)
    assert isinstance(build_model("auto", (2, 3), "float64", 2), MLPPolicy)
    assert isinstance(build_model("mlp", CARTPOLE, torch.float32, 2), MLPPolicy)
    assert isinstance(build_model("nature", ATARI, np.dtype("uint8"), 6), NatureCNN)
    assert isinstance(build_model("shallow", ATARI, np.uint8, 6), ShallowCNN)
    impala = build_model("impala", ATARI, np.uint8, 6, kwargs={"channels": [8, 8]})
    assert isinstance(impala, ImpalaResNet) and impala.channels == (8, 8)
    mlp = build_model("mlp", [4], np.float32, np.int64(2), hidden=[32, 16, 8])
    assert mlp.hidden == (32, 16, 8) and mlp.n_actions == 2


def test_interface_check_leaves_rng_and_train_modes_alone():
    class DropoutPolicy(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc, self.drop = nn.Linear(4, 3), nn.Dropout(0.5)

        def forward(self, obs):
            out = self.drop(self.fc(obs))
            return out[:, :2], out[:, 2]

    model = DropoutPolicy()
    model.drop.eval()  # mixed modes must survive the check
    state = torch.get_rng_state()
    registry_module.check_interface("x", model, CARTPOLE, torch.float32, 2)
    assert torch.equal(state, torch.get_rng_state())
    assert model.training and model.fc.training and not model.drop.training


@pytest.mark.parametrize("name, shape, kwargs, match", [
    ("resnet", ATARI, None, r"unknown model 'resnet'.*'nature'.*'impala'"),
    ("", ATARI, None, r"non-empty string"),
    ("nature", CARTPOLE, None, r"'nature'.*image model.*3-D.*\(4,\)"),
    ("impala", (4, 84), None, r"'impala'.*3-D"),
    ("nature", (4, 20, 20), None, r"'nature'.*too small"),
    ("nature", ATARI, {"width": 3}, r"'nature'.*bad kwargs \['width'\]"),
    ("mlp", CARTPOLE, {"hidden": [0]}, r"'mlp'.*>= 1"),
    ("mlp", (4, 0), None, r"dimension < 1"),
    ("no_such_pkg_xyz.mod:make", ATARI, None, r"'no_such_pkg_xyz.mod:make'.*cannot import module"),
    ("fastrl.models:no_such_factory", ATARI, None, r"has no attribute 'no_such_factory'"),
    ("fastrl.models:__all__", ATARI, None, r"not callable"),
    (":make", ATARI, None, r"package.module:factory"),
])
def test_registry_errors_name_the_model(name, shape, kwargs, match):
    with pytest.raises(ValueError, match=match):
        build_model(name, shape, np.uint8, 6, kwargs=kwargs)


def test_registry_rejects_bad_dtype_and_n_actions():
    with pytest.raises(ValueError, match="unsupported observation dtype"):
        build_model("mlp", CARTPOLE, "not-a-dtype", 2)
    with pytest.raises(ValueError, match="n_actions"):
        build_model("mlp", CARTPOLE, np.float32, 0)


CUSTOM_MODULE = "fastrl_test_custom_models"
CUSTOM_SOURCE = textwrap.dedent("""
    import torch
    from torch import nn

    class Linear(nn.Module):
        def __init__(self, obs_shape, n_actions, scale=1.0):
            super().__init__()
            self.scale = scale
            self.fc = nn.Linear(obs_shape[0], n_actions + 1)

        def forward(self, obs):
            out = self.fc(obs.float()) * self.scale
            return out[:, :-1], out[:, -1]

    def factory(obs_shape, n_actions, scale=1.0):
        return Linear(obs_shape, n_actions, scale)

    def not_a_module(obs_shape, n_actions):
        return "a string"

    def wrong_value_shape(obs_shape, n_actions):
        class Bad(nn.Module):
            def forward(self, obs):
                return torch.zeros(obs.shape[0], n_actions), torch.zeros(obs.shape[0], 1)
        return Bad()

    def raises(obs_shape, n_actions):
        raise RuntimeError("boom")

    class Holder:
        make = staticmethod(factory)

    raise_on_import = False
""")


@pytest.fixture
def custom_module(tmp_path, monkeypatch):
    (tmp_path / f"{CUSTOM_MODULE}.py").write_text(CUSTOM_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, CUSTOM_MODULE, raising=False)
    yield CUSTOM_MODULE
    sys.modules.pop(CUSTOM_MODULE, None)


def test_custom_factory_by_module_path(custom_module):
    model = build_model(f"{custom_module}:factory", CARTPOLE, np.float32, 3, kwargs={"scale": 2.0})
    assert type(model).__name__ == "Linear" and model.scale == 2.0
    logits, value = forward_microbatched(model, _vectors(5), 4)
    assert logits.shape == (5, 3) and value.shape == (5,)
    assert build_model(f"{custom_module}:Holder.make", CARTPOLE, np.float32, 3) is not None


@pytest.mark.parametrize("attr, kwargs, match", [
    ("not_a_module", None, r"returned str, not a torch.nn.Module"),
    ("wrong_value_shape", None, r"value \[2\] float32.*value \[2, 1\]"),
    ("raises", None, r"raised RuntimeError: boom"),
    ("factory", {"bogus": 1}, r"raised TypeError.*bogus"),
])
def test_custom_factory_errors(custom_module, attr, kwargs, match):
    with pytest.raises(ValueError, match=rf"model '{custom_module}:{attr}'.*{match}"):
        build_model(f"{custom_module}:{attr}", CARTPOLE, np.float32, 3, kwargs=kwargs)


def test_custom_module_failing_on_import(tmp_path, monkeypatch):
    (tmp_path / "fastrl_test_broken_models.py").write_text("raise ImportError('needs gpu_lib')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=r"cannot import module 'fastrl_test_broken_models'.*needs gpu_lib"):
        build_model("fastrl_test_broken_models:make", CARTPOLE, np.float32, 2)


def test_register_model(scoped_registries):
    scoped_registries(registry_module.MODELS)

    def tiny(obs_shape, n_actions, hidden=8):
        return MLPPolicy(obs_shape, n_actions, hidden=(hidden,))

    register_model("tiny", tiny)
    model = build_model("tiny", CARTPOLE, np.float32, 2, kwargs={"hidden": 5})
    assert isinstance(model, MLPPolicy) and model.hidden == (5,)
    register_model("tiny", tiny)  # the same registration again: harmless (a module imported twice)
    with pytest.raises(ValueError, match="a model named 'tiny' is registered already"):
        register_model("tiny", lambda obs_shape, n_actions: tiny(obs_shape, n_actions))
    register_model("tiny", lambda obs_shape, n_actions: tiny(obs_shape, n_actions), replace=True)
    with pytest.raises(ValueError, match="built-in"):
        register_model("nature", tiny)
    with pytest.raises(ValueError, match="':'"):
        register_model("a:b", tiny)
    with pytest.raises(ValueError, match="not callable"):
        register_model("other", 3)
    with pytest.raises(ValueError, match=r"unknown model 'tinyy'.*'tiny'"):
        build_model("tinyy", CARTPOLE, np.float32, 2)


# ---------------------------------------------------------------- micro-batched forward


# 16 and 32 hold on every CPU measured; 8 holds for the CNNs but not for the MLP on an AVX-512
# Xeon (odd rows of an 8-row GEMM take another path there), hence the engine's default of 16.
@pytest.mark.parametrize("micro_batch", [16, 32])
def test_microbatched_forward_is_batch_invariant_mlp(micro_batch):
    assert_rows_batch_invariant(MLPPolicy(CARTPOLE, 3), _vectors(40), micro_batch, np.random.default_rng(0))


@pytest.mark.parametrize("precision,micro_batch,layer_norm", [
    ("fp32", 16, False),  # the default job's actors
    ("fp32", 8, True),
    # the other combinations hold as these do: the slow tier checks each
    pytest.param("fp32", 8, False, marks=pytest.mark.slow),
    pytest.param("fp32", 16, True, marks=pytest.mark.slow),
    pytest.param("bf16", 16, False, marks=pytest.mark.slow),
    pytest.param("bf16", 8, False, marks=pytest.mark.slow),
    pytest.param("bf16", 16, True, marks=pytest.mark.slow),
    pytest.param("bf16", 8, True, marks=pytest.mark.slow),
])
def test_microbatched_forward_is_batch_invariant_nature_cnn(precision, micro_batch, layer_norm):
    model = NatureCNN(ATARI, 6, layer_norm=layer_norm)
    model.set_precision(precision)
    assert_rows_batch_invariant(model, random_frames(40), micro_batch, np.random.default_rng(1), extra_partitions=1)


def test_bf16_policy_keeps_float32_parameters_and_outputs_close_to_fp32():
    model = NatureCNN(ATARI, 6)
    x = random_frames(8)
    with torch.no_grad():
        reference = model(x)
        model.set_precision("bf16")
        logits, value = model(x)
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert logits.dtype == value.dtype == torch.float32
    torch.testing.assert_close(logits, reference[0], atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(value, reference[1], atol=2e-2, rtol=2e-2)
    with pytest.raises(ValueError, match="fp32"):
        model.set_precision("fp16")


def test_precision_resolution_and_models_without_bf16(monkeypatch):
    from fastrl.models import precision as precision_module

    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    monkeypatch.setattr(precision_module, "cpu_has_amx_bf16", lambda: True)
    assert precision_module.resolve_precision("auto", cpu) == "bf16"
    assert precision_module.resolve_precision("auto", cuda) == "fp32"  # not yet checked for batch invariance there
    monkeypatch.setattr(precision_module, "cpu_has_amx_bf16", lambda: False)
    assert precision_module.resolve_precision("auto", cpu) == "fp32"
    assert precision_module.resolve_precision("bf16", cpu) == "bf16"
    with pytest.raises(ValueError, match="model.precision"):
        precision_module.resolve_precision("half", cpu)
    assert build_model("nature", ATARI, np.uint8, 6, precision="bf16").bf16
    with pytest.raises(ValueError, match="set_precision"):
        build_model("mlp", CARTPOLE, np.float32, 2, precision="bf16")


def test_microbatched_matches_plain_forward_and_handles_edges():
    model = NatureCNN(ATARI, 6)
    x = random_frames(7)
    with torch.no_grad():
        torch.testing.assert_close(forward_microbatched(model, x, 3), model(x))
        logits, value = forward_microbatched(model, x[:0], 4)
        assert logits.shape == (0, 6) and value.shape == (0,)
        strided = random_frames(8)[::2]  # non-contiguous rows
        torch.testing.assert_close(forward_microbatched(model, strided, 3), model(strided.contiguous()))
    with pytest.raises(ValueError, match="micro_batch"):
        forward_microbatched(model, x, 0)


def test_microbatched_reuses_one_staging_buffer_and_mixes_modes():
    model = MLPPolicy(CARTPOLE, 2)
    x = _vectors(9)
    with torch.inference_mode():
        a = forward_microbatched(model, x, 4)
    buffers = dict(microbatch_module._local.buffers)
    with torch.no_grad():  # a buffer made under inference mode must work outside it too
        b = forward_microbatched(model, x[:3], 4)
    assert microbatch_module._local.buffers == buffers
    assert torch.equal(a[0][:3], b[0])


def test_microbatched_with_grad_backpropagates():
    model = MLPPolicy(CARTPOLE, 2)
    logits, value = forward_microbatched(model, _vectors(7), 3)
    (logits.sum() + value.sum()).backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


def test_auto_gives_images_below_36x36_the_impala_resnet():
    from fastrl.models.cnn import ImpalaResNet, NatureCNN
    from fastrl.models.registry import build_model

    assert isinstance(build_model("auto", (4, 84, 84), np.uint8, 6), NatureCNN)
    assert isinstance(build_model("auto", (4, 36, 36), np.uint8, 6), NatureCNN)
    small = build_model("auto", (3, 7, 7), np.uint8, 6)
    assert isinstance(small, ImpalaResNet)
    logits, value = small(torch.zeros((2, 3, 7, 7), dtype=torch.uint8))
    assert logits.shape == (2, 6) and value.shape == (2,)
