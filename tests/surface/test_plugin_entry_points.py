"""A plug-in installed with pip registers itself through its entry points (docs/extending.md, "Shipping a plug-in
with pip"): the page's package is pip-installed into a folder of its own and a run started from an empty folder,
with nothing importing it, has its layer in every process; a broken entry point is named at the config check."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fastrl.runs.checkpoint import load_checkpoint

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

DOC = Path(__file__).resolve().parents[2] / "docs" / "extending.md"
SECTION = DOC.read_text(encoding="utf-8").split("## Shipping a plug-in with pip")[1]


def _fastrl(cwd: Path, site: Path, *args: str) -> subprocess.CompletedProcess:
    """The ``fastrl`` command in ``cwd`` with ``site`` on the path, as an environment with it installed has."""
    return subprocess.run([sys.executable, "-m", "fastrl", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=240, env={**os.environ, "PYTHONPATH": str(site)})


def test_a_layer_installed_with_pip_is_found_in_every_process_by_its_entry_point(tmp_path):
    package = tmp_path / "fastrl-average"
    package.mkdir()
    for block in re.findall(r"```(?:python|toml)\n(.*?)```", SECTION, re.S):
        (package / block.splitlines()[0][2:]).write_text(block, encoding="utf-8")
    site = tmp_path / "site"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
         "--target", str(site), str(package)], capture_output=True, text=True, timeout=240)
    assert installed.returncode == 0, installed.stderr[-3000:]
    (tmp_path / "work").mkdir()
    run_dir = tmp_path / "work" / "run"
    sets = ["run.total_frames=2048", "run.progress=false", "run.tensorboard=false", "run.log_interval_s=0.2",
            "engine.executors=1", "engine.actors=1",  # the learner in a process of its own
            "parameter_average.decay=0.9"]  # the layer's own config section
    done = _fastrl(tmp_path / "work", site, "train", "cartpole_ppo", "--run-dir", str(run_dir),
                   *[arg for s in sets for arg in ("--set", s)])
    assert done.returncode == 0, done.stderr[-3000:]
    average = load_checkpoint(run_dir)["resume"]["parameter_average"]  # kept by the learner process's extension
    assert average and all(value.isfinite().all() for value in average.values())
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert lines[-1]["best_return"] is not None and lines[-1]["best_return"] >= 9  # the main process's section
    assert "decay = 0.9" in (run_dir / "config.toml").read_text()  # its section, written with the run's config
    listed = _fastrl(tmp_path / "work", site, "config")
    assert listed.returncode == 0 and "parameter_average.decay" in listed.stdout
    refused = _fastrl(tmp_path / "work", site, "train", "cartpole_ppo", "--set", "parameter_average.decay=2")
    assert refused.returncode == 2 and "parameter_average.decay = 2" in refused.stderr


def test_an_entry_point_that_does_not_load_is_named_at_the_config_check(tmp_path):
    """A package whose declared module fails to import: exit 2 before any worker starts, naming it."""
    site = tmp_path / "site"
    info = site / "broken_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[fastrl.algorithms]\nbroken = broken_plugin:ALGORITHM\n")
    (site / "broken_plugin.py").write_text("raise ImportError('needs a library this machine lacks')\n")
    done = _fastrl(tmp_path, site, "train", "cartpole_ppo", "--set", "run.total_frames=64")
    assert done.returncode == 2, done.stderr[-3000:]
    assert "the algorithm 'broken' that broken-plugin declares" in done.stderr
    assert "'fastrl.algorithms'" in done.stderr and "needs a library this machine lacks" in done.stderr
    assert "Traceback" not in done.stderr
    assert not list(tmp_path.glob("runs*"))  # refused before anything was made


@pytest.mark.unit
def test_an_entry_points_algorithm_is_no_built_in(monkeypatch):
    """What code registered is told from what an installed package declares without importing either: a plug-in's
    algorithm was once counted among the built-ins (whose rule contract is taken as checked), and the config's
    reading of the built-ins' old keys imported it before the entry-point check could name it."""
    import importlib.metadata

    from fastrl.registry import Registry

    declared = importlib.metadata.EntryPoint("plugged", "nowhere_at_all:ALGORITHM", "fastrl.algorithms")
    monkeypatch.setattr(
        importlib.metadata, "entry_points", lambda group=None: [declared] if group == declared.group else []
    )
    made = Registry("algorithm")
    made.register("own", "nowhere_either:ALGORITHM")
    assert made.registered_here() == ("own",)
    assert made.names() == ("own", "plugged")  # both are known; neither was imported
