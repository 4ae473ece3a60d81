"""A checkpoint's policy rebuilt as the actors build it: what ``fastrl.load_policy``, ``fastrl eval``
and ``fastrl export`` start from. The checkpoint gives everything needed: ``config`` (the resolved
run config: env and model) and ``model`` (the parameters)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastrl.config import Config, ConfigError
from fastrl.evaluation.targets import load_checkpoint_of, resolve_checkpoint


def rebuild_policy(config: Config, state_dict: dict, path: Path):
    """The run's policy network, built as the actors build it, with the checkpoint's parameters."""
    import torch

    from fastrl.envs import probe_env
    from fastrl.models.policy import build_copy

    try:
        info = probe_env(config.env)
        with torch.random.fork_rng(devices=[]):  # initialisation draws: leave the caller's RNG alone
            model = build_copy(info, config, device="cpu")  # eval plays on the CPU
    except ValueError as exc:  # an env id or model that no longer resolves here
        raise ConfigError(f"checkpoint {str(path)!r}: {exc}") from None
    try:
        model.load_state_dict(state_dict)
    except RuntimeError as exc:
        raise ConfigError(
            f"checkpoint {str(path)!r}: its parameters do not fit model {config.model.name!r}: {exc}"
        ) from None
    return model.eval(), info


@dataclass(frozen=True)
class TrainedPolicy:
    """A checkpoint's policy, rebuilt as ``fastrl eval`` plays it; ``fastrl.load_policy`` returns its model."""

    model: Any  # torch.nn.Module in eval mode, the checkpoint's parameters loaded
    env_info: Any  # the checkpoint's env: observation shape and dtype, number of actions
    config: Config  # the checkpoint's own config
    checkpoint: dict
    path: Path  # the checkpoint file
    params: str  # "model" (one learner), "average" or "learner-<i>"


def load_trained(target: str | Path, params: str | int = "auto", trust_code: bool = False) -> TrainedPolicy:
    """Resolve ``target`` and ``params`` as ``evaluate`` does and rebuild that checkpoint's policy;
    ``trust_code``: import and call a ``module:factory`` env or model its config names.

    Raises ``ConfigError`` for bad input (no such path or checkpoint, unknown ``params``, a file
    that is not a fastrl checkpoint, code named and not trusted, an env or model that no longer
    resolves here).
    """
    path, which = resolve_checkpoint(target, params)
    checkpoint, config, which = load_checkpoint_of(path, which, trust_code)
    model, info = rebuild_policy(config, checkpoint["model"], path)
    return TrainedPolicy(model, info, config, checkpoint, path, which)
