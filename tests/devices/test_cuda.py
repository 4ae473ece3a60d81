"""The engine on a GPU: runs whose actors and learner compute there, the determinism the docs promise for a GPU
(docs/gpu.md), the learner's uploads and deferred checks on the device.

Marked ``cuda``: skipped where torch sees no GPU (CI), run by ``bench/device_check.sh`` on a GPU machine. With
``FASTRL_TEST_DEVICE=cpu`` they run on the CPU instead: the device check's dry run, which proves these tests
before any GPU time is spent on them.
"""
import os

import numpy as np
import pytest
import torch

import fastrl
import fastrl.buffers.device_storage as device_storage
from fastrl.config import tomllib  # tomli on Python 3.10
from fastrl.models.cnn import NatureCNN
from fastrl.models.mlp import MLPPolicy
from fastrl.process.faults import RunFailed
from fastrl.runs.checkpoint import load_checkpoint
from tests.helpers.batch_invariance import ATARI, assert_rows_batch_invariant, random_frames
from tests.helpers.runs import assert_cleaned_up, cartpole, model_digest

DEVICE = os.environ.get("FASTRL_TEST_DEVICE", "cuda")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.engine,
    pytest.mark.skipif(DEVICE == "cuda" and not torch.cuda.is_available(), reason="torch sees no CUDA device"),
]

# a short Pong PPO job laid out with actor processes, the device given explicitly
PONG = ["model.compile=false", "run.progress=false", "run.tensorboard=false", "engine.envs=8", "engine.rollout=32",
        "engine.inline_actors=false", f"engine.device='{DEVICE}'", f"engine.actor_device='{DEVICE}'"]
TWO_UPDATES = "run.total_frames=2048"  # 8 envs x 32 steps x frame skip 4 = 1024 frames an update




def test_a_run_trains_with_its_actors_and_learner_on_the_device(tmp_path):
    summary = fastrl.train("configs/pong_sync.toml", [*PONG, TWO_UPDATES, "engine.executors=2", "engine.actors=1"],
                           run_dir=tmp_path / "run")
    assert summary["status"] == "complete" and summary["updates"] == 2
    engine = tomllib.loads((tmp_path / "run" / "config.toml").read_text())["engine"]
    # "auto" micro-batches: 8 rows on a CPU; on a GPU the learner's 8 envs in one forward
    assert (engine["device"], engine["actor_device"], engine["micro_batch"]) == (DEVICE, DEVICE, 8)
    checkpoint = load_checkpoint(tmp_path / "run")
    assert all(bool(torch.isfinite(t).all()) for t in checkpoint["model"].values())


@pytest.mark.parametrize("config", ["configs/pong_sync.toml", "configs/pong_hts.toml"])
def test_parameters_are_bit_identical_across_actor_and_executor_layouts_on_the_device(tmp_path, config):
    """The determinism rule on a GPU: the same seed with 1 or 2 actor processes and 1, 2 or 4 executors, their
    batches falling as they may, trains the same bits (fixed micro-batches, deterministic kernels)."""
    digests = set()
    for executors, actors in ((1, 1), (2, 2), (4, 1)):
        run_dir = tmp_path / f"{executors}x{actors}"
        summary = fastrl.train(config, [*PONG, TWO_UPDATES, f"engine.executors={executors}",
                                        f"engine.actors={actors}", "engine.step_delay_s=0.002"], run_dir=run_dir)
        assert summary["status"] == "complete"
        digests.add(model_digest(run_dir))
    assert len(digests) == 1


@pytest.mark.skipif(DEVICE != "cuda",
                    reason="CUDA graphs: the CPU's compiled layouts are tests/models/test_compiling.py's")
@pytest.mark.parametrize("config", ["configs/pong_sync.toml", "configs/pong_hts.toml"])
def test_cuda_graph_actors_train_the_same_bits_in_every_layout(tmp_path, config):
    """model.compile's "auto" mode on CUDA: the actors replay one recorded graph of their fixed micro-batch,
    in any layout, in both deterministic schedules (hts's actors hold two weight versions, each its own graph;
    async is nondeterministic by design, DESIGN.md, so it has no such test)."""
    digests = set()
    for executors, actors in ((1, 1), (2, 2)):
        run_dir = tmp_path / f"{executors}x{actors}"
        summary = fastrl.train(config, [*PONG, TWO_UPDATES, "model.compile=true", f"engine.executors={executors}",
                                        f"engine.actors={actors}", "engine.step_delay_s=0.002"], run_dir=run_dir)
        assert summary["status"] == "complete"
        digests.add(model_digest(run_dir))
    assert len(digests) == 1


