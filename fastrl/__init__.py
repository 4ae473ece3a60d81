"""fastrl: a shared-memory, single-workstation, high-throughput deep-RL engine."""
from fastrl.api import export_policy, load_policy, train
from fastrl.config import Config, ConfigError, load_config
from fastrl.evaluate import evaluate
from fastrl.process.faults import RunFailed, RunInterrupted
from fastrl.telemetry.plot import plot_runs

__all__ = ["Config", "ConfigError", "RunFailed", "RunInterrupted", "evaluate", "export_policy", "load_config", "load_policy",
           "plot_runs", "train"]
__version__ = "0.1.0"
