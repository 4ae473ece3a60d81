"""A storage as an update rule reads it: numpy views of the slots for the CPU kernels (n-step returns, GAE,
V-trace), and each field as a tensor on the learner's device, uploaded at most once per update.

On the CPU a field's tensor is the slot memory itself (``torch.from_numpy``: no copy), as it always was.
On a GPU a field goes up whole, in its slot dtype (uint8 frames as uint8: the model scales and normalises
them on the device), through a page-locked staging buffer kept from update to update: one CPU copy out of
the shared slots, then a copy to the device that runs asynchronously (DMA, queued on the learner's stream,
no wait for the GPU). Before a staging buffer is refilled the copy out of it is waited for (a CUDA event),
which by then has long finished. Everything an update then computes from a field (the rows of a minibatch,
the bootstrap row, the normaliser's sample) is indexed on the device.

``Uploads`` counts fields and bytes: the tests check that every field reaches the device once per update,
whatever the epochs and minibatches.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np
import torch


class Uploads:
    """The learner's way to its device: staging buffers reused between updates, and what went through them."""

    def __init__(self, device: torch.device):
        self.device = device
        self.fields = 0  # fields uploaded since the learner started
        self.bytes = 0
        self._staging: dict[str, tuple[torch.Tensor, torch.cuda.Event | None]] = {}

    def of(self, arrays: Mapping[str, np.ndarray]) -> DeviceStorage:
        """One update's storage: ``arrays`` (``[N, T + 1, ...]`` slot views), each field uploaded when first asked."""
        return DeviceStorage(arrays, self)

    def upload(self, name: str, array: np.ndarray) -> torch.Tensor:
        """``array`` (field ``name``) as a tensor on the device."""
        self.fields += 1
        self.bytes += array.nbytes
        if self.device.type == "cpu":
            return torch.from_numpy(array)  # the slot memory itself
        staging = self._staged(name, array)
        np.copyto(staging.numpy(), array)
        on_device = staging.to(self.device, non_blocking=True)
        done = torch.cuda.Event()
        done.record()  # on the current stream, after the copy: the staging buffer is free again once it fires
        self._staging[name] = (staging, done)
        return on_device

    def _staged(self, name: str, array: np.ndarray) -> torch.Tensor:
        """The page-locked buffer of field ``name``, its last copy out finished; made (or remade) to fit."""
        kept = self._staging.get(name)
        if kept is not None:
            staging, done = kept
            if done is not None:
                done.synchronize()
            if staging.shape == array.shape and staging.numpy().dtype == array.dtype:
                return staging
        return torch.from_numpy(np.empty(array.shape, array.dtype)).pin_memory()


class DeviceStorage(Mapping[str, np.ndarray]):
    """A mapping of the storage's numpy fields (``storage["reward"]``), with ``tensor(name)``: the field on the
    learner's device, uploaded on first use and kept for the rest of the update."""

    def __init__(self, arrays: Mapping[str, np.ndarray], uploads: Uploads):
        self.arrays, self.uploads = arrays, uploads
        self._tensors: dict[str, torch.Tensor] = {}

    @property
    def device(self) -> torch.device:
        return self.uploads.device

    def tensor(self, name: str) -> torch.Tensor:
        kept = self._tensors.get(name)
        if kept is None:
            kept = self._tensors[name] = self.uploads.upload(name, self.arrays[name])
        return kept

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.arrays)

    def __len__(self) -> int:
        return len(self.arrays)
