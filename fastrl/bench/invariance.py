"""Whether a device's forward is batch-invariant, and how far its outputs are from the CPU's in fp32.

    fastrl bench invariance [--device auto|cpu|cuda] [--rows 64]

A run is deterministic only if each row's action depends on that row alone: the actors' forward must give
a row the same bits whatever else is in its batch (DESIGN.md, "Determinism"). On a CPU that holds with fixed
micro-batches and not without; this measures it on any device, for the policies the engine ships (the Nature
CNN on Atari frames in fp32 and bf16, the MLP on CartPole-sized vectors), one JSON line:

- ``rows_differing`` per model, precision and micro-batch size (and ``null``: no micro-batching, the batch
  as it comes): of ``--rows`` rows, how many differ bitwise (logits or value) between the row forwarded
  alone and the same row in shuffled batches of every size 1..rows; 0 is batch-invariant;
- ``max_abs_error_vs_cpu_fp32``: the largest difference of a logit or value from the same weights and rows
  forwarded on the CPU in fp32 (TF32, bf16 and the device's kernels all move it);
- the device, its name, torch's CUDA and cuDNN versions, and the TF32 and determinism flags in force.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

MICRO_BATCHES = (8, 16, 64, 256)


def measure(device: str = "auto", rows: int = 64, seed: int = 0) -> dict:
    import torch

    from fastrl.config import load_config
    from fastrl.devices import configure_cuda, process_device, resolve_devices

    config = resolve_devices(load_config(None, [f"engine.device='{device}'"]))  # the default run's CUDA flags
    on = process_device(config.engine.device)
    configure_cuda(config, on)
    cases = []
    for name, precision in (("nature", "fp32"), ("nature", "bf16"), ("mlp", "fp32")):
        model, x = _model_and_rows(name, precision, rows, seed)
        cpu = _reference(model, x)
        model, x = model.to(on).eval(), x.to(on)
        for micro_batch in (None, *MICRO_BATCHES):
            differing, error = _differing_rows(model, x, micro_batch, np.random.default_rng(seed), cpu)
            cases.append(
                {
                    "model": name,
                    "precision": precision,
                    "micro_batch": micro_batch,
                    "rows": rows,
                    "rows_differing": differing,
                    "max_abs_error_vs_cpu_fp32": error,
                }
            )
    return {
        "bench": "invariance",
        "device": str(on),
        "gpu": torch.cuda.get_device_name(on) if on.type == "cuda" else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if on.type == "cuda" else None,
        "tf32": bool(torch.backends.cudnn.allow_tf32) if on.type == "cuda" else False,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "cases": cases,
        "batch_invariant": {
            f"{c['model']}_{c['precision']}_{c['micro_batch']}": c["rows_differing"] == 0 for c in cases
        },
    }


def _model_and_rows(name: str, precision: str, rows: int, seed: int):
    import torch

    from fastrl.models.cnn import NatureCNN
    from fastrl.models.mlp import MLPPolicy

    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    if name == "nature":
        model = NatureCNN((4, 84, 84), 6)
        model.set_precision(precision)
        return model, torch.randint(0, 256, (rows, 4, 84, 84), dtype=torch.uint8, generator=generator)
    return MLPPolicy((4,), 3), torch.randn((rows, 4), generator=generator)


def _reference(model, x) -> tuple:
    """The outputs of ``model``'s weights on the CPU in fp32, one row at a time (nothing to share a batch with)."""
    import copy

    import torch

    cpu = copy.deepcopy(model).cpu().eval()
    if hasattr(cpu, "set_precision"):
        cpu.set_precision("fp32")
    with torch.inference_mode():
        outs = [cpu(x[i : i + 1]) for i in range(x.shape[0])]
    return torch.cat([o[0] for o in outs]), torch.cat([o[1] for o in outs])


def _differing_rows(model, x, micro_batch: int | None, rng: np.random.Generator, cpu: tuple) -> tuple[int, float]:
    """Rows whose bits change with the batch they come in, and the largest error of any output against ``cpu``."""
    import torch

    from fastrl.models.microbatch import forward_microbatched

    def forward(batch):
        return forward_microbatched(model, batch, micro_batch) if micro_batch else model(batch)

    n = x.shape[0]
    differing: set[int] = set()
    with torch.inference_mode():
        alone = [forward(x[i : i + 1]) for i in range(n)]
        logits = torch.cat([a[0] for a in alone]).float().cpu()
        values = torch.cat([a[1] for a in alone]).float().cpu()
        error = max(float((logits - cpu[0]).abs().max()), float((values - cpu[1]).abs().max()))
        for size in range(1, n + 1):
            index = rng.permutation(n)[:size]
            out_logits, out_values = forward(x[torch.from_numpy(index).to(x.device)])[:2]
            for row, i in enumerate(index.tolist()):
                if not (torch.equal(out_logits[row], alone[i][0][0]) and torch.equal(out_values[row], alone[i][1][0])):
                    differing.add(i)
    return len(differing), error


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto", help="where to forward")
    parser.add_argument("--rows", type=int, default=64, help="rows checked per case (default 64)")


def run(args: argparse.Namespace) -> int:
    if args.rows < 2:
        print("fastrl: bad options: --rows must be at least 2", file=sys.stderr)
        return 2
    print(json.dumps(measure(args.device, args.rows)))
    return 0
