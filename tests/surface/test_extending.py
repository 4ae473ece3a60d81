"""docs/extending.md's recipes run as written, from a folder outside the package: their code blocks are copied
there and trained with, as a user would (``fastrl train RECIPE.toml`` in that folder)."""

import copy
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.helpers.runs import model_digest

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

DOC = Path(__file__).resolve().parents[2] / "docs" / "extending.md"


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


def _train(folder: Path, config: str, name: str, *overrides: str, timeout: float = 240) -> tuple[dict, Path]:
    """``fastrl train CONFIG`` in ``folder``, as a user types it (the package's own folder is not the cwd)."""
    run_dir = folder / "runs" / name
    sets = [arg for o in ("run.progress=false", "run.tensorboard=false", *overrides) for arg in ("--set", o)]
    done = _fastrl(folder, "train", f"{config}.toml", "--run-dir", str(run_dir), *sets, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), run_dir


def _fastrl(folder: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """The ``fastrl`` command in ``folder`` with these arguments, as a user runs it there."""
    return subprocess.run([sys.executable, "-m", "fastrl", *args], cwd=folder, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": ""})




@pytest.mark.slow  # two layouts of the recipe; test_engine.py keeps layout invariance in the default tier
def test_the_algorithm_recipe_trains_reports_its_metric_and_keeps_the_engines_determinism(recipes):
    summary, one = _train(recipes, "my_vpg", "one", "run.total_frames=4096", "engine.executors=1", "engine.actors=1")
    assert summary["status"] == "complete" and summary["frames"] == 4096
    lines = [json.loads(line) for line in (one / "metrics.jsonl").read_text().splitlines()]
    assert "advantage_std" in lines[-1] and lines[-1]["advantage_std"] > 0
    _, two = _train(
        recipes,
        "my_vpg",
        "two",
        "run.total_frames=4096",
        "engine.executors=2",
        "engine.actors=2",
        "engine.step_delay_s=0.001",
    )
    assert model_digest(one) == model_digest(two)  # inherited: bit-identical across layouts


@pytest.mark.slow  # ~2 minutes on 2 cores: some 170,000 frames
@pytest.mark.timeout(1800)
def test_the_algorithm_recipe_as_written_solves_cartpole_through_its_time_limit(recipes):
    """CartPole to a mean return of 475 over 100 episodes: nearly every episode is cut at its 500-step limit, and
    each cut bootstraps from the value of its final observation."""
    summary, _ = _train(recipes, "my_vpg", "solve", timeout=900)
    assert summary["status"] == "complete" and summary["final_return_mean"] >= 475


CUT = "env.kwargs={ max_episode_steps = 16 }"  # CartPole cut at 16 steps: every env meets time limits at once


def test_the_algorithm_recipe_trains_past_time_limits(recipes):
    summary, _ = _train(recipes, "my_vpg", "cut", CUT, "run.total_frames=1024")
    assert summary["status"] == "complete" and summary["frames"] == 1024
    assert summary["episodes"] >= 8 * 8  # each env's 128 steps end an episode at least every 16


def test_the_algorithm_recipes_returns_bootstrap_each_time_limit_as_numpy_does(recipes, monkeypatch, scoped_registries):
    """The recipe's rule in a serial run (its learner in this process) on episodes cut at 16 steps: each of its
    calls for returns and advantages, on the storage and the parameters it had, against the plain recursion."""
    import fastrl
    from csrc_free_kernels.step_end import TERMINATED, TRUNCATED
    from fastrl.algos import registry
    from tests.helpers.returns_reference import returns_and_advantages_reference

    scoped_registries(registry.ALGORITHMS)  # the recipe's registration: this test's
    monkeypatch.setattr(registry, "_PLUGINS", dict(registry._PLUGINS))
    spec = importlib.util.spec_from_file_location("my_vpg", recipes / "my_vpg.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "my_vpg", module)  # what the run imports for algo.name = "my_vpg:VPG"
    spec.loader.exec_module(module)
    calls = []

    def recorded(net, storage, gamma, lam, **kwargs):
        out = module_call(net, storage, gamma, lam, **kwargs)
        kept = {k: storage[k].copy() for k in ("reward", "done", "final_obs")}
        calls.append((copy.deepcopy(net), kept, kwargs["values"].detach().clone(), gamma, lam, out))
        return out

    module_call = module.returns_and_advantages
    monkeypatch.setattr(module, "returns_and_advantages", recorded)
    overrides = [
        "engine.serial=true",
        CUT,
        "engine.rollout=32",
        "run.total_frames=1024",
        "run.progress=false",
        "run.tensorboard=false",
    ]  # 4 storages of 32 steps: time limits in each
    summary = fastrl.train(str(recipes / "my_vpg.toml"), overrides, run_dir=recipes / "runs" / "serial")
    learned = [call for call in calls if call[1]["done"].any()]  # not the warm-up's zero storage
    assert summary["status"] == "complete" and len(learned) == summary["updates"] == 4
    assert any((storage["done"] == TERMINATED).any() for _, storage, *_ in learned)  # both kinds of end
    for net, storage, values, gamma, lam, (returns, advantages) in learned:
        steps = values.shape[1] - 1
        dones = storage["done"][:, :steps]
        assert (dones == TRUNCATED).any()  # time limits in every storage
        final = np.zeros(dones.shape)
        with torch.no_grad():  # V of each cut episode's final observation, one at a time
            for env, t in zip(*np.nonzero(dones == TRUNCATED)):
                final[env, t] = float(net(torch.from_numpy(storage["final_obs"][env, t][None]))[1][0])
        want = returns_and_advantages_reference(storage["reward"][:, :steps], dones, values.numpy(), final, gamma, lam)
        np.testing.assert_allclose(returns.numpy(), want[0], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(advantages.numpy(), want[1], rtol=1e-5, atol=1e-5)


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
    done = _fastrl(recipes, "train", *resume)
    assert done.returncode == 0, done.stderr[-3000:]
    assert model_digest(half) == model_digest(recipes / "runs" / "whole")  # its get_state/set_state: an exact resume


def test_a_factory_returning_half_an_adapter_is_named_before_anything_starts(recipes):
    source = (recipes / "my_corridor.py").read_text().replace("    def probe(self", "    def _probe(self")
    (recipes / "my_corridor.py").write_text(source)
    done = _fastrl(recipes, "train", "my_corridor.toml")
    assert done.returncode == 2
    assert "neither a gymnasium.Env nor an env adapter: it lacks method probe()" in done.stderr


def test_the_model_recipe_trains(recipes):
    summary, _ = _train(recipes, "my_model", "run")
    assert summary["status"] == "complete" and summary["frames"] == 4096


@pytest.mark.slow  # CartPole to 475 with the recipe's model: a few minutes on 2 cores
@pytest.mark.timeout(1800)
def test_the_model_recipe_solves_cartpole_through_its_time_limit(recipes):
    """The recipe's model learns CartPole until nearly every episode is cut at its 500-step limit."""
    summary, _ = _train(
        recipes,
        "my_model",
        "solve",
        "run.total_frames=1_000_000",
        "run.target_return=475",
        "run.return_window=100",
        timeout=1500,
    )
    assert summary["status"] == "complete" and summary["final_return_mean"] >= 475


def test_a_recipe_module_that_is_not_importable_is_refused_before_anything_starts(recipes):
    (recipes / "my_vpg.py").unlink()
    done = _fastrl(recipes, "train", "my_vpg.toml")
    assert done.returncode == 2
    assert "fastrl: bad config: algo.name = 'my_vpg:VPG': cannot import 'my_vpg'" in done.stderr
    assert not (recipes / "runs").exists()  # no run directory was made


def test_a_rule_reporting_a_metric_its_registration_does_not_name_is_stopped_at_warm_up(recipes):
    """The recipe's registration without its metric: the warm-up's trial of the rule finds it before any env
    steps, the run ends as a fault (exit 1) with the metric named and nothing learned or left behind."""
    module = recipes / "my_vpg.py"
    module.write_text(module.read_text().replace('metrics=("advantage_std",),', "metrics=(),"))
    run_dir = recipes / "runs" / "unnamed"
    done = _fastrl(recipes, "train", "my_vpg.toml", "--run-dir", str(run_dir), "--set", "run.progress=false")
    assert done.returncode == 1, done.stderr[-2000:]
    assert "reported the metric 'advantage_std', which its registration does not name" in done.stderr
    assert "found at warm-up, before the run started" in done.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["frames"] == 0 and summary.get("updates", 0) == 0, summary
