"""Tanh MLP policy for flat observations, and the helpers every built-in policy shares.

Every policy maps ``obs`` (its env dtype, ``[B, *obs_shape]``) to
``(logits [B, n_actions] float32, value [B] float32)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from torch import Tensor, nn

from fastrl.models.heads import HeadedPolicy
from fastrl.models.initialisation import orthogonal_
from fastrl.models.normalizer import ObsNormalizer, ValueNormalizer, obs_to_float


def init_orthogonal(layer: nn.Module, gain: float) -> nn.Module:
    """Orthogonal weights scaled by ``gain`` and zero bias (the A2C/PPO initialisation)."""
    orthogonal_(layer.weight, gain=gain)
    if layer.bias is not None:
        nn.init.zeros_(layer.bias)
    return layer


def check_policy_args(cls_name: str, obs_shape: Sequence[int], n_actions: int) -> tuple[int, ...]:
    """Validate the arguments every policy takes; return ``obs_shape`` as a tuple of ints."""
    try:
        shape = tuple(int(d) for d in obs_shape)
    except (TypeError, ValueError):
        raise ValueError(f"{cls_name}: obs_shape must be a sequence of ints, got {obs_shape!r}") from None
    if any(d < 1 for d in shape):
        raise ValueError(f"{cls_name}: obs_shape {shape} has a dimension < 1")
    if isinstance(n_actions, bool) or not isinstance(n_actions, int) or n_actions < 1:
        raise ValueError(f"{cls_name}: n_actions must be an int >= 1, got {n_actions!r}")
    return shape


class MLPPolicy(HeadedPolicy):
    """Tanh MLP trunk shared by a policy head and a value head.

    Observations ``[B, *obs_shape]`` are flattened to ``[B, prod(obs_shape)]`` (uint8 ones are
    scaled by 1/255 first). Initialisation: orthogonal, gain sqrt(2) for the hidden layers,
    0.01 for the policy head, 1.0 for the value head, zero biases. ``hidden=()`` gives linear
    heads on the raw observation. ``gaussian``: ``n_actions`` = 2 D columns of a diagonal Gaussian
    (Box actions: ``fastrl.models.heads.GaussianHead``) instead of logits. ``lstm`` = H > 0: an LSTM
    core of H units between the trunk and the heads (``fastrl.models.recurrent``).
    """

    def __init__(
        self,
        obs_shape: Sequence[int],
        n_actions: int,
        hidden: Sequence[int] = (64, 64),
        normalize_obs: bool = False,
        normalize_value: bool = False,
        gaussian: bool = False,
        lstm: int = 0,
    ):
        super().__init__()
        self.obs_shape = check_policy_args("MLPPolicy", obs_shape, n_actions)
        self.n_actions = n_actions
        self.obs_normalizer = ObsNormalizer(self.obs_shape) if normalize_obs else None
        self.value_normalizer = ValueNormalizer() if normalize_value else None
        try:
            sizes = [int(h) for h in hidden]
        except (TypeError, ValueError):
            raise ValueError(f"MLPPolicy: hidden must be a sequence of ints, got {hidden!r}") from None
        if any(h < 1 for h in sizes):
            raise ValueError(f"MLPPolicy: hidden layer sizes must be >= 1, got {sizes}")
        self.hidden = tuple(sizes)
        layers: list[nn.Module] = []
        width = math.prod(self.obs_shape)
        for h in sizes:
            layers += [init_orthogonal(nn.Linear(width, h), math.sqrt(2)), nn.Tanh()]
            width = h
        self.trunk = nn.Sequential(*layers)
        self._build_heads(width, n_actions, gaussian, lstm, init_orthogonal)

    def encode(self, obs: Tensor) -> Tensor:
        x = obs_to_float(obs) if self.obs_normalizer is None else self.obs_normalizer(obs)
        return self.trunk(x.reshape(x.shape[0], -1))
