"""The run's policy network: what actors, learners, the last-checkpoint path and ``fastrl eval`` all build
from the env's spaces and the config, so every one of them holds the same network."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from fastrl.envs.actions import BOX
from fastrl.models.initialisation import weights_loaded_next
from fastrl.models.registry import build_model
from fastrl.schema import AUTO, resolved_bool

if TYPE_CHECKING:
    from fastrl.envs import EnvInfo
    from fastrl.schema import Config


def build_policy(env_info: EnvInfo, config: Config, device: torch.device | str | None = None) -> torch.nn.Module:
    """``config.model`` for ``env_info``'s observations and actions (on the CPU; ``device`` only decides
    what ``model.precision = 'auto'`` picks, by default the learners' ``engine.device`` as the run placed it
    (``fastrl.devices.resolve_devices``), so that actors and learners compute in one precision wherever each runs)."""
    model = config.model
    if device is None and config.engine.device == AUTO:
        raise ValueError("build_policy: engine.device = 'auto' is placed first (fastrl.devices.resolve_devices)")
    device = torch.device(config.engine.device if device is None else device)
    action = env_info.action
    assert action is not None, "EnvInfo fills in its action spec (Discrete(n_actions) by default)"
    normalize_obs = resolved_bool(model.normalize_obs, "model.normalize_obs")
    normalize_value = resolved_bool(config.algo.normalize_returns, "algo.normalize_returns")
    return build_model(
        model.name,
        env_info.obs_shape,
        np.dtype(env_info.obs_dtype),
        action.head_size,
        model.hidden,
        model.kwargs,
        model.precision,
        normalize_obs,
        device,
        normalize_value,
        gaussian=action.kind == BOX,
        lstm=model.lstm,
        obs_layout=env_info.obs_layout,
    )


def build_copy(env_info: EnvInfo, config: Config, device: torch.device | str | None = None) -> torch.nn.Module:
    """``build_policy`` for a model whose weights are loaded next (an actor's copy of the learner's, a checkpoint's):
    the built-in models skip their orthogonal initialisation (``fastrl.models.initialisation``)."""
    with weights_loaded_next():
        return build_policy(env_info, config, device)
