"""Batch-invariant inference: forward in fixed-size micro-batches.

On CPU a row's output is bit-identical across batch compositions only when the batch size
the kernels see is fixed (GEMM/convolution pick their blocking from the shapes; see DESIGN.md,
"Determinism"). ``forward_microbatched`` copies the rows, ``micro_batch`` at a time, into one
preallocated staging buffer (the last chunk zero-padded), forwards each full-size chunk and
drops the padding rows, so every row's ``(logit, value)`` is the same whatever batch it came in.
Copying every chunk, not only the last, also gives the kernels the same (aligned) address
every time, whatever the row's offset in ``obs``.

Choose ``micro_batch`` as a multiple of 8, 16 or more for MLPs (the default 16 is): a fixed
size is not enough on its own. Measured on an AVX2 AMD EPYC (torch 2.13, MLP and Nature CNN):
with 5-7 or 9-11 rows a row's bits depend on its position in the chunk (rows past the last
full 4-row block of the GEMM take another code path); sizes 1-4, 8 and 12-24 were
position-invariant. On an AVX-512/AMX Xeon (Sapphire Rapids) the MLP's 8-row GEMM gives odd
rows other bits than even ones, while 16, 24 and 32 hold; the CNNs hold at 8 and 16, in fp32
and in bf16 (``tests/models/test_models.py``).

Models must treat rows independently (no batch norm in training mode, no cross-row ops).
"""

from __future__ import annotations

import threading

import torch
from torch import Tensor, nn

_local = threading.local()  # staging buffers are per thread, so concurrent callers never share one


def _staging_buffer(micro_batch: int, row_shape: torch.Size, dtype: torch.dtype, device: torch.device) -> Tensor:
    cache: dict | None = getattr(_local, "buffers", None)
    if cache is None:
        cache = _local.buffers = {}
    key = (micro_batch, tuple(row_shape), dtype, device)
    buf = cache.get(key)
    if buf is None:
        with torch.inference_mode(False):  # a normal tensor, usable inside and outside inference mode
            buf = torch.zeros((micro_batch, *row_shape), dtype=dtype, device=device)
        cache[key] = buf
    return buf


def forward_microbatched(
    model: nn.Module, obs: Tensor, micro_batch: int, hidden: Tensor | None = None
) -> tuple[Tensor, ...]:
    """``model(obs)`` computed in chunks of exactly ``micro_batch`` rows: ``(logits [B, A], value [B])``;
    with ``hidden`` (a recurrent model's ``[B, 2H]`` states, ``fastrl.models.recurrent``) each chunk's
    states are staged beside its observations and the new states come third.

    Meant for inference (call it under ``torch.no_grad()`` or ``torch.inference_mode()``); with
    grad enabled each chunk is cloned out of the staging buffer so autograd stays correct.
    """
    if isinstance(micro_batch, bool) or not isinstance(micro_batch, int) or micro_batch < 1:
        raise ValueError(f"forward_microbatched: micro_batch must be an int >= 1, got {micro_batch!r}")
    if obs.dim() < 1:
        raise ValueError("forward_microbatched: obs must have a batch dimension")
    n = obs.shape[0]
    inputs = [obs] if hidden is None else [obs, hidden]
    staged = [_staging_buffer(micro_batch, x.shape[1:], x.dtype, x.device) for x in inputs]
    clone = torch.is_grad_enabled()
    parts: list[tuple[Tensor, ...]] = []
    for start in range(0, max(n, 1), micro_batch):
        rows = min(micro_batch, n - start)
        for buf, x in zip(staged, inputs):
            buf[:rows].copy_(x[start : start + rows])
            if rows < micro_batch:
                buf[rows:].zero_()
        out = model(*(buf.clone() if clone else buf for buf in staged))
        if start + micro_batch < n:  # more chunks follow: CUDA graphs (compile_mode "reduce-overhead") reuse
            out = tuple(o.clone() for o in out)  # their output memory on the next replay, so keep a copy
        parts.append(tuple(o[:rows] for o in out) if rows < micro_batch else tuple(out))
    if len(parts) == 1:
        return parts[0]
    return tuple(torch.cat(column) for column in zip(*parts))
