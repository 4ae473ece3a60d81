"""``model.compile``: the policy's forward (and so its backward) through ``torch.compile``.

On 2 CPU cores the learner's training step of the Nature CNN is the bottleneck of every Atari run,
and the actors' forward is the next cost. Inductor fuses what eager PyTorch runs as separate passes
over the batch: the uint8-to-float cast, the running normalisation and its clip, the ReLUs and their
backward masks (in eager the normaliser alone took a sixth of a training step). The convolutions
stay oneDNN's. Measured on a 2-vCPU AMD EPYC (Zen 4, no AMX), fp32, torch 2.13, with
``fastrl bench learner`` (which prints these numbers for any config): a 256-sample PPO step of the
Nature CNN with normalised inputs 1.57x faster on 2 threads (1.38x on 1), an 8-row actor forward
1.64x (1.22x); in bf16 on the same CPU 1.05x and 1.08x (less to fuse beside faster convolutions).

What compiling must not change, and why it does not:

- **Checkpoints and ``load_policy``.** ``nn.Module.compile`` compiles in place: the module, its
  ``state_dict`` keys and its parameters are the eager ones, so a compiled run's checkpoint loads
  in an eager process (``fastrl eval``, ``load_policy``, a resume with ``model.compile = false``).
- **Batch invariance.** A graph is compiled for the shapes it sees: the actors forward only their
  fixed micro-batch, so they get one graph of one static shape, whose kernels treat rows alike wherever a row sits
  (``tests/models/test_compiling.py`` permutes rows, as the eager tests do). The compiled forward's bits
  may differ from the eager one's; a run is deterministic because all its actors run the same graph.
- **No process left behind.** Inductor compiles in a pool of worker processes when it may use more
  than one thread; a worker killed mid-compile could orphan them, so compiling uses one thread
  (``compile_threads = 1``), inside the process that asked.

Where it applies: the built-in image models (the CNNs and ``multi``). ``"auto"`` turns it on when the
run is long enough to pay its start-up back (``COMPILE_PAYS_FRAMES``); an MLP's forward is too small for
fusion to pay. ``true`` compiles any model on any device, refused before the run starts where torch cannot
compile (no dynamo for this Python, no C++ compiler for inductor, no Triton for CUDA).

On CUDA (measured on an H200 with 16 cores, torch 2.11, fp32, ``fastrl bench learner --device cuda``)
the cost is launches, not arithmetic: a 16-row actor forward ran at 11.6K rows/s eager, 14.3K compiled
and 91.9K compiled with CUDA graphs (``compile_mode = "reduce-overhead"``: the fixed micro-batch shape
recorded once, replayed as one launch); a 256-sample PPO step at 35.8K samples/s eager, 29.1K compiled
and 44.7K with CUDA graphs. The default job's actors were its bottleneck: eager it trained at 10.5K
frames/s and had not reached Pong 18 after 166 s of training; with CUDA graphs (actors and learner) it
reached 18 in 53 s at 16.8K frames/s, the learner 3-4% of the time. So ``compile_mode = "auto"``
replays CUDA graphs in the CUDA actors and leaves a CUDA learner eager (the learner was not the limit,
and its many update rules and modes are not all proven under CUDA graphs' reuse of output memory);
``"reduce-overhead"`` set by hand records them in the learner too. ``"auto"`` leaves recurrent
(``model.lstm``) models eager on CUDA: not measured there.

Inductor caches what it compiled
(``TORCHINDUCTOR_CACHE_DIR``, by default under the system's temporary folder), so a second run of the
same model on the same machine starts in seconds (measured: 20 s for the first PPO step's compile, 2.5 s
from the cache).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import logging
import shutil
import sys

import torch
from torch import nn

from fastrl.errors import ConfigError
from fastrl.schema import AUTO, Config

log = logging.getLogger(__name__)

# "auto" compiles a run of at least this many env frames: compiling costs ~20 s of start-up without
# inductor's cache (~3 s with it); a 1.4x faster learner at ~1.6K frames/s wins that back within ~150K frames,
# and a run of 1M frames or more is long enough however the speed-up falls on another CPU.
COMPILE_PAYS_FRAMES = 1_000_000


@functools.cache
def compile_unavailable(device_type: str = "cpu") -> str | None:
    """Why ``torch.compile`` cannot compile for ``device_type`` here, or None when it can."""
    import torch._dynamo

    if not torch._dynamo.is_dynamo_supported():
        return (
            f"torch {torch.__version__} has no torch.compile (dynamo) for Python "
            f"{sys.version_info.major}.{sys.version_info.minor} on {sys.platform}"
        )
    if device_type == "cuda":
        from torch.utils._triton import has_triton

        return None if has_triton() else "inductor needs Triton for CUDA and it is not installed"
    compiler = _cpp_compiler()
    return (
        None
        if compiler
        else ("inductor compiles C++ for the CPU and no C++ compiler was found (install g++, or set CXX to one)")
    )


def _cpp_compiler() -> str | None:
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler

        return shutil.which(get_cpp_compiler())
    except Exception:  # torch's own search raised: no compiler it can use
        return None


def compiles(config: Config, device: torch.device, image_model: bool) -> bool:
    """Whether a run of ``config`` compiles its policy on ``device``; ``image_model``: a built-in CNN
    (or ``multi``), the models ``"auto"`` compiles. ``true`` where torch cannot compile: ``ConfigError``."""
    setting = config.model.compile
    if setting is False:
        return False
    if setting is not True and not (image_model and config.run.total_frames >= COMPILE_PAYS_FRAMES):
        return False  # "auto" leaves this run eager whatever torch can do: asking would import dynamo (~1-3 s)
    reason = compile_unavailable(device.type)
    if setting is True:
        if reason:
            raise ConfigError(
                f"model.compile = true, but torch.compile cannot run here: {reason}; "
                f"set model.compile = false (or 'auto', which falls back to eager)"
            )
        return True
    if reason:
        log.info("model.compile = 'auto': eager, since %s", reason)
        return False
    # CUDA graphs' output reuse against carried LSTM states: not measured on a GPU
    return not (device.type == "cuda" and config.model.lstm)


def resolve_compile(config: Config, device: torch.device, image_model: bool) -> Config:
    """``config`` with ``model.compile`` a bool (what every process of the run then does; config.toml
    records it); ``image_model``: the run's policy is a built-in CNN (or ``multi``). CUDA graphs where no
    process computes on CUDA: ``ConfigError``."""
    if config.model.compile_mode == "reduce-overhead" and "cuda" not in (
        config.engine.device,
        config.engine.actor_device,
    ):
        raise ConfigError(
            "model.compile_mode = 'reduce-overhead' records CUDA graphs, but no process of this run computes on "
            f"CUDA (engine.device = {config.engine.device!r}, engine.actor_device = {config.engine.actor_device!r}): "
            "use 'default'"
        )
    setting = compiles(config, device, image_model)
    if config.model.compile == AUTO:
        log.info("model.compile = 'auto': %s", "compiled (torch.compile)" if setting else "eager")
    return dataclasses.replace(config, model=dataclasses.replace(config.model, compile=setting))


def compile_mode_for(config: Config, device: torch.device, role: str) -> str | None:
    """The torch.compile mode a process of ``role`` (``"actor"`` or ``"learner"``) computing on ``device``
    compiles the policy in, or None for eager: ``model.compile`` resolved (``resolve_compile``), and
    ``model.compile_mode = "auto"`` as the module's doc says."""
    if config.model.compile is not True:
        return None
    mode = config.model.compile_mode
    if mode != AUTO:
        return mode
    if device.type != "cuda":
        return "default"
    return "reduce-overhead" if role == "actor" else None


