"""Shared policy weights with a version number that actors poll.

One flat float32 vector per weight set (``params``: what actors act with, one per learner, two
where envs run ahead; gala's ``mailbox``: the half-step a learner sends its out-peer, its version
the update that produced it). Writes are guarded by a sequence counter (a seqlock):
the writer makes it odd, copies, stores the version and makes it even again; a reader that
sees an odd or changed counter retries. So a reader never uses a half-written set of weights,
and no lock is held across processes.
"""

from __future__ import annotations

import time
import weakref

import numpy as np
import torch

SEQ, VERSION = 0, 1


def count_parameters(model: torch.nn.Module) -> int:
    return sum(t.numel() for t in model.state_dict().values())


class SharedParams:
    def __init__(self, arrays: dict[str, np.ndarray], row: int = 0, name: str = "params"):
        self.flat = torch.from_numpy(arrays[name][row])
        self.header = arrays[f"{name}_header"][row]
        # per model: its tensors paired with their views of the flat buffer; state_dict() costs
        # more than the copy for small models, and publishing happens at every barrier
        self._pairs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def _views(self, model: torch.nn.Module) -> list[tuple[torch.Tensor, torch.Tensor]]:
        pairs = self._pairs.get(model)
        if pairs is None:
            pairs = self._pairs[model] = self._pair_up(model)
        return pairs

    def _pair_up(self, model: torch.nn.Module) -> list[tuple[torch.Tensor, torch.Tensor]]:
        pairs, offset = [], 0
        for tensor in model.state_dict().values():
            if tensor.dtype != torch.float32:
                raise TypeError(f"shared parameters must be float32, got {tensor.dtype}")
            n = tensor.numel()
            pairs.append((tensor, self.flat[offset : offset + n].view(tensor.shape)))
            offset += n
        if offset != self.flat.numel():
            raise ValueError(f"model has {offset} parameters, the shared buffer {self.flat.numel()}")
        return pairs

    @property
    def version(self) -> int:
        return int(self.header[VERSION])

    @torch.no_grad()
    def publish(self, model: torch.nn.Module, version: int) -> None:
        self.header[SEQ] += 1
        for tensor, view in self._views(model):
            view.copy_(tensor.detach().to("cpu"))
        self.header[VERSION] = version
        self.header[SEQ] += 1

    @torch.no_grad()
    def snapshot_into(self, model: torch.nn.Module, timeout_s: float = 1.0) -> int | None:
        """The last published weights into ``model`` once the learner is gone; their version, or None
        when nothing was ever published or a dead writer left them half-written (odd counter)."""
        deadline = time.monotonic() + timeout_s
        pairs = self._views(model)
        while time.monotonic() < deadline:
            seq = int(self.header[SEQ])
            if seq == 0:
                return None
            if seq & 1:
                time.sleep(0.001)
                continue
            version = int(self.header[VERSION])
            for tensor, view in pairs:
                tensor.copy_(view)
            if int(self.header[SEQ]) == seq:
                return version
        return None

    @torch.no_grad()
    def write_flat(self, flat: torch.Tensor, version: int) -> None:
        """``publish`` from a flat vector (a checkpoint's copy of these weights)."""
        self.header[SEQ] += 1
        self.flat.copy_(flat)
        self.header[VERSION] = version
        self.header[SEQ] += 1

    @torch.no_grad()
    def read_flat(self, out: torch.Tensor) -> int:
        """A consistent copy of the whole vector into ``out``; returns its version."""
        return self._read(lambda version: out.copy_(self.flat))

    def load_into(self, model: torch.nn.Module, have_version: int) -> int:
        """Copy the weights into ``model`` if the published version differs; returns the version held.
        Not a ``no_grad`` function: the common case (nothing new, every actor batch) would pay for
        entering the context more than for the check."""
        header = self.header
        seq = int(header[SEQ])
        if not seq & 1 and int(header[VERSION]) == have_version and int(header[SEQ]) == seq:
            return have_version

        def copy(version: int) -> None:
            if version != have_version:
                with torch.no_grad():
                    for tensor, view in self._views(model):
                        tensor.copy_(view)

        return self._read(copy)

    def _read(self, copy) -> int:
        """The seqlock's read side: ``copy(version)`` until no write overlapped it; returns the version."""
        while True:
            seq = int(self.header[SEQ])
            if seq & 1:
                time.sleep(0)
                continue
            version = int(self.header[VERSION])
            copy(version)
            if int(self.header[SEQ]) == seq:
                return version
