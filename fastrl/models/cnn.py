"""Convolutional policies for image-stack observations ``[B, C, H, W]``.

uint8 frames go to the device as uint8 and are scaled by 1/255 inside ``forward``; float
observations are taken as already scaled. The flattened feature size is computed from
``obs_shape`` with a dummy forward, so any frame size the convolutions fit works.

Three sizes to pick from (multiply-accumulates per 4x84x84 observation, parameters):

- ``NatureCNN``    ~9.3 M MACs, ~1.7 M params (Mnih et al. 2015)
- ``ShallowCNN``   ~7.6 M MACs, ~0.9 M params (the A2C / GALA / HTS-RL network)
- ``ImpalaResNet`` ~54 M MACs,  ~1.1 M params (Espeholt et al. 2018, 15 conv layers)

``NatureCNN`` and ``ShallowCNN`` take ``layer_norm=True`` (``model.kwargs.layer_norm``): a LayerNorm over
each conv's [C, H, W] output and over the FC layer, before its ReLU, as PQN's network has (Gallici et al.
2024). It keeps every layer's pre-activations at zero mean and unit scale however the weights move.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from fastrl.models.heads import HeadedPolicy
from fastrl.models.mlp import check_policy_args, init_orthogonal
from fastrl.models.normalizer import ObsNormalizer, ValueNormalizer, obs_to_float

RELU_GAIN = math.sqrt(2)


def _check_image_shape(cls_name: str, obs_shape: Sequence[int], n_actions: int) -> tuple[int, ...]:
    shape = check_policy_args(cls_name, obs_shape, n_actions)
    if len(shape) != 3:
        raise ValueError(
            f"{cls_name} needs an image-stack observation [C, H, W]; got obs_shape {shape}; "
            "use the 'mlp' model for flat observations"
        )
    return shape


def flat_size(cls_name: str, features: nn.Module, obs_shape: tuple[int, ...]) -> int:
    """Size of ``features``' flattened output for one observation, by a dummy forward."""
    try:
        with torch.no_grad():
            out = features(torch.zeros((1, *obs_shape)))
    except RuntimeError as e:
        raise ValueError(f"{cls_name}: observation {obs_shape} is too small for its convolutions ({e})") from None
    return out[0].numel()


class _ImagePolicy(HeadedPolicy):
    """``features`` (convolutions) -> flatten -> FC ``fc_size`` + ReLU -> [LSTM ``lstm``] -> policy and value heads."""

    def __init__(
        self,
        obs_shape: tuple[int, ...],
        n_actions: int,
        features: nn.Module,
        fc_size: int,
        normalize_obs: bool = False,
        normalize_value: bool = False,
        gaussian: bool = False,
        lstm: int = 0,
        layer_norm: bool = False,
    ):
        super().__init__()
        self.obs_shape = obs_shape
        self.n_actions = n_actions
        self.obs_normalizer = ObsNormalizer(obs_shape) if normalize_obs else None
        self.value_normalizer = ValueNormalizer() if normalize_value else None
        flat = flat_size(type(self).__name__, features, obs_shape)
        fc_norm = [nn.LayerNorm(fc_size)] if layer_norm else []
        self.body = nn.Sequential(
            features,
            nn.Flatten(),
            init_orthogonal(nn.Linear(flat, fc_size), RELU_GAIN),
            *fc_norm,
            nn.ReLU(inplace=True),
        )
        self._build_heads(fc_size, n_actions, gaussian, lstm, init_orthogonal)
        # channels-last: oneDNN's convolutions run 1.6x faster on it in fp32 and 1.2x in bf16 (models/precision.py)
        self.to(memory_format=torch.channels_last)
        self.bf16 = False  # set_precision("bf16"): the body under bfloat16 autocast, the heads in float32

    def set_precision(self, precision: str) -> None:
        """``"fp32"`` or ``"bf16"`` (see ``fastrl.models.precision``); the parameters stay float32."""
        if precision not in ("fp32", "bf16"):
            raise ValueError(f"precision must be 'fp32' or 'bf16', got {precision!r}")
        self.bf16 = precision == "bf16"

    def encode(self, obs: Tensor) -> Tensor:
        obs = obs.contiguous(memory_format=torch.channels_last)
        x = obs_to_float(obs) if self.obs_normalizer is None else self.obs_normalizer(obs)
        with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            h = self.body(x)
        return h.float()


