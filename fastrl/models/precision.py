"""Numeric precision of the built-in convolutional policies: fp32, or bf16 where the CPU has it.

The convolutions and the FC layer run under ``torch.autocast`` in bfloat16; the policy and
value heads run in float32 on the body's output, so logits, log-probs and values keep full
precision (PPO's ratio, V-trace's weights). The parameters stay float32: the optimizer, the
shared weights, checkpoints and ``load_policy`` see the same model whatever the precision.

Why it matters: on 2 CPU cores the learner's forward/backward of the Nature CNN is the
bottleneck of every Atari run (docs/results/xeon-amx-bf16.md). Measured on a 2-vCPU Sapphire Rapids
(AMX-BF16), torch 2.13, one thread, Nature CNN on 4x84x84: a training step of 256 samples
1.27K samples/s in fp32, 2.06K in fp32 channels-last, 4.29K in bf16 channels-last; a
16-row forward 5.1K / 5.7K / 11.2K obs/s. Without native bf16 units the CPU emulates it and
is slower than fp32, so ``"auto"`` picks bf16 only where the CPU has AMX-BF16; on CUDA
``"auto"`` stays fp32 until a GPU run has measured that bf16 learns there as fp32 does (the bf16
forward's batch invariance was measured on an H200: docs/results/h200-16core-2026-11.md).
"""

from __future__ import annotations

import functools

import torch

PRECISIONS = ("auto", "fp32", "bf16")


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (Linux ``/proc/cpuinfo``; empty elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            return next(
                (frozenset(line.split(":", 1)[1].split()) for line in f if line.startswith("flags")), frozenset()
            )
    except OSError:
        return frozenset()


def cpu_has_amx_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 matrices natively (Linux: the ``amx_bf16`` flag)."""
    return "amx_bf16" in cpu_flags()


def resolve_precision(precision: str, device: torch.device) -> str:
    """``"fp32"`` or ``"bf16"`` for a model that computes on ``device``."""
    if precision not in PRECISIONS:
        raise ValueError(f"model.precision = {precision!r}: allowed values are {', '.join(map(repr, PRECISIONS))}")
    if precision != "auto":
        return precision
    return "bf16" if device.type == "cpu" and cpu_has_amx_bf16() else "fp32"
