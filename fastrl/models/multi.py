"""The ``multi`` policy: a CNN on the image part and an MLP on the vector parts of a packed Dict row.

A Dict observation holding a uint8 image is stored as one byte row per step
(``fastrl.envs.obs_layout``, ``packed``). ``forward`` unpacks it without copying: the image
is ``narrow``ed out of the row as uint8 (and read as ``[C, H, W]``: an ``[H, W, C]`` image is
permuted, which is the channels-last memory format the CNNs run fastest in), each vector part
is ``narrow``ed and viewed as float32 in place (its offset is aligned, see ``ObsLayout``).

image  -> the trunk of a built-in CNN (``nature``, ``shallow`` or ``impala``: convolutions, FC, ReLU)
vector -> a tanh MLP (``model.hidden``)
concatenated -> the policy head (logits, or a Gaussian for Box actions) and the value head.

Every operation is per row, so the fixed-size micro-batch forward stays batch-invariant.
``normalize_obs`` normalises the vector part with running statistics; the image is scaled by
1/255 only (its per-pixel statistics are not kept: a clear error if there is no vector part).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from fastrl.envs.obs_layout import ObsLayout, ObsPart
from fastrl.models.cnn import ImpalaResNet, NatureCNN, ShallowCNN
from fastrl.models.heads import HeadedPolicy
from fastrl.models.mlp import check_policy_args, init_orthogonal
from fastrl.models.normalizer import ObsNormalizer, ValueNormalizer, obs_to_float

CNNS = {"nature": NatureCNN, "shallow": ShallowCNN, "impala": ImpalaResNet}


def check_packed_layout(layout: ObsLayout | None, obs_shape: tuple[int, ...]) -> ObsLayout:
    if layout is None or not layout.packed:
        raise ValueError(
            "it is for Dict observations holding a uint8 image (a packed row); "
            "these observations are a Box or a flat Dict of vectors: use 'mlp' or 'auto'"
        )
    if tuple(obs_shape) != layout.row_shape:
        raise ValueError(f"obs_shape {tuple(obs_shape)} is not the layout's row {layout.row_shape}")
    return layout


class MultiInputPolicy(HeadedPolicy):
    def __init__(
        self,
        obs_shape: Sequence[int],
        n_actions: int,
        obs_layout: ObsLayout | None = None,
        hidden: Sequence[int] = (64, 64),
        cnn: str = "nature",
        channels: Sequence[int] | None = None,
        normalize_obs: bool = False,
        normalize_value: bool = False,
        gaussian: bool = False,
        lstm: int = 0,
    ):
        super().__init__()
        shape = check_policy_args("MultiInputPolicy", obs_shape, n_actions)
        self.obs_layout = check_packed_layout(obs_layout, shape)
        self.obs_shape, self.n_actions = shape, n_actions
        image_part = self.obs_layout.image
        assert image_part is not None, "a packed layout holds a uint8 image"
        self.image_part: ObsPart = image_part
        self.vector_parts = self.obs_layout.vectors
        if normalize_obs and not self.vector_parts:
            raise ValueError(
                "model.normalize_obs normalises the vector parts of a Dict observation, "
                f"and this one has none (only the image {self.image_part.name!r}, "
                "which is scaled by 1/255)"
            )
        self.obs_normalizer = ObsNormalizer((self.obs_layout.vector_size,)) if normalize_obs else None
        self.value_normalizer = ValueNormalizer() if normalize_value else None
        self.image_trunk, image_width = _image_trunk(cnn, self._chw(self.image_part.shape), channels)
        self.vector_trunk, vector_width = _vector_trunk(self.obs_layout.vector_size, hidden)
        width = image_width + vector_width
        self._build_heads(width, n_actions, gaussian, lstm, init_orthogonal)
        self.bf16 = False  # set_precision("bf16"): the CNN under bfloat16 autocast, the rest in float32

    def _chw(self, shape: tuple[int, ...]) -> tuple[int, int, int]:
        return (shape[2], shape[0], shape[1]) if self.obs_layout.channels_last else (shape[0], shape[1], shape[2])

    def set_precision(self, precision: str) -> None:
        """``"fp32"`` or ``"bf16"`` (as the built-in CNNs: ``fastrl.models.precision``)."""
        if precision not in ("fp32", "bf16"):
            raise ValueError(f"precision must be 'fp32' or 'bf16', got {precision!r}")
        self.bf16 = precision == "bf16"

    # ---------------------------------------------------------------- unpacking

    def image(self, obs: Tensor) -> Tensor:
        """The image part of ``[B, row_bytes]`` uint8 rows as ``[B, C, H, W]`` uint8 (a view)."""
        part = self.image_part
        image = obs.narrow(1, part.offset, part.nbytes).unflatten(1, part.shape)
        return image.permute(0, 3, 1, 2) if self.obs_layout.channels_last else image

    def vector(self, obs: Tensor) -> Tensor:
        """The vector parts of ``[B, row_bytes]`` uint8 rows, side by side in flatten order: ``[B, V]`` float32."""
        return torch.cat([_float_part(obs, part) for part in self.vector_parts], dim=1)

    def obs_for_normalizer(self, obs: Tensor) -> Tensor:
        """What ``obs_normalizer``'s statistics are of (the learner's ``observe_observations`` asks)."""
        return self.vector(obs)

    # ---------------------------------------------------------------- forward

    def encode(self, obs: Tensor) -> Tensor:
        image = obs_to_float(self.image(obs)).contiguous(memory_format=torch.channels_last)
        with torch.autocast(image.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            features = [self.image_trunk(image).float()]
        if self.vector_parts:
            vector = self.vector(obs)
            if self.obs_normalizer is not None:
                vector = self.obs_normalizer(vector)
            features.append(self.vector_trunk(vector))
        return torch.cat(features, dim=1)


def _float_part(obs: Tensor, part: ObsPart) -> Tensor:
    """One float32 part of the byte rows, ``[B, size]``, viewed in place where the rows' strides allow."""
    raw = obs.narrow(1, part.offset, part.nbytes)
    try:
        return raw.view(torch.float32)
    except RuntimeError:  # rows whose stride or start is not a multiple of 4 bytes: view a copy
        return raw.contiguous().clone().view(torch.float32)