def conv_stack(
    obs_shape: tuple[int, ...], specs: Sequence[tuple[int, int, int]], layer_norm: bool = False
) -> nn.Sequential:
    """Conv [+ LayerNorm over its C, H, W] + ReLU per ``(out_channels, kernel, stride)``, orthogonal init with
    the ReLU gain. ``obs_shape`` [C, H, W] sizes the norms."""
    layers: list[nn.Module] = []
    channels, size = obs_shape[0], obs_shape[1:]
    for out_channels, kernel, stride in specs:
        conv = init_orthogonal(nn.Conv2d(channels, out_channels, kernel, stride=stride), RELU_GAIN)
        size = tuple((s - kernel) // stride + 1 for s in size)
        norm = [nn.LayerNorm([out_channels, *size])] if layer_norm and min(size) >= 1 else []
        layers += [conv, *norm, nn.ReLU(inplace=True)]
        channels = out_channels
    return nn.Sequential(*layers)


class _PlainCNN(_ImagePolicy):
    """``CONVS`` (``(out_channels, kernel, stride)`` each, ReLU after each) -> FC ``fc`` (512) -> heads;
    ``channels``: other widths for the convolutions (one int each, same kernels and strides);
    ``convs``: another stack altogether, ``[out_channels, kernel, stride]`` each (a frame drawn on a grid of
    k-pixel tiles is read tile by tile with a first ``[C, k, k]``: Crafter's 7-pixel tiles);
    ``layer_norm``: a LayerNorm before each ReLU."""

    CONVS: tuple[tuple[int, int, int], ...] = ()

    def __init__(
        self,
        obs_shape: Sequence[int],
        n_actions: int,
        normalize_obs: bool = False,
        normalize_value: bool = False,
        gaussian: bool = False,
        lstm: int = 0,
        layer_norm: bool = False,
        channels: Sequence[int] | None = None,
        fc: int = 512,
        convs: Sequence[Sequence[int]] | None = None,
    ):
        name = type(self).__name__
        shape = _check_image_shape(name, obs_shape, n_actions)
        if not isinstance(layer_norm, bool):
            raise ValueError(f"{name}: layer_norm must be true or false, got {layer_norm!r}")
        if isinstance(fc, bool) or not isinstance(fc, int) or fc < 1:
            raise ValueError(f"{name}: fc must be an int >= 1 (the FC layer's units), got {fc!r}")
        specs = self._specs(channels) if convs is None else self._own_specs(convs, channels)
        features = conv_stack(shape, specs, layer_norm)
        super().__init__(shape, n_actions, features, fc, normalize_obs, normalize_value, gaussian, lstm, layer_norm)
        self.channels = tuple(out for out, _, _ in specs)

    @classmethod
    def _specs(cls, channels: Sequence[int] | None) -> tuple[tuple[int, int, int], ...]:
        """``CONVS`` with ``channels``' widths in place of its own."""
        if channels is None:
            return cls.CONVS
        widths = list(channels) if isinstance(channels, (list, tuple)) else None
        if (
            widths is None
            or len(widths) != len(cls.CONVS)
            or any(isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in widths)
        ):
            raise ValueError(
                f"{cls.__name__}: channels must be {len(cls.CONVS)} ints >= 1 (one per convolution, "
                f"default {[out for out, _, _ in cls.CONVS]}), got {channels!r}"
            )
        return tuple((width, kernel, stride) for width, (_, kernel, stride) in zip(widths, cls.CONVS))

    @classmethod
    def _own_specs(
        cls, convs: Sequence[Sequence[int]], channels: Sequence[int] | None
    ) -> tuple[tuple[int, int, int], ...]:
        """``convs`` checked: one or more ``[out_channels, kernel, stride]`` of ints >= 1, and no ``channels``
        beside it (the widths are its first numbers)."""
        if channels is not None:
            raise ValueError(f"{cls.__name__}: give channels or convs, not both (convs' first numbers are the widths)")
        rows = list(convs) if isinstance(convs, (list, tuple)) else []
        if not rows or any(
            not isinstance(row, (list, tuple))
            or len(row) != 3
            or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in row)
            for row in rows
        ):
            raise ValueError(
                f"{cls.__name__}: convs must be one or more [out_channels, kernel, stride] of ints >= 1 "
                f"(default {[list(spec) for spec in cls.CONVS]}), got {convs!r}"
            )
        return tuple((out, kernel, stride) for out, kernel, stride in rows)


