"""Where metrics lines go besides ``metrics.jsonl``: TensorBoard (on by default) and W&B (optional).

``check_sinks`` runs with the other input checks, before anything starts; ``open_sinks`` is
called by the main process's telemetry only: no worker ever writes a metric.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Protocol

from fastrl.config import Config, ConfigError


class Sink(Protocol):
    """A place metrics lines go: ``write`` each line (with the episode returns since the last), ``close`` at the end."""

    def write(self, line: dict, returns: list[float]) -> None: ...

    def close(self) -> None: ...


def check_sinks(config: Config) -> None:
    run = config.run
    if run.tensorboard and importlib.util.find_spec("tensorboardX") is None:
        raise ConfigError(
            "run.tensorboard = true needs the tensorboardX package (a fastrl dependency): "
            "pip install tensorboardX (or set run.tensorboard = false)"
        )
    if run.wandb:
        from fastrl.telemetry.wandb_sink import require_wandb

        if not run.wandb_project.strip():
            raise ConfigError("run.wandb = true needs a project: set run.wandb_project")
        require_wandb()


def open_sinks(config: Config, run_path: Path) -> list[Sink]:
    sinks: list[Sink] = []
    if config.run.tensorboard:
        from fastrl.telemetry.tensorboard import TensorBoardSink

        sinks.append(TensorBoardSink(run_path))
    if config.run.wandb:
        from fastrl.telemetry.wandb_sink import WandbSink

        sinks.append(WandbSink(config, run_path))
    return sinks