@pytest.mark.parametrize("config", ["configs/pong_sync.toml", "configs/pong_hts.toml"])
def test_a_run_stopped_at_a_checkpoint_resumes_exactly_on_the_device(tmp_path, config):
    """Checkpoints of CUDA tensors load on the CPU and back onto the device; the resumed half goes on bit for bit
    (the optimizer state and hts's pending trainee included)."""
    horizon = "algo.lr_anneal_frames=10_000_000"  # the default job anneals over run.total_frames: fix it for both
    whole = tmp_path / "whole"
    fastrl.train(config, [*PONG, horizon, "run.total_frames=4096", "engine.executors=2", "engine.actors=1"],
                 run_dir=whole)
    half = tmp_path / "half"
    fastrl.train(config, [*PONG, horizon, TWO_UPDATES, "engine.executors=1", "engine.actors=1"], run_dir=half)
    assert load_checkpoint(half)["exact"]
    summary = fastrl.train(resume=half, overrides=["run.total_frames=4096", "engine.executors=2"])
    assert summary["frames"] == 4096
    assert model_digest(half) == model_digest(whole)


def test_every_storage_field_reaches_the_device_once_per_update(tmp_path, monkeypatch):
    counts = []
    real_of, real_upload = device_storage.Uploads.of, device_storage.Uploads.upload

    def of(self, arrays):
        counts.append([])
        return real_of(self, arrays)

    def upload(self, name, array):
        counts[-1].append((name, self.device.type))
        return real_upload(self, name, array)

    monkeypatch.setattr(device_storage.Uploads, "of", of)
    monkeypatch.setattr(device_storage.Uploads, "upload", upload)
    summary = fastrl.train("configs/pong_sync.toml", [*PONG, "run.total_frames=3072", "engine.serial=true",
                                                      "engine.inline_actors=false"], run_dir=tmp_path / "run")
    assert summary["updates"] == 3 and len(counts) == 4  # the warm-up's storage, then one per update
    for fields in counts:
        names = [name for name, _ in fields]
        assert len(names) == len(set(names)) and all(kind == DEVICE for _, kind in fields), fields


def test_a_bad_update_on_the_device_is_rolled_back_whole(tmp_path):
    config, base = cartpole(tmp_path, "algo.name='ppo'", "algo.lr=3e38", "run.total_frames=10_000_000",
                            "run.max_seconds=60", f"engine.device='{DEVICE}'", f"engine.actor_device='{DEVICE}'")
    with pytest.raises(RunFailed) as info:
        fastrl.train(config, base, run_dir=tmp_path / "run")
    assert "non-finite parameters after an optimizer step" in str(info.value)
    assert assert_cleaned_up(tmp_path / "run")["updates"] == 0


@pytest.mark.parametrize("micro_batch", [8, 16, 64])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_cnn_forward_is_batch_invariant_in_micro_batches_on_the_device(precision, micro_batch):
    from fastrl.config import load_config
    from fastrl.devices import configure_cuda

    configure_cuda(load_config(None, []), torch.device(DEVICE))  # the engine's flags: no TF32, deterministic
    torch.manual_seed(0)
    model = NatureCNN(ATARI, 6)
    model.set_precision(precision)
    model = model.to(DEVICE).eval()
    assert_rows_batch_invariant(model, random_frames(40).to(DEVICE), micro_batch, np.random.default_rng(1),
                                extra_partitions=1)


@pytest.mark.parametrize("micro_batch", [16, 64])
def test_the_mlp_forward_is_batch_invariant_in_micro_batches_on_the_device(micro_batch):
    torch.manual_seed(0)
    model = MLPPolicy((4,), 3).to(DEVICE).eval()
    x = torch.randn((40, 4), generator=torch.Generator().manual_seed(1)).to(DEVICE)
    assert_rows_batch_invariant(model, x, micro_batch, np.random.default_rng(0))