class NatureCNN(_PlainCNN):
    """Mnih et al. 2015 (PAAC's ``arch_nature``): conv 32 8x8/4, conv 64 4x4/2, conv 64 3x3/1,
    FC 512, ReLU after each. Orthogonal init (gain sqrt(2); heads 0.01 and 1.0)."""

    CONVS = ((32, 8, 4), (64, 4, 2), (64, 3, 1))


class ShallowCNN(_PlainCNN):
    """The A2C / GALA / HTS-RL network (``CNNBase`` of ikostrikov's pytorch-a2c-ppo-acktr, which
    GALA's and HTS-RL's code build on): conv 32 8x8/4, conv 64 4x4/2, conv **32** 3x3/1, FC 512.

    It is not identical to ``NatureCNN``: its last conv has 32 channels instead of 64, which
    halves the FC layer (1568 -> 512 instead of 3136 -> 512 on 84x84 frames): about half the
    parameters and ~20% fewer multiply-accumulates. Same initialisation as ``NatureCNN``.
    """

    CONVS = ((32, 8, 4), (64, 4, 2), (32, 3, 1))


class _ResidualBlock(nn.Module):
    """x + conv(relu(conv(relu(x)))), both convs 3x3 with padding 1."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv0 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: Tensor) -> Tensor:
        y = self.conv0(torch.relu(x))  # not in place: x is the skip connection
        y = self.conv1(torch.relu_(y))
        return x + y


class ImpalaResNet(_ImagePolicy):
    """Espeholt et al. 2018 (IMPALA, deep network): per stage conv 3x3 -> max-pool 3x3/2 ->
    two residual blocks; then ReLU, FC 256, ReLU. ``channels`` gives one stage each.

    Convolutions keep PyTorch's default initialisation (as CleanRL's IMPALA-CNN does:
    orthogonal sqrt(2) on every conv makes the residual stream grow); FC and heads are
    orthogonal like the other policies.
    """

    def __init__(
        self,
        obs_shape: Sequence[int],
        n_actions: int,
        channels: Sequence[int] = (16, 32, 32),
        normalize_obs: bool = False,
        normalize_value: bool = False,
        gaussian: bool = False,
        lstm: int = 0,
    ):
        shape = _check_image_shape("ImpalaResNet", obs_shape, n_actions)
        try:
            chans = [int(c) for c in channels]
        except (TypeError, ValueError):
            raise ValueError(f"ImpalaResNet: channels must be a sequence of ints, got {channels!r}") from None
        if not chans or any(c < 1 for c in chans):
            raise ValueError(f"ImpalaResNet: channels must be one or more ints >= 1, got {chans}")
        layers: list[nn.Module] = []
        in_channels = shape[0]
        for out_channels in chans:
            layers += [
                nn.Conv2d(in_channels, out_channels, 3, padding=1),
                nn.MaxPool2d(3, stride=2, padding=1),
                _ResidualBlock(out_channels),
                _ResidualBlock(out_channels),
            ]
            in_channels = out_channels
        layers.append(nn.ReLU(inplace=True))
        super().__init__(shape, n_actions, nn.Sequential(*layers), 256, normalize_obs, normalize_value, gaussian, lstm)
        self.channels = tuple(chans)
