"""docs/extending.md's recipes run as written, from a folder outside the package: their code blocks are copied
there and trained with, as a user would (``fastrl train RECIPE.toml`` in that folder)."""
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

DOC = Path(__file__).resolve().parents[1] / "docs" / "extending.md"


@pytest.fixture
def recipes(tmp_path, monkeypatch):
    """Every code block of the page whose first line names a file, written into an empty folder (the cwd)."""
    written = []
    for block in re.findall(r"```(?:python|toml)\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S):
        named = re.match(r"# (\S+\.(?:py|toml))$", block.splitlines()[0])
        if named:
            (tmp_path / named.group(1)).write_text(block, encoding="utf-8")
            written.append(named.group(1))
    assert {"my_vpg.py", "my_vpg.toml", "my_model.py", "my_model.toml", "my_corridor.py", "my_corridor.toml"} <= set(
        written
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _train(folder: Path, config: str, name: str, *overrides: str) -> tuple[dict, Path]:
    """``fastrl train CONFIG`` in ``folder``, as a user types it (the package's own folder is not the cwd)."""
    run_dir = folder / "runs" / name
    sets = [arg for o in ("run.progress=false", "run.tensorboard=false", *overrides) for arg in ("--set", o)]
    done = subprocess.run([sys.executable, "-m", "fastrl", "train", f"{config}.toml", "--run-dir", str(run_dir), *sets],
                          cwd=folder, capture_output=True, text=True, timeout=240, env={**os.environ, "PYTHONPATH": ""})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), run_dir


def _digest(run_dir: Path) -> str:
    from fastrl.runs.checkpoint import load_checkpoint

    h = hashlib.sha256()
    for key, tensor in sorted(load_checkpoint(run_dir)["model"].items()):
        h.update(key.encode() + tensor.numpy().tobytes())
    return h.hexdigest()


def test_the_algorithm_recipe_trains_reports_its_metric_and_keeps_the_engines_determinism(recipes):
    summary, one = _train(recipes, "my_vpg", "one", "engine.executors=1", "engine.actors=1")
    assert summary["status"] == "complete" and summary["frames"] == 4096
    lines = [json.loads(line) for line in (one / "metrics.jsonl").read_text().splitlines()]
    assert "advantage_std" in lines[-1] and lines[-1]["advantage_std"] > 0
    _, two = _train(recipes, "my_vpg", "two", "engine.executors=2", "engine.actors=2", "engine.step_delay_s=0.001")
    assert _digest(one) == _digest(two)  # inherited: bit-identical across layouts


def test_the_env_backend_recipe_trains(recipes):
    summary, _ = _train(recipes, "my_corridor", "run", "run.total_frames=512", "run.target_return=inf")
    assert summary["status"] == "complete" and summary["frames"] == 512 and summary["episodes"] > 0


@pytest.mark.slow  # ~30 s on 2 cores: four runs
def test_the_env_backend_recipe_writes_its_rows_learns_and_resumes(recipes):
    summary, run_dir = _train(recipes, "my_corridor", "run")
    assert summary["status"] == "complete" and summary["final_return_mean"] == 1.0  # every episode reaches the end
    _train(recipes, "my_corridor", "whole", "run.total_frames=1024", "run.target_return=inf")
    _, half = _train(recipes, "my_corridor", "half", "run.total_frames=512", "run.target_return=inf")
    resume = ["--resume", str(half), "--set", "run.total_frames=1024", "--set", "run.progress=false"]
    done = subprocess.run([sys.executable, "-m", "fastrl", "train", *resume], cwd=recipes, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert _digest(half) == _digest(recipes / "runs" / "whole")  # its get_state/set_state: an exact resume


def test_a_factory_returning_half_an_adapter_is_named_before_anything_starts(recipes):
    source = (recipes / "my_corridor.py").read_text().replace("    def probe(self", "    def _probe(self")
    (recipes / "my_corridor.py").write_text(source)
    done = subprocess.run([sys.executable, "-m", "fastrl", "train", "my_corridor.toml"], cwd=recipes,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "neither a gymnasium.Env nor an env adapter: it lacks method probe()" in done.stderr


def test_the_model_recipe_trains(recipes):
    summary, _ = _train(recipes, "my_model", "run")
    assert summary["status"] == "complete" and summary["frames"] == 4096


def test_a_recipe_module_that_is_not_importable_is_refused_before_anything_starts(recipes):
    (recipes / "my_vpg.py").unlink()
    done = subprocess.run([sys.executable, "-m", "fastrl", "train", "my_vpg.toml"], cwd=recipes, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2
    assert "fastrl: bad config: algo.name = 'my_vpg:VPG': cannot import 'my_vpg'" in done.stderr
    assert not (recipes / "runs").exists()  # no run directory was made
