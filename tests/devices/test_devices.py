"""Where learners and actors compute (engine.device, engine.actor_device), with and without a GPU (mocked: CI has
none), which GPU each torchrun rank takes, and the backend its learners talk over."""
import os

import pytest
import torch

import fastrl.devices as devices
from fastrl.config import ConfigError, load_config
from fastrl.devices import cuda_index, process_device, resolve_devices
from fastrl.ranks import launch

pytestmark = pytest.mark.unit


def _devices(cuda: bool, *overrides: str) -> tuple[str, str]:
    engine = resolve_devices(load_config(None, list(overrides)), cuda=cuda).engine
    return engine.device, engine.actor_device


@pytest.mark.parametrize("cuda, overrides, expected", [
    (False, (), ("cpu", "cpu")),  # the default: "auto" on a machine without a GPU trains on the CPU, as before
    (True, (), ("cuda", "cuda")),  # ... and on the GPU where there is one
    (True, ("engine.device='cpu'",), ("cpu", "cpu")),
    (True, ("engine.actor_device='cpu'",), ("cuda", "cpu")),  # actors on the CPU, learner on the GPU
    (True, ("engine.device='cpu'", "engine.actor_device='cuda'", "engine.inline_actors=false"), ("cpu", "cuda")),
    (True, ("engine.inline_actors=true",), ("cuda", "cpu")),  # inline actors live in the executors: CPU
    (True, ("engine.serial=true", "engine.inline_actors=true", "engine.actor_device='cuda'"), ("cuda", "cuda")),
])
def test_auto_takes_the_gpu_where_torch_sees_one(cuda, overrides, expected):
    assert _devices(cuda, *overrides) == expected


@pytest.mark.parametrize("overrides, message", [
    (("engine.device='cuda'",), "engine.device = 'cuda' but torch sees no CUDA device; use 'cpu' or 'auto'"),
    (("engine.actor_device='cuda'", "engine.device='cpu'"), "engine.actor_device = 'cuda' but torch sees no CUDA"),
])
def test_a_gpu_asked_for_where_there_is_none_is_refused_by_key(overrides, message):
    with pytest.raises(ConfigError, match=message):
        _devices(False, *overrides)


def test_inline_actors_on_a_gpu_are_refused_before_anything_starts():
    with pytest.raises(ConfigError, match="inline actors run inside the executors"):
        _devices(True, "engine.inline_actors=true", "engine.actor_device='cuda'")


def test_a_config_already_placed_is_returned_as_it_is():
    config = resolve_devices(load_config(None, []), cuda=False)
    assert resolve_devices(config, cuda=False) is config


def test_resolving_asks_torch_only_when_a_key_could_use_a_gpu(monkeypatch):
    asked = []
    monkeypatch.setattr(devices, "cuda_available", lambda: asked.append(1) or True)
    assert resolve_devices(load_config(None, ["engine.device='cpu'", "engine.actor_device='cpu'"])).engine.device \
        == "cpu"
    assert asked == []
    assert resolve_devices(load_config(None, [])).engine.device == "cuda"
    assert asked == [1]


@pytest.mark.parametrize("local_rank, count, expected", [(0, 1, 0), (1, 2, 1), (3, 2, 1), (5, 8, 5)])
def test_each_torchrun_rank_takes_the_gpu_of_its_local_rank(local_rank, count, expected):
    assert cuda_index(local_rank, count) == expected
    assert process_device("cuda", local_rank, count) == torch.device("cuda", expected)
    assert process_device("cpu", local_rank, count) == torch.device("cpu")


def test_no_gpu_to_give_a_rank_is_a_clear_error():
    with pytest.raises(ConfigError, match="torch sees no CUDA device"):
        process_device("cuda", 0, 0)


TORCHRUN = {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "localhost", "MASTER_PORT": "29500"}


def _gpus(monkeypatch, count: int) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)


def test_the_launch_carries_local_rank_to_every_process_of_the_rank(monkeypatch):
    _gpus(monkeypatch, 0)
    config = load_config("configs/cartpole_sync.toml")
    ranks = launch.launched(config, {**TORCHRUN, "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"})
    assert ranks is not None and ranks.local_rank == 1
    assert launch.launched(config, TORCHRUN).local_rank == 0  # a launcher that sets no LOCAL_RANK: the first GPU


