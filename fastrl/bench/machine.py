"""The machine a figure was measured on: every speed or time-to-score figure carries it.

Figures from two kinds of CPU never compare as one: a Nature-CNN training step runs 3.4x faster in
bf16 than in fp32 on a Xeon with AMX-BF16, 1.85x (1 thread) to 2.4x (2 threads) faster on a Zen 4
EPYC (AVX512-BF16, no AMX), and 10x slower on a Zen 3 EPYC, which emulates bf16
(``fastrl.models.precision``).
"""

from __future__ import annotations

import os
import platform

from fastrl.models.precision import cpu_flags

BF16_FLAGS = ("amx_bf16", "avx512_bf16")  # the CPU multiplies bfloat16 natively (AMX tiles, or AVX-512 dot products)


def machine_info() -> dict:
    """What the times depend on: the CPU and its bf16 units, the cores this process may use, torch and the GPU."""
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    flags = cpu_flags()
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {
        "cpu": cpu,
        "cores": cores,
        "cpu_count": os.cpu_count(),
        **{flag: flag in flags for flag in BF16_FLAGS},
        "torch": torch.__version__,
        "gpu": gpu,
    }


def bf16_units(machine: dict) -> str:
    """The bf16 units a ``machine_info()`` names, as a results line says them: the figures of a CPU with AMX, with
    AVX512-BF16 alone, or with neither (bf16 emulated) are three kinds."""
    if machine.get("amx_bf16"):
        return "AMX-BF16"
    if machine.get("avx512_bf16"):
        return "AVX512-BF16, no AMX"
    return "no native bf16"
