"""Scripted players as policy networks, for the self-play pool's training games (``selfplay.scripted``).

A scripted opponent plays the opponent rows of ``selfplay.scripted_share`` of the games, beside the pool's
snapshots (``fastrl.layers.selfplay.pool``): the actors forward its rows as they forward a snapshot's and sample its
logits with the executors' random numbers, so a run with one stays bit-identical across layouts. It is a network
without parameters: ``forward(obs) -> (logits [B, n_actions], value [B])`` on the engine's observation rows (the
flat float32 row of a Dict observation, ``fastrl.envs.obs_layout``), its logits masked by the observation's
``action_mask`` as the run's own model's are. Equal logits play every allowed action alike; a logit far above the
others (``CERTAIN``) plays that action alone.

Built in: ``connect_four_lookahead``, the vectorised twin of ``fastrl eval``'s scripted player of that name
(``fastrl.evaluation.opponents``): the first winning column if there is one, else the first column that blocks
the opponent's win, else a uniformly random legal column. Any other name is built as a model is
(``fastrl.models.registry``: a registered name or ``package.module:factory``), and must hold no parameters of
its own that would need learning: it is never trained and never checkpointed.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from fastrl.envs.obs_layout import ObsLayout
from fastrl.models.action_mask import attach as attach_action_mask
from fastrl.models.registry import build_model, check_interface

# a logit this far above every other gives the others a probability of exactly 0 (exp(-1e4) underflows in
# float32 and float64), so the sampling kernel plays the action alone; masked logits (-1e9) stay far below it
CERTAIN = 1e4
ROWS, COLUMNS, PLAYERS = 6, 7, 2
BOARD_KEY = ("observation",)


class ConnectFourLookahead(nn.Module):
    """One-step look-ahead for PettingZoo's connect_four_v3, over a batch of observation rows."""

    def __init__(self, obs_shape, n_actions: int, obs_layout: ObsLayout | None = None):
        super().__init__()
        self.board_column = _board_column(obs_layout, n_actions)
        # the four directions a line of four runs in, as convolution kernels over a [6, 7] board
        lines = [
            torch.ones(1, 1, 1, 4),
            torch.ones(1, 1, 4, 1),
            torch.eye(4)[None, None],
            torch.eye(4).flip(1)[None, None],
        ]
        for k, kernel in enumerate(lines):
            self.register_buffer(f"line{k}", kernel, persistent=False)
        self.register_buffer("row_index", torch.arange(ROWS, dtype=torch.float32), persistent=False)
        self.register_buffer("column_eye", torch.eye(COLUMNS), persistent=False)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        batch = obs.shape[0]
        start = self.board_column
        planes = obs.reshape(batch, -1)[:, start : start + ROWS * COLUMNS * PLAYERS].float()
        planes = planes.reshape(batch, ROWS, COLUMNS, PLAYERS)
        mine, theirs = planes[..., 0], planes[..., 1]
        # a piece dropped into column c lands on the lowest empty row (row 0 is the top): row (empties - 1)
        landing = ROWS - (mine + theirs).sum(1) - 1  # [B, 7]; -1 for a full column, which places nothing
        drop = (self.row_index[None, None, :, None] == landing[:, :, None, None]).float()  # [B, 7 moves, 6, 1]
        drop = drop * self.column_eye[None, :, None, :]  # [B, 7 moves, 6, 7]: the one cell move c fills
        win = self._completes_four(mine[:, None] + drop)  # [B, 7]: move c wins
        block = self._completes_four(theirs[:, None] + drop)  # move c takes the opponent's winning cell
        has_win, has_block = win.any(1), block.any(1)
        # argmax returns the first maximal index: the first winning (else blocking) column, as the eval player
        target = torch.where(has_win, win.float().argmax(1), block.float().argmax(1))
        logits = self.column_eye[target] * CERTAIN * (has_win | has_block).float()[:, None]
        return logits, torch.zeros(batch, device=obs.device)

    def _completes_four(self, boards: torch.Tensor) -> torch.Tensor:
        """[B, 7, 6, 7] 0/1 boards -> [B, 7]: whether each holds four in a line (the board before the move held
        none: the game would have ended)."""
        flat = boards.reshape(-1, 1, ROWS, COLUMNS)
        found = torch.zeros(flat.shape[0], dtype=torch.bool, device=boards.device)
        for k in range(4):
            counts = F.conv2d(flat, getattr(self, f"line{k}"))
            found |= (counts >= 4).flatten(1).any(1)
        return found.reshape(boards.shape[0], boards.shape[1])


def _board_column(layout: ObsLayout | None, n_actions: int) -> int:
    """The flat row's first column of connect_four_v3's [6, 7, 2] board; a ValueError for any other env."""
    parts = {} if layout is None or layout.packed else {part.key: part for part in layout.parts}
    board = parts.get(BOARD_KEY)
    if board is None or board.shape != (ROWS, COLUMNS, PLAYERS) or n_actions != COLUMNS:
        raise ValueError(
            "connect_four_lookahead plays PettingZoo's connect_four_v3: a Dict observation with an 'observation' "
            f"part [6, 7, 2] and 7 actions; this env's observation has parts "
            f"{[part.name for part in layout.parts] if layout else 'none'} and {n_actions} actions"
        )
    return board.offset // 4  # a flat row is float32: its byte offset in columns


BUILT_IN = {"connect_four_lookahead": ConnectFourLookahead}


def build_scripted(name: str, env_info) -> nn.Module:
    """``selfplay.scripted``'s player for ``env_info``'s rows (on the CPU, in eval mode), its logits masked by the
    observation's ``action_mask``; a ValueError naming what does not fit."""
    action = env_info.action
    dtype = torch.from_numpy(np.zeros(0, env_info.obs_dtype)).dtype
    shape = tuple(env_info.obs_shape)
    if name in BUILT_IN:
        model = BUILT_IN[name](shape, action.head_size, env_info.obs_layout)
        check_interface(name, model, shape, dtype, action.head_size)
        model = attach_action_mask(model, env_info.obs_layout, action.head_size)
    else:
        model = build_model(name, shape, np.dtype(env_info.obs_dtype), action.head_size, obs_layout=env_info.obs_layout)
    return model.eval()