@pytest.mark.parametrize("gpus, local_world, overrides, expected", [
    (0, 2, (), "gloo"),  # no GPU: the learners are on the CPU
    (2, 2, (), "nccl"),  # a GPU per rank
    (2, 2, ("engine.device='cpu'",), "gloo"),  # a GPU the run does not use
    (1, 2, (), "gloo"),  # two ranks on one GPU: NCCL refuses two members on one device
    (4, 2, ("engine.mode='gala'", "engine.learners=2", "engine.envs=8"), "nccl"),  # 4 learners, 4 GPUs
    (2, 2, ("engine.mode='gala'", "engine.learners=2", "engine.envs=8"), "gloo"),  # 4 learners, 2 GPUs
    (1, 2, ("dist.backend='gloo'",), "gloo"),
])
def test_the_backend_is_nccl_where_every_learner_has_a_gpu_of_its_own(monkeypatch, gpus, local_world, overrides,
                                                                      expected):
    _gpus(monkeypatch, gpus)
    config = load_config("configs/cartpole_sync.toml", list(overrides))
    ranks = launch.launched(config, {**TORCHRUN, "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": str(local_world)})
    assert ranks.backend == expected


def test_nccl_asked_for_without_a_gpu_is_refused(monkeypatch):
    _gpus(monkeypatch, 0)
    with pytest.raises(ConfigError, match="dist.backend = 'nccl' needs CUDA"):
        launch.launched(load_config("configs/cartpole_sync.toml", ["dist.backend='nccl'"]), TORCHRUN)


def test_configuring_a_cpu_process_changes_nothing_in_torch():
    before = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32,
              torch.are_deterministic_algorithms_enabled())
    devices.configure_cuda(load_config(None, []), torch.device("cpu"))
    after = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32,
             torch.are_deterministic_algorithms_enabled())
    assert after == before


@pytest.fixture
def cuda_flags_restored():
    """torch's TF32 and cuDNN switches as they were, set back through their own setters: they are properties of
    module objects, which monkeypatch cannot restore on every pytest (it deletes what is not in ``vars()``)."""
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    saved = (matmul.allow_tf32, cudnn.allow_tf32, cudnn.benchmark, cudnn.deterministic)
    yield
    matmul.allow_tf32, cudnn.allow_tf32, cudnn.benchmark, cudnn.deterministic = saved


@pytest.mark.parametrize("tf32, deterministic", [(False, True), (True, False)])
def test_a_cuda_process_sets_tf32_and_cudnn_as_the_config_says(monkeypatch, cuda_flags_restored, tf32, deterministic):
    """Mocked where CUDA itself would be called: the flags are torch's own Python-side switches."""
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "mock GPU")
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    chosen = []
    monkeypatch.setattr(torch, "use_deterministic_algorithms", lambda on, warn_only: chosen.append((on, warn_only)))
    config = load_config(None, [f"model.tf32={str(tf32).lower()}",
                                f"engine.deterministic_cuda={str(deterministic).lower()}"])
    devices.configure_cuda(config, torch.device("cuda", 0))
    assert torch.backends.cuda.matmul.allow_tf32 is tf32 and torch.backends.cudnn.allow_tf32 is tf32
    assert torch.backends.cudnn.deterministic is deterministic and torch.backends.cudnn.benchmark is not deterministic
    assert chosen == ([(True, True)] if deterministic else [])
    assert (os.environ.get("CUBLAS_WORKSPACE_CONFIG") == devices.CUBLAS_WORKSPACE) is deterministic


def test_a_resolved_device_is_read_without_touching_cuda(monkeypatch):
    """An executor builds its inline actor's policy from a run whose learner is on CUDA: nothing may initialise
    the CUDA driver in it (executors never hold CUDA)."""
    from fastrl.envs import probe_env
    from fastrl.models.policy import build_policy

    def touched(*args, **kwargs):
        raise AssertionError("CUDA was asked")

    monkeypatch.setattr(devices, "cuda_available", touched)
    monkeypatch.setattr(torch.cuda, "device_count", touched)
    monkeypatch.setattr(torch.cuda, "is_available", touched)
    assert devices.device_kind("cuda") == "cuda" and devices.device_kind("cpu") == "cpu"
    config = load_config("configs/cartpole_sync.toml", ["engine.device='cuda'", "engine.actor_device='cpu'"])
    policy = build_policy(probe_env(config.env), config)  # model.precision 'auto' read for a CUDA learner: fp32
    assert all(p.device.type == "cpu" for p in policy.parameters())