def _image_trunk(cnn: str, chw: tuple[int, int, int], channels: Sequence[int] | None) -> tuple[nn.Module, int]:
    """A built-in CNN's body (convolutions, flatten, FC, ReLU: ``_ImagePolicy.body``) for ``chw`` images."""
    if cnn not in CNNS:
        raise ValueError(f"cnn = {cnn!r}; allowed: {', '.join(map(repr, CNNS))}")
    if channels is not None and cnn != "impala":
        raise ValueError(f"channels is for cnn = 'impala', not {cnn!r}")
    kwargs = {} if channels is None else {"channels": channels}
    body = CNNS[cnn](chw, 1, **kwargs).body  # its one-action heads are dropped
    width = next(layer.out_features for layer in reversed(body) if isinstance(layer, nn.Linear))
    return body, width


def _vector_trunk(size: int, hidden: Sequence[int]) -> tuple[nn.Module, int]:
    """The tanh MLP of ``MLPPolicy`` on the vector parts; no layers when there are none."""
    try:
        sizes = [int(h) for h in hidden]
    except (TypeError, ValueError):
        raise ValueError(f"hidden must be a sequence of ints, got {hidden!r}") from None
    if size == 0:
        return nn.Sequential(), 0
    layers: list[nn.Module] = []
    width = size
    for h in sizes:
        if h < 1:
            raise ValueError(f"hidden layer sizes must be >= 1, got {sizes}")
        layers += [init_orthogonal(nn.Linear(width, h), math.sqrt(2)), nn.Tanh()]
        width = h
    return nn.Sequential(*layers), width
