"""Weights & Biases, optional (``run.wandb = true``): the same scalars as TensorBoard.

``wandb`` is imported only when a run asks for it; a missing package is a ``ConfigError``
raised before anything starts (``require_wandb``), not a crash an hour into a run.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from fastrl.config import Config, ConfigError
from fastrl.errors import install_hint
from fastrl.telemetry.scalars import scalars
from fastrl.telemetry.tensorboard import RETURNS_TAG


def require_wandb() -> None:
    if importlib.util.find_spec("wandb") is None:
        raise ConfigError(
            "run.wandb = true needs the wandb package, which is not installed: "
            f"{install_hint('wandb')} (or set run.wandb = false)"
        )


class WandbSink:
    def __init__(self, config: Config, run_path: Path):
        import wandb

        self.wandb = wandb
        self.run = wandb.init(
            project=config.run.wandb_project,
            name=config.run.wandb_name or run_path.name,
            dir=str(run_path),
            config=config.to_dict(),
        )

    def write(self, line: dict, returns: list[float]) -> None:
        data: dict = scalars(line)
        if returns:
            data[RETURNS_TAG] = self.wandb.Histogram(returns)
        self.run.log(data, step=int(line["frames"]))

    def close(self) -> None:
        self.run.finish()
