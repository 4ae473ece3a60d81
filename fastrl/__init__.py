"""fastrl: a shared-memory, single-workstation, high-throughput deep-RL engine."""

import fastrl.layers.builtin  # noqa: F401  fastrl's own layers, registered in every process that imports fastrl
from fastrl.algos.registry import Algorithm, register_algorithm
from fastrl.api import export_policy, load_policy, shutdown, train
from fastrl.config import Config, ConfigError, load_config
from fastrl.errors import DISTRIBUTION, FastrlError
from fastrl.evaluation import evaluate
from fastrl.layer import Layer, register_layer
from fastrl.process.faults import RunFailed, RunInterrupted
from fastrl.telemetry.plot import plot_runs

__all__ = [
    "Algorithm",
    "Config",
    "ConfigError",
    "FastrlError",
    "Layer",
    "RunFailed",
    "RunInterrupted",
    "evaluate",
    "export_policy",
    "load_config",
    "load_policy",
    "plot_runs",
    "register_algorithm",
    "register_layer",
    "shutdown",
    "train",
]
try:  # the version is pyproject.toml's, written once
    from importlib.metadata import version as _version

    __version__ = _version(DISTRIBUTION)
except Exception:  # a checkout on sys.path that was never installed
    __version__ = "0+unknown"
