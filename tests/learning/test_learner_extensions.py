"""Learner extensions (fastrl/learning/extensions.py): a layer's part in the barrier loop, called at fixed points in
its registration's order, its state kept in the checkpoints; and docs/extending.md's recipe run as written."""
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import fastrl
from fastrl.layer import LAYERS
from fastrl.learning.extensions import LearnerExtension, register_learner_extension
from fastrl.runs.checkpoint import load_checkpoint

pytestmark = pytest.mark.engine

DOC = Path(__file__).resolve().parents[2] / "docs" / "extending.md"
SMALL = ["run.progress=false", "run.tensorboard=false", "engine.envs=4", "engine.rollout=16", "engine.serial=true",
         "run.total_frames=256"]  # 4 barriers of 64 frames


class Recording(LearnerExtension):
    """Writes each hook it sees, with its own name, into a shared log."""

    def __init__(self, name, log):
        self.name, self.log, self.key = name, log, f"recording_{name}"
        self.loaded = None

    def before_learning(self, storage, rollout, env_ids):
        self.log.append((self.name, "before_learning", rollout))
        return storage

    def learned(self):
        self.log.append((self.name, "learned"))

    def advanced(self):
        self.log.append((self.name, "advanced"))

    def publishing(self, model, version):
        self.log.append((self.name, "publishing", version))

    def state(self):
        return {"seen": len(self.log)}

    def load(self, state):
        self.loaded = state


@pytest.fixture
def recorded():
    log, built = [], []

    def factory(name):
        def build(learner):
            extension = Recording(name, log)
            built.append(extension)
            return extension
        return build

    with LAYERS.scoped():
        register_learner_extension("late", factory("late"), order=90)
        register_learner_extension("early", factory("early"), order=5)
        yield log, built


def test_each_barrier_calls_the_hooks_in_order_and_the_checkpoint_keeps_each_state(tmp_path, recorded):
    log, built = recorded
    summary = fastrl.train("configs/cartpole_ppo.toml", SMALL, run_dir=tmp_path / "run")
    assert summary["status"] == "complete"
    first_barrier = [entry for entry in log if entry[1:] in (("before_learning", 0), ("learned",), ("advanced",))][:6]
    assert first_barrier == [("early", "before_learning", 0), ("late", "before_learning", 0), ("early", "learned"),
                             ("late", "learned"), ("early", "advanced"), ("late", "advanced")]
    published = [entry[2] for entry in log if entry[:2] == ("early", "publishing")]
    assert published == [0, 1, 2, 3]  # θ_0 at the start, then after each update but the last
    state = load_checkpoint(tmp_path / "run")["resume"]
    assert state["recording_early"]["seen"] > 0 and state["recording_late"]["seen"] > 0

    built.clear()
    resumed = fastrl.train(None, ["run.total_frames=512"], resume=tmp_path / "run")
    assert resumed["status"] == "complete"
    assert [extension.loaded for extension in built] == [state["recording_early"], state["recording_late"]]


def test_the_learner_extension_recipe_keeps_an_average_of_theta_in_the_checkpoint(tmp_path):
    """The page's two blocks, written into an empty folder and run there as a user would: the run's workers import
    the script again, so the extension is registered in the learner's process too."""
    text = DOC.read_text(encoding="utf-8")
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        first = block.splitlines()[0]
        if first in ("# my_average.py", "# train_average.py"):
            (tmp_path / first[2:]).write_text(block, encoding="utf-8")
    assert (tmp_path / "my_average.py").is_file() and (tmp_path / "train_average.py").is_file()
    done = subprocess.run([sys.executable, "train_average.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and done.stdout.strip().splitlines()[-1] == "complete", done.stderr[-3000:]
    checkpoint = load_checkpoint(tmp_path / "runs" / "average")
    average, model = checkpoint["resume"]["parameter_average"], checkpoint["model"]
    assert set(average) == {name for name, value in model.items() if value.is_floating_point()}
    assert all(torch.isfinite(value).all() for value in average.values())
    assert any(not torch.equal(average[name], model[name]) for name in average)  # an average, not θ itself
