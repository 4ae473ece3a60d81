"""How fast a config's model learns and acts on this machine: the numbers the learner's settings decide from.

    fastrl bench learner [CONFIG] [--set k=v] [--seconds S] [--threads 1 2] [--device auto|cpu|cuda]

For the config's model (built as the run builds it, from its env's spaces), one JSON line:

- ``train``: samples/s of one training step (forward, PPO's clipped loss, backward, gradient clip,
  the config's optimizer) on a minibatch of the size the config's algorithm learns from (PPO: a
  rollout's rows / ``algo.minibatches``; A2C: the whole rollout; IMPALA: ``batch_slots`` x rollout),
  eager and compiled (``model.compile``), in fp32 and, where the CPU has native bf16 (AMX-BF16 or
  AVX512-BF16), in bf16, on each thread count;
- ``forward``: obs/s of the actors' fixed micro-batch forward (``engine.micro_batch`` rows, no grad),
  the same grid;
- ``frames_s_cap``: the env frames/s the learner alone allows at each setting (samples/s / the passes
  PPO makes over a rollout x frame skip): an upper bound of the whole job's speed, where the learner is
  the bottleneck (2 CPU cores, Atari);
- ``speedup``: compiled over eager per precision and thread count; ``compile_auto``: what
  ``model.compile = "auto"`` decides for this config here; ``machine``: the CPU, its bf16 units, torch;
- ``gflops`` and ``of_gemm`` on every row: the floating-point work done per second (``flops_per_sample``,
  counted by ``torch.utils.flop_counter`` for the eager step: matrix products and convolutions, forward and
  backward) and its share of ``gemm_gflops``, a square matrix product's GFLOP/s at the same precision and
  thread count, measured in this process: the CPU's reachable dense peak, the reference that says how much
  faster the step could still get on this machine without fewer FLOPs per sample.

On CUDA (``--device cuda``, or ``auto`` where torch sees a GPU) the same grid with the GPU's settings: one
thread (it only feeds the GPU), fp32 and bf16, eager, compiled (``model.compile_mode = "default"``) and
compiled with CUDA graphs (``"reduce-overhead"``), each timed to the GPU's last kernel; the actors' forward
at the GPU's micro-batch (a learner's envs); ``gemm_gflops`` a 8192-square product's on the GPU; ``gpu``: its
name; ``tf32`` as the config sets it.

The step is PPO's loss for every algorithm: the model's forward and backward are the cost that
compiling and precision change; A2C's and V-trace's loss terms cost little beside them. Each setting is
timed for ``--seconds`` after a warm-up (which includes compiling: ``compile_s``), one after the other in
this process; ratios are taken between settings of this same invocation.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence

from fastrl.config import Config, ConfigError

WARM_UP_STEPS = 3
# The reference product's side: 2.1 GFLOP a product, big enough for the BLAS to reach its peak on any core
# count, small enough (4 MiB an operand in fp32) to be timed in a second on one core.
GEMM_SIDE = 1024
GPU_GEMM_SIDE = 8192  # a GPU reaches its peak only on far bigger products (1.1 TFLOP each)


def measure(
    config: str | None = None,
    overrides: Sequence[str] = (),
    seconds: float = 3.0,
    threads: list[int] | None = None,
    device: str = "auto",
    only: list[str] | None = None,
    own_process: bool = False,
) -> dict:
    """``only``: the precisions to time (default: fp32, and bf16 where the device has bf16 units).
    ``own_process`` (the CLI's): this process may take ``engine.keep_freed_memory`` as a learner does."""
    import torch

    import fastrl
    from fastrl.bench.machine import BF16_FLAGS, machine_info
    from fastrl.devices import configure_cuda, process_device, resolve_devices
    from fastrl.envs.registry import probe_env
    from fastrl.models.compiling import compiles
    from fastrl.models.policy import build_policy
    from fastrl.process.auto_layout import Machine, choose_learner_threads, choose_micro_batch
    from fastrl.process.malloc import keep_freed_memory

    resolved = fastrl.api.resolve_config(config, [*overrides, f"engine.device='{device}'"])
    if resolved.model.lstm:
        raise ConfigError(
            f"fastrl bench learner measures feed-forward models; model.lstm = {resolved.model.lstm}: "
            "add --set model.lstm=0 for its encoder's numbers"
        )
    resolved = resolve_devices(resolved)  # a GPU asked for where there is none: ConfigError
    on = process_device(resolved.engine.device)
    configure_cuda(resolved, on)  # TF32 and cuDNN as a run of this config sets them
    info = probe_env(resolved.env)
    machine = machine_info()
    kept = own_process and resolved.engine.keep_freed_memory and keep_freed_memory()
    probe = build_policy(info, resolved, "cpu")
    image_model = hasattr(probe, "set_precision")
    detected = Machine.detect()
    if on.type == "cuda":
        threads = [1]  # a CUDA learner's thread feeds the GPU (choose_learner_threads)
        precisions = ["fp32", "bf16"] if image_model else ["fp32"]
        modes = [None, "default", "reduce-overhead"]
    else:
        threads = threads or sorted(
            {1, choose_learner_threads(resolved.engine, detected, image_model), machine["cores"]}
        )
        precisions = ["fp32"] + (["bf16"] if image_model and any(machine[f] for f in BF16_FLAGS) else [])
        modes = [None, "default"]
    if only:
        precisions = [p for p in only if p == "fp32" or image_model]  # bf16 is the built-in CNNs' only
    micro_batch = choose_micro_batch(resolved.engine, detected, image_model)
    batch, passes = _minibatch(resolved)
    frame_skip = resolved.env.atari.frame_skip if _is_atari(resolved) else 1
    flops = _flops_per_sample(info, resolved, batch, micro_batch)
    rows: dict[str, list[dict]] = {"train": [], "forward": []}
    gemm: list[dict] = []
    for precision in precisions:
        config_p = dataclasses.replace(resolved, model=dataclasses.replace(resolved.model, precision=precision))
        for count in threads:
            torch.set_num_threads(count)
            peak = _gemm_gflops(precision, seconds, on)
            gemm.append({"precision": precision, "threads": count, "gflops": round(peak, 1)})
            for mode in modes:
                setting = {"precision": precision, "threads": count, "compiled": mode is not None}
                if on.type == "cuda":
                    setting["compile_mode"] = mode
                train, forward = _time_setting(info, config_p, mode, batch, micro_batch, seconds, on)
                rows["train"].append(
                    {
                        **setting,
                        **train,
                        **_work_rate(train["samples_s"], flops["train"], peak),
                        "frames_s_cap": round(train["samples_s"] / passes * frame_skip, 1),
                    }
                )
                rows["forward"].append(
                    {**setting, **forward, **_work_rate(forward["samples_s"], flops["forward"], peak)}
                )
    return {
        "bench": "learner",
        "config": config,
        "overrides": list(overrides),
        "device": str(on),
        "gpu": torch.cuda.get_device_name(on) if on.type == "cuda" else None,
        "tf32": resolved.model.tf32,
        "model": type(probe).__name__,
        "algo": resolved.algo.name,
        "minibatch": batch,
        "passes_per_rollout": passes,
        "micro_batch": micro_batch,
        "seconds": seconds,
        **rows,
        "speedup": _speedups(rows),
        "flops_per_sample": flops,
        "gemm_gflops": gemm,
        "compile_auto": compiles(resolved, on, image_model),
        "keep_freed_memory": bool(kept),
        "machine": machine,
    }


def _is_atari(config: Config) -> bool:
    from fastrl.envs.atari import is_atari_id

    return is_atari_id(config.env.id)


def _minibatch(config: Config) -> tuple[int, int]:
    """Rows of one training step and how many steps' worth of passes a rollout's rows get."""
    from fastrl.algos.registry import load_algorithm
    from fastrl.modes import mode_of

    algo, engine = config.algo, config.engine
    rows = engine.envs * engine.rollout
    if load_algorithm(algo.name).epochs:  # PPO, PQN: minibatch steps over a rollout's rows, several passes
        return -(-rows // algo.minibatches), algo.epochs
    if mode_of(config).queued:  # IMPALA: a batch of full slots
        return algo.batch_slots * engine.rollout, 1
    return rows, 1


def _time_setting(
    info, config: Config, mode: str | None, batch: int, micro_batch: int, seconds: float, device=None
) -> tuple[dict, dict]:
    """A training step's and the actors' forward's rates, eager (``mode`` None) or compiled in ``mode``."""
    import torch
    import torch._dynamo

    from fastrl.algos.optimizers import make_optimizer
    from fastrl.models.compiling import compile_policy
    from fastrl.models.distributions import distribution_for
    from fastrl.models.policy import build_policy

    device = device or torch.device("cpu")
    torch._dynamo.reset()  # each setting compiles afresh (inductor's disk cache still serves)
    torch.manual_seed(0)
    model = compile_policy(build_policy(info, config, device).to(device), mode)
    optimizer = make_optimizer(model, config.algo)
    data = _random_batch(info, batch, device)
    distribution = distribution_for(info.action)
    ppo = _ppo_options(config.algo)
    step = lambda: _train_step(model, optimizer, data, config.algo, distribution, ppo)  # noqa: E731
    train = _rate(step, batch, seconds, device)
    model.eval()
    obs = _random_batch(info, micro_batch, device).obs

    def forward():
        with torch.inference_mode():
            model(obs)

    return train, _rate(forward, micro_batch, seconds, device)


def _flops_per_sample(info, config: Config, batch: int, micro_batch: int) -> dict[str, float]:
    """Floating-point operations per sample of one eager fp32 training step and of the actors' forward, as
    ``torch.utils.flop_counter`` counts them (matrix products and convolutions; element-wise work is not
    counted, so the shares below are of the work a BLAS could do)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from fastrl.algos.optimizers import make_optimizer
    from fastrl.models.distributions import distribution_for
    from fastrl.models.policy import build_policy

    fp32 = dataclasses.replace(config, model=dataclasses.replace(config.model, precision="fp32"))
    model = build_policy(info, fp32, "cpu")
    optimizer = make_optimizer(model, config.algo)
    data = _random_batch(info, batch)
    with FlopCounterMode(display=False) as counter:
        _train_step(model, optimizer, data, config.algo, distribution_for(info.action), _ppo_options(config.algo))
    train = counter.get_total_flops() / batch
    model.eval()
    with FlopCounterMode(display=False) as counter, torch.inference_mode():
        model(data.obs[:micro_batch])
    return {"train": round(train), "forward": round(counter.get_total_flops() / micro_batch)}


def _gemm_gflops(precision: str, seconds: float, device=None) -> float:
    """GFLOP/s of a square matrix product in ``precision`` on ``device`` (``GEMM_SIDE`` on the CPU at torch's
    current thread count, ``GPU_GEMM_SIDE`` on a GPU)."""
    import torch

    device = device or torch.device("cpu")
    side = GPU_GEMM_SIDE if device.type == "cuda" else GEMM_SIDE
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    generator = torch.Generator().manual_seed(0)
    a, b = (torch.randn(side, side, generator=generator).to(device, dtype) for _ in range(2))
    rate = _rate(lambda: torch.mm(a, b), 1, min(seconds, 1.0), device)
    return rate["samples_s"] * 2 * side**3 / 1e9


def _work_rate(samples_s: float, flops_per_sample: float, gemm_gflops: float) -> dict:
    gflops = samples_s * flops_per_sample / 1e9
    return {"gflops": round(gflops, 1), "of_gemm": round(gflops / gemm_gflops, 3) if gemm_gflops > 0 else None}


def _rate(call, rows: int, seconds: float, device=None) -> dict:
    """Rows/s of ``call`` after a warm-up; on a GPU timed to its last kernel (a call only queues work there)."""
    import torch

    cuda = device is not None and device.type == "cuda"
    finish = torch.cuda.synchronize if cuda else lambda: None
    begun = time.perf_counter()
    for _ in range(WARM_UP_STEPS):
        call()
    finish()
    warm_up = time.perf_counter() - begun
    count, begun = 0, time.perf_counter()
    while count < 2 or time.perf_counter() - begun < seconds:
        call()
        count += 1
        if cuda and count % 16 == 0:
            finish()  # the clock reads work done, not work queued
    finish()
    return {"samples_s": round(count * rows / (time.perf_counter() - begun), 1), "warm_up_s": round(warm_up, 2)}


def _random_batch(info, size: int, device=None):
    import numpy as np
    import torch

    from fastrl.algos.ppo import PPOBatch

    rng = np.random.default_rng(0)
    dtype = np.dtype(info.obs_dtype)
    if dtype == np.uint8:
        obs = rng.integers(0, 256, (size, *info.obs_shape), dtype=np.uint8)
    else:
        obs = rng.standard_normal((size, *info.obs_shape)).astype(dtype)
    action = np.zeros((size, *info.action.slot_shape), info.action.slot_dtype)
    floats = lambda: torch.from_numpy(rng.standard_normal(size).astype(np.float32))  # noqa: E731
    batch = PPOBatch(torch.from_numpy(obs), torch.from_numpy(action), floats() - 2.0, floats(), floats(), floats())
    if device is None:
        return batch
    # the optional multi-agent fields stay None: every row counts
    moved = (getattr(batch, f) for f in PPOBatch.__dataclass_fields__)
    return PPOBatch(*(None if tensor is None else tensor.to(device) for tensor in moved))


def _ppo_options(algo):
    """PPO's loss stands for every algorithm's training step here: its clip ranges are the config's where it runs
    PPO, the defaults elsewhere."""
    from fastrl.algos.ppo_options import PPOOptions
    from fastrl.tables import build_section

    return build_section(PPOOptions, algo.options if algo.name == "ppo" else {}, "algo.options.")


def _train_step(model, optimizer, data, algo, distribution, ppo) -> None:
    import torch

    from fastrl.algos.ppo import ppo_loss

    optimizer.zero_grad(set_to_none=True)
    loss, _ = ppo_loss(
        model, data, ppo.clip, ppo.value_clip, algo.value_coef, algo.entropy_coef, True, distribution=distribution
    )
    loss.backward()
    if algo.max_grad_norm > 0:  # 0 disables the clip, as in the learner
        torch.nn.utils.clip_grad_norm_(model.parameters(), algo.max_grad_norm)
    optimizer.step()


def _speedups(rows: dict) -> dict:
    """compiled / eager samples/s, by what is measured, precision and thread count (on CUDA also CUDA graphs':
    ``..._reduce_overhead``)."""
    out = {}
    for what, table in rows.items():
        eager = {(r["precision"], r["threads"]): r["samples_s"] for r in table if not r["compiled"]}
        for r in table:
            if r["compiled"]:
                key = f"{what}_{r['precision']}_{r['threads']}t"
                if r.get("compile_mode") == "reduce-overhead":
                    key += "_reduce_overhead"
                out[key] = round(r["samples_s"] / eager[(r["precision"], r["threads"])], 3)
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", nargs="?", help="TOML config (default: the default job)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key")
    parser.add_argument("--seconds", type=float, default=3.0, help="timed seconds per setting (default 3)")
    parser.add_argument(
        "--threads", type=int, nargs="+", help="torch thread counts (default: 1, the learner's, all cores)"
    )
    parser.add_argument(
        "--precision",
        choices=("fp32", "bf16"),
        nargs="+",
        help="precisions to time (default: fp32, and bf16 where the device has bf16 units)",
    )
    parser.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="where the step runs (default: the GPU where torch sees one, as engine.device = 'auto')",
    )


def run(args: argparse.Namespace) -> int:
    if args.seconds <= 0 or (args.threads and min(args.threads) < 1):
        print("fastrl: bad options: --seconds must be > 0 and --threads >= 1", file=sys.stderr)
        return 2
    try:
        result = measure(args.config, args.set, args.seconds, args.threads, args.device, args.precision, True)
    except ConfigError as exc:
        print(f"fastrl: bad config: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0
