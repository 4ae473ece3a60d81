"""The built-in models' orthogonal initialisation (A2C/PPO's), and a way to skip it where the weights are
loaded right after the model is built.

``nn.init.orthogonal_`` takes a QR decomposition of each weight: ~0.8 s for the Nature CNN's 3136 x 512 layer
on one thread. The learner's policy needs it (its seeded initial weights are the run's); the actor's copy, the
planner's probe and a policy rebuilt from a checkpoint have theirs overwritten, so they are built inside
``weights_loaded_next()`` and keep PyTorch's cheap default initialisation until then.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

from torch import Tensor, nn

_SKIPPED = contextvars.ContextVar("fastrl_orthogonal_init_skipped", default=False)


def orthogonal_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """``nn.init.orthogonal_``, unless inside ``weights_loaded_next()``."""
    if _SKIPPED.get():
        return tensor
    return nn.init.orthogonal_(tensor, gain=gain)


@contextlib.contextmanager
def weights_loaded_next() -> Iterator[None]:
    """Build models whose weights are loaded next: their orthogonal initialisation is skipped."""
    token = _SKIPPED.set(True)
    try:
        yield
    finally:
        _SKIPPED.reset(token)
