"""Recurrent policies (``model.lstm = H``): an LSTM core between a model's encoder and its heads.

A built-in model with ``lstm = H`` maps ``(obs [B, ...], hidden [B, 2H])`` to ``(head, value,
hidden')``: the encoder's features go through one ``nn.LSTMCell`` and the heads read its output.
``hidden`` is the cell's (h, c) side by side, one float32 row per env, so it can live in the
trajectory slots like any other per-step field (``fastrl.buffers.slots``: ``hidden[t]`` is what the
policy reads at row t, zero where an episode starts):

- the actor reads ``hidden[t]`` with the observation, and writes what the core returns into
  ``hidden[t + 1]`` before it hands the action back; the executor zeroes ``hidden[t + 1]`` when the
  step ended the episode, copies the last row into the next slot's row 0 as it does the
  observation, and saves it with the env's state at a checkpoint (exact resume);
- the learner replays a storage from its row 0 (``unroll``): truncated back-propagation through
  the rollout, from the state the actor had at its start, recomputed with the learner's θ, the
  state zeroed at every episode start (R2D2's "stored state", CleanRL's ``ppo_atari_lstm``).

Every row's action still depends only on that env's own history and the executor's random
number, whatever the batching: the actor forwards fixed-size micro-batches of (obs, hidden) rows.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from csrc_free_kernels.step_end import CONTINUES
from fastrl.models.action_mask import mask_head
from fastrl.models.initialisation import orthogonal_


class LSTMCore(nn.Module):
    """``features [B, W]``, ``hidden [B, 2H]`` (h then c) -> ``(h' [B, H], hidden' [B, 2H])``.

    Orthogonal weights and zero biases, as CleanRL's ``ppo_atari_lstm``."""

    def __init__(self, width: int, size: int):
        super().__init__()
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"lstm size must be an int >= 1, got {size!r}")
        self.size = size
        self.cell = nn.LSTMCell(width, size)
        for name, param in self.cell.named_parameters():
            if name.startswith("weight"):
                orthogonal_(param, 1.0)
            else:
                nn.init.zeros_(param)

    def forward(self, x: Tensor, hidden: Tensor | None) -> tuple[Tensor, Tensor]:
        if hidden is None:
            hidden = x.new_zeros((x.shape[0], 2 * self.size))
        h, c = self.cell(x, (hidden[:, : self.size], hidden[:, self.size :]))
        return h, torch.cat([h, c], dim=-1)


def hidden_size(model: nn.Module) -> int:
    """The width of a model's per-env recurrent state row (2 H), 0 for a feed-forward model."""
    return int(getattr(model, "hidden_size", 0))


def starts(done: Tensor) -> Tensor:
    """``[N, T + 1]`` bool: row t begins an episode (step t − 1 ended one); row 0 is not marked, its stored
    state is already zero where an episode began there (the executor zeroed it)."""
    ended = done[:, :-1] != CONTINUES
    return torch.cat([torch.zeros_like(ended[:, :1]), ended], dim=1)


def unroll(model: nn.Module, obs: Tensor, hidden0: Tensor, done: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Replay ``[N, T + 1]`` rows from their stored first state: ``(head [N, T+1, A], value [N, T+1],
    hidden_after [N, T+1, 2H])``, ``hidden_after[:, t]`` the state after reading row t (before any reset:
    what a truncated episode's final observation is valued with). The encoder runs on every row at once;
    only the cell steps through time."""
    n, t1 = obs.shape[:2]
    features = model.encode(obs.reshape(n * t1, *obs.shape[2:])).reshape(n, t1, -1)
    keep = (~starts(done)).to(features.dtype).unsqueeze(-1)  # [N, T+1, 1]: 0 where the state resets
    hidden, outputs, after = hidden0, [], []
    for t in range(t1):
        h, hidden = model.core(features[:, t], hidden * keep[:, t] if t else hidden)
        outputs.append(h)
        after.append(hidden)
    head, value = model.decode(torch.stack(outputs, 1).reshape(n * t1, -1))
    head = mask_head(model, head, obs.reshape(n * t1, *obs.shape[2:]))  # as forward's hook masks it
    return head.reshape(n, t1, -1), value.reshape(n, t1), torch.stack(after, 1)
