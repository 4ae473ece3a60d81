"""``model.name = "board"``: a convolutional policy for board games' observations (Connect Four, chess, go).

PettingZoo's classic games observe a board as float planes, a rank-3 Box (``connect_four_v3``: ``[6, 7, 2]``, its
own pieces and the opponent's), beside an ``action_mask``. Such a part is not an image (``fastrl.envs.obs_layout``
keeps only uint8 ones apart), so the row is flat float32 and ``mlp`` reads the board as 84 unrelated numbers: it has
to learn each of Connect Four's 69 lines of four apart. Here 3x3 convolutions of stride 1 and padding 1 keep the
board's geometry (every cell sees its neighbours, weights shared across the board), then an MLP over their output
and the row's other columns (the mask among them) feeds the built-in heads.

``board``: the part's key (``"observation"``); ``channels``: the convolutions' widths; ``hidden``: the MLP's sizes
(``model.hidden``); ``channels_last``: the part is ``[H, W, C]`` (PettingZoo's convention) or ``[C, H, W]``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from fastrl.envs.obs_layout import ObsLayout
from fastrl.models.heads import HeadedPolicy
from fastrl.models.mlp import check_policy_args, init_orthogonal
from fastrl.models.normalizer import ObsNormalizer, ValueNormalizer, obs_to_float


class BoardPolicy(HeadedPolicy):
    def __init__(
        self,
        obs_shape: Sequence[int],
        n_actions: int,
        obs_layout: ObsLayout | None = None,
        board: str = "observation",
        channels: Sequence[int] = (16, 16),  # on Connect Four, better than 32 in 15 minutes: 2.6x the rows
        hidden: Sequence[int] = (256,),
        channels_last: bool = True,
        normalize_obs: bool = False,
        normalize_value: bool = False,
        gaussian: bool = False,
        lstm: int = 0,
    ):
        super().__init__()
        self.obs_shape = check_policy_args("BoardPolicy", obs_shape, n_actions)
        self.obs_normalizer = ObsNormalizer(self.obs_shape) if normalize_obs else None
        self.value_normalizer = ValueNormalizer() if normalize_value else None
        part = _board_part(obs_layout, board)
        self.start, self.size = part.offset // 4, part.size  # a flat row is float32: byte offset / 4
        shape = part.shape if channels_last else (part.shape[1], part.shape[2], part.shape[0])
        self.height, self.width, planes = shape
        self.channels_last = channels_last
        self.rest = math.prod(self.obs_shape) - self.size  # the row's other columns (the mask among them)
        convolutions: list[nn.Module] = []
        for width in channels:
            convolutions += [init_orthogonal(nn.Conv2d(planes, int(width), 3, padding=1), math.sqrt(2)), nn.ReLU()]
            planes = int(width)
        self.convolutions = nn.Sequential(*convolutions)
        layers: list[nn.Module] = []
        features = planes * self.height * self.width + self.rest
        for size in hidden:
            layers += [init_orthogonal(nn.Linear(features, int(size)), math.sqrt(2)), nn.ReLU()]
            features = int(size)
        self.mlp = nn.Sequential(*layers)
        self._build_heads(features, n_actions, gaussian, lstm, init_orthogonal)

    def encode(self, obs: Tensor) -> Tensor:
        x = obs_to_float(obs) if self.obs_normalizer is None else self.obs_normalizer(obs)
        row = x.reshape(x.shape[0], -1)
        planes = row[:, self.start : self.start + self.size]
        if self.channels_last:
            planes = planes.reshape(-1, self.height, self.width, planes.shape[1] // (self.height * self.width))
            planes = planes.permute(0, 3, 1, 2)
        else:
            planes = planes.reshape(-1, planes.shape[1] // (self.height * self.width), self.height, self.width)
        seen = self.convolutions(planes.contiguous()).flatten(1)
        rest = torch.cat([row[:, : self.start], row[:, self.start + self.size :]], 1)
        return self.mlp(torch.cat([seen, rest], 1))


def _board_part(layout: ObsLayout | None, key: str):
    """The flat row's rank-3 part named ``key``; a ValueError naming what the observation holds instead."""
    parts = {} if layout is None else {part.name: part for part in layout.parts}
    part = parts.get(key)
    if layout is None or layout.packed or part is None or len(part.shape) != 3 or part.image:
        held = [f"{p.name} {list(p.shape)}" for p in layout.parts] if layout is not None else "one Box"
        raise ValueError(
            f"model 'board' reads a Dict observation's rank-3 float part (model.kwargs.board = {key!r}) from a flat "
            f"row; this observation holds {held}"
        )
    return part
