"""The optimizers a config names (``algo.optimizer``), and RMSprop as TensorFlow computes it (``"rmsprop_tf"``).

PyTorch's ``RMSprop`` and TensorFlow's ``RMSPropOptimizer`` differ in two places:

- torch starts the square average at 0, TF at 1. With alpha 0.99 torch's first step divides the
  gradient by ``sqrt(0.01 g^2) = 0.1 |g|``, so every weight with a gradient moves by about
  10 x lr whatever its size; TF's first steps move a weight by about lr x g.
- torch adds eps outside the square root (``g / (sqrt(v) + eps)``), TF inside (``g / sqrt(v + eps)``),
  so the same eps means a different floor.

The A2C and IMPALA Atari settings (openai/baselines' a2c, IMPALA) were tuned with TF's optimizer;
stable-baselines3's ``sb3_contrib``/rl-zoo ``RMSpropTFLike`` (rl-zoo's Atari A2C) reproduces it in
torch for the same reason. Here: no momentum, not centered, no weight decay (what the configs use):

    v = alpha v + (1 - alpha) g^2      (v starts at 1)
    p = p - lr g / sqrt(v + eps)
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from fastrl.schema import AlgoConfig


class RMSpropTF(torch.optim.Optimizer):
    """TF's RMSprop: square average initialised to ones, eps inside the square root.

    State per parameter: ``square_avg`` (v above) and ``step`` (updates taken, for inspection).
    """

    def __init__(self, params: Iterable, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-10):
        if lr <= 0.0 or eps <= 0.0 or not 0.0 <= alpha <= 1.0:
            raise ValueError(f"RMSpropTF: need lr > 0, eps > 0, 0 <= alpha <= 1 (got {lr}, {eps}, {alpha})")
        super().__init__(params, {"lr": lr, "alpha": alpha, "eps": eps})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self._update(p, group)
        return loss

    def _update(self, p: torch.Tensor, group: dict) -> None:
        state = self.state[p]
        if not state:
            state["step"] = 0
            state["square_avg"] = torch.ones_like(p, memory_format=torch.preserve_format)
        state["step"] += 1
        square_avg = state["square_avg"]
        square_avg.mul_(group["alpha"]).addcmul_(p.grad, p.grad, value=1.0 - group["alpha"])
        p.addcdiv_(p.grad, square_avg.add(group["eps"]).sqrt_(), value=-group["lr"])


def make_optimizer(model: torch.nn.Module, algo: AlgoConfig) -> torch.optim.Optimizer:
    """The optimizer ``algo.optimizer`` names, over ``model``'s parameters."""
    if algo.optimizer == "rmsprop":
        return torch.optim.RMSprop(model.parameters(), lr=algo.lr, alpha=algo.rms_alpha, eps=algo.eps)
    if algo.optimizer == "rmsprop_tf":  # TF's formula (fastrl.algos.optimizers)
        return RMSpropTF(model.parameters(), lr=algo.lr, alpha=algo.rms_alpha, eps=algo.eps)
    if algo.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=algo.lr, eps=algo.eps)
    if algo.optimizer == "radam":
        return torch.optim.RAdam(model.parameters(), lr=algo.lr, eps=algo.eps)
    return torch.optim.SGD(model.parameters(), lr=algo.lr)
