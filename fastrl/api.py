"""The Python API: ``fastrl.train(config) -> summary``."""
from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from fastrl.config import Config, apply_overrides, config_from_dict, load_config
from fastrl.run_dir import RunDir

log = logging.getLogger(__name__)


def resolve_config(config: Config | dict | str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """A validated Config from a Config, a dict of sections, a TOML path, or None (the defaults)."""
    if isinstance(config, Config):
        config = dataclasses.asdict(config)
    if isinstance(config, dict):
        return config_from_dict(apply_overrides(config, overrides))
    return load_config(config, overrides)


def train(
    config: Config | dict | str | Path | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    run_dir: str | Path | None = None,
) -> dict:
    """Train until ``run.total_frames`` (or ``run.target_return``); returns the summary dict.

    Raises ``ConfigError`` for bad input before anything starts and ``RunFailed`` when a
    fault ends the run (workers stopped, shared memory freed, checkpoint saved when possible).
    """
    from fastrl.runtime.supervisor import Supervisor, plan_run

    config = resolve_config(config, overrides)
    plan = plan_run(config)  # every input check, before anything is created or started
    run = RunDir.create(config, run_dir)
    log.info("run directory %s", run.path)
    return Supervisor(config, run, plan).run()
