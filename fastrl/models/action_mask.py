"""Action masks: the ``action_mask`` part of a Dict observation masks the policy's logits wherever they are read.

The convention of sample-factory and PettingZoo: a top-level key ``action_mask``, a MultiBinary(n) or a Box
of 0/1 with one column per logit (Discrete(n): n; MultiDiscrete: each dimension's columns side by side), 1
where the action is allowed. It stays an ordinary part of the observation's row (``fastrl.envs.obs_layout``);
the model reads it back from the row and sets the disallowed logits to ``MASKED_LOGIT``.

``MASKED_LOGIT`` is -1e9, not -inf: its exp is exactly 0 in float32 and float64, so a masked action has
probability 0 in the actors' sampling kernel (``csrc_free_kernels.action_sampling``, whose inverse CDF then never
lands on it), in the losses' log-softmax and in ``eval``; and its log-probability stays finite, so an
entropy term p log p is 0 x -1e9 = 0 where -inf would give NaN. A masked logit gets no gradient.

The mask is applied by a forward hook on the model (``attach``): every forward — the actors' fixed-size
micro-batches (still row by row, so batch-invariant), the learners' losses, ``eval``, ``load_policy``, an
export — returns masked logits, for built-in and custom models alike, with the parameters and
``state_dict`` unchanged. An LSTM's replay (``fastrl.models.recurrent.unroll``) reads the heads through
``decode`` and masks them with ``mask_head``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from fastrl.envs.obs_layout import MASK_KEY, mask_part

MASKED_LOGIT = -1e9


class ActionMask:
    """Reads the mask's columns back from observation rows: ``[B, head_size]`` bool, True where allowed."""

    def __init__(self, layout, head_size: int):
        part = mask_part(layout)
        if part is None:
            raise ValueError(f"the observation has no {MASK_KEY!r} part to mask the actions with")
        self.part = part
        if self.part.image or self.part.encoding == "one_hot":
            raise ValueError(f"the {MASK_KEY!r} part must be a MultiBinary or a Box of 0/1, not {self.part}")
        if self.part.size != head_size:
            raise ValueError(
                f"the {MASK_KEY!r} part has {self.part.size} columns and the policy head {head_size}: "
                "one per action (MultiDiscrete: every dimension's side by side)"
            )
        self.packed = layout.packed
        self.column = self.part.offset // 4  # a flat row is float32: its byte offset in columns

    def allowed(self, obs: Tensor) -> Tensor:
        if self.packed:  # a uint8 row: the float32 part sits at an aligned byte offset
            raw = obs.narrow(1, self.part.offset, self.part.nbytes).contiguous()
            values = raw.view(torch.float32)
        else:
            values = obs.reshape(obs.shape[0], -1).narrow(1, self.column, self.part.size)
        return values > 0.5

    def apply(self, head: Tensor, obs: Tensor) -> Tensor:
        return head.masked_fill(~self.allowed(obs), MASKED_LOGIT)


def attach(model: nn.Module, layout, head_size: int) -> nn.Module:
    """Mask ``model``'s head with the observation's ``action_mask`` part, if it has one (see the module's doc)."""
    if mask_part(layout) is None:
        return model
    model.action_mask = ActionMask(layout, head_size)
    model.register_forward_hook(_mask_output)
    return model


def _mask_output(module: nn.Module, args: tuple, output: tuple) -> tuple:
    head = module.action_mask.apply(output[0], args[0])
    return (head, *output[1:])


def mask_head(model: nn.Module, head: Tensor, obs: Tensor) -> Tensor:
    """``head`` masked as ``model``'s forward masks it (unchanged for a model without a mask)."""
    mask = getattr(model, "action_mask", None)
    return head if mask is None else mask.apply(head, obs)