def compile_policy(model: nn.Module, mode: str | None) -> nn.Module:
    """``model``, compiled in place (its forward and backward) in torch.compile's ``mode``, or left eager
    for None (``compile_mode_for``). A copy of it must be made with ``compiled_copy``."""
    if mode is not None:
        model.fastrl_compile_mode = mode  # what compiled_copy compiles a copy in
        import torch._inductor.config as inductor

        inductor.compile_threads = 1  # no compile worker pool: nothing to orphan if this process is killed
        # dynamic=None: a graph starts with static shapes and only a shape seen to change becomes dynamic.
        # The actors forward one fixed micro-batch shape, so theirs stays static (batch invariance); the
        # learner's minibatch and bootstrap shapes differ, and under torchrun a rank's share of a minibatch
        # varies, which a static graph would recompile for every time.
        model.compile(mode=None if mode == "default" else mode)
    return model


def compiled_copy(model: nn.Module) -> nn.Module:
    """A deep copy of ``model``, compiled as ``model`` is. ``copy.deepcopy`` drops what ``nn.Module.compile``
    installed (torch 2.13), so a plain copy runs eager: hts's second weight slot in the actors and PPO's trainee
    in hts ran so, their forward ~1.2x and a PPO step ~1.5x slower than the compiled original's. The copy's
    graphs are the original's (same code, same shapes), so inductor's cache serves them."""
    return compile_policy(copy.deepcopy(model), getattr(model, "fastrl_compile_mode", None))
