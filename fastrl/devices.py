"""Where each process computes, and how a process that computes on a GPU is set up.

- ``engine.device`` places the learners, ``engine.actor_device`` the actor processes. ``"auto"``
  is CUDA where torch sees a GPU, else the CPU; ``actor_device = "auto"`` follows ``engine.device``,
  except with inline actors, which run inside the executors: executors never hold a CUDA context
  (a context costs ~500 MB of GPU memory and a second of start-up per process, and an executor
  forked with one could not use it). Both are resolved once, in the main process, before anything
  starts (``resolve_devices``); the run's ``config.toml`` records ``"cpu"`` or ``"cuda"``.
- Under ``torchrun`` every rank's processes use the GPU its ``LOCAL_RANK`` names (modulo the GPUs
  this process sees), so the ranks of a multi-GPU node spread over its GPUs (``process_device``).
- A process that computes on CUDA sets the numerics the run's config names before its first CUDA
  call (``configure_cuda``): TF32 off unless ``model.tf32``, and with ``engine.deterministic_cuda``
  cuDNN's deterministic kernels without autotuning and ``torch.use_deterministic_algorithms``, so a
  row's output depends on its input, the weights and the micro-batch size only.

The main process only asks whether a GPU exists (``torch.cuda.is_available``), which creates no
context; workers are forked from a server that never touched CUDA (``fastrl.process.fork_server``).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import warnings
from typing import TYPE_CHECKING

from fastrl.errors import ConfigError
from fastrl.schema import AUTO

if TYPE_CHECKING:
    import torch

    from fastrl.schema import Config, EngineConfig

log = logging.getLogger(__name__)

DEVICES = ("cpu", "cuda", AUTO)
# cuBLAS is deterministic only with a fixed workspace (docs: "Reproducibility", torch.use_deterministic_algorithms)
CUBLAS_WORKSPACE = ":4096:8"


def cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def resolve_devices(config: Config, cuda: bool | None = None) -> Config:
    """``config`` with ``engine.device`` and ``engine.actor_device`` each ``"cpu"`` or ``"cuda"``; ``cuda``:
    whether torch sees a GPU (default: ask it). A GPU asked for where there is none: ``ConfigError``."""
    engine = config.engine
    if cuda is None:  # a run on the CPU alone need not ask
        cuda = (engine.device, engine.actor_device) != ("cpu", "cpu") and cuda_available()
    resolved = resolved_engine(engine, cuda)
    return config if resolved is engine else dataclasses.replace(config, engine=resolved)


def resolved_engine(engine: EngineConfig, cuda: bool) -> EngineConfig:
    """``engine`` with both device keys resolved on a machine with (``cuda``) or without a GPU; the same
    object when nothing was left to resolve."""
    learner = _resolve(engine.device, cuda, "engine.device")
    if engine.actor_device == AUTO:
        actors = "cpu" if engine.inline_actors is True else learner
    else:
        actors = _resolve(engine.actor_device, cuda, "engine.actor_device")
    if actors == "cuda" and engine.inline_actors is True and not engine.serial:
        raise ConfigError(
            "engine.actor_device = 'cuda' with engine.inline_actors = true would give every executor a CUDA "
            "context (inline actors run inside the executors): use actor processes (engine.inline_actors = false) "
            "or engine.actor_device = 'cpu'"
        )
    if (learner, actors) == (engine.device, engine.actor_device):
        return engine
    return dataclasses.replace(engine, device=learner, actor_device=actors)


def _resolve(name: str, cuda: bool, key: str) -> str:
    if name == AUTO:
        return "cuda" if cuda else "cpu"
    if name == "cuda" and not cuda:
        raise ConfigError(f"{key} = 'cuda' but torch sees no CUDA device; use 'cpu' or 'auto'")
    return name


def uses_cuda(config: Config) -> bool:
    """Whether any process of a resolved ``config`` computes on CUDA."""
    return "cuda" in (config.engine.device, config.engine.actor_device)


def cuda_index(local_rank: int, count: int) -> int:
    """The GPU of the processes of the rank with ``LOCAL_RANK`` ``local_rank`` on a node where each process
    sees ``count`` GPUs: one GPU per rank while there are as many, shared round robin beyond."""
    if count < 1:
        raise ConfigError("a CUDA device was asked for, but torch sees no CUDA device")
    return local_rank % count


def local_rank(environ=os.environ) -> int:
    """``LOCAL_RANK`` as torchrun sets it (0 without torchrun)."""
    return int(environ.get("LOCAL_RANK", 0))


def device_kind(name: str) -> str:
    """``"cpu"`` or ``"cuda"`` for a device key's value, without touching CUDA once it is resolved (an
    executor building its inline actor's policy must not initialise the CUDA driver)."""
    if name == AUTO:
        return "cuda" if cuda_available() else "cpu"
    return name


def process_device(name: str, rank: int = 0, count: int | None = None) -> torch.device:
    """The torch device of a process that computes on ``name`` (a resolved ``"cpu"`` or ``"cuda"``, or
    ``"auto"``) for the rank with local rank ``rank``; ``count``: the GPUs this process sees (default: ask)."""
    import torch

    if name == AUTO:
        name = "cuda" if cuda_available() else "cpu"
    if name == "cpu":
        return torch.device("cpu")
    if name != "cuda":
        raise ConfigError(f"engine.device = {name!r}: allowed values are {', '.join(map(repr, DEVICES))}")
    if count is None:
        count = torch.cuda.device_count()
    return torch.device("cuda", cuda_index(rank, count))


def configure_cuda(config: Config, device: torch.device) -> None:
    """Set this process's CUDA numerics as the run's config says, before its first CUDA computation; a CPU
    device leaves torch as it is."""
    import torch

    if device.type != "cuda":
        return
    if device.index is None:  # plain "cuda" names the current GPU; set_device wants its index
        device = torch.device("cuda", torch.cuda.current_device())
    torch.cuda.set_device(device)
    tf32 = bool(config.model.tf32)
    torch.backends.cuda.matmul.allow_tf32 = tf32  # torch's default is off for matmuls ...
    torch.backends.cudnn.allow_tf32 = tf32  # ... and on for convolutions: set both, as the config says
    if not tf32:  # off as the config says (the log line below records it): inductor's advice to turn it on is noise
        warnings.filterwarnings("ignore", message="TensorFloat32 tensor cores", category=UserWarning)
    deterministic = bool(config.engine.deterministic_cuda)
    torch.backends.cudnn.benchmark = not deterministic  # autotuning picks kernels by timing: run to run they differ
    torch.backends.cudnn.deterministic = deterministic
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
        # warn_only: an op without a deterministic CUDA kernel warns (logged once) rather than ending the run
        torch.use_deterministic_algorithms(True, warn_only=True)
    log.info(
        "CUDA %s (%s): tf32 %s, deterministic kernels %s",
        device,
        torch.cuda.get_device_name(device),
        "on" if tf32 else "off",
        "on" if deterministic else "off",
    )
