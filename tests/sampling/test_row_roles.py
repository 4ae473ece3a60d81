"""Row roles (fastrl/sampling/row_roles.py): a kind registered from outside the engine plays the rows it claims, the
executors mark them UNLEARNED, and the built-in layers' kinds are found through the same registry. Env: PettingZoo's
connect_four_v3 (two agents a game, turn-based, masked), as in tests/layers/test_multiagent.py."""
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import fastrl
from fastrl.config import ConfigError, load_config
from fastrl.envs.base import UNLEARNED
from fastrl.layer import LAYERS
from fastrl.models.action_mask import attach
from fastrl.models.uniform import UniformPolicy
from fastrl.sampling.row_roles import register_row_roles, row_roles_for, row_roles_kind

pytest.importorskip("pettingzoo")

C4_CONFIG = "configs/connect_four_selfplay.toml"
SMALL = ["run.progress=false", "run.tensorboard=false", "run.log_interval_s=0.5", "engine.rollout=8",
         "algo.minibatches=2", "algo.epochs=1", "engine.envs=8", "run.total_frames=256", "selfplay.opponents='shared'",
         "selfplay.random_share=0", "selfplay.scripted=''", "selfplay.scripted_share=0"]
MARK = 987654321  # the seed the test's runs use: its kind applies to them alone


class SecondSeatUniform:
    """Every game's second agent (odd rows) played by a uniform random player the actor builds (slot 0)."""

    built: list = []

    def __init__(self, spec, buffers, device):
        self.unlearned = np.arange(spec.envs) % spec.env_unit == 1
        self.live = buffers.slots.rows["live"]
        self.asked: list[tuple[np.ndarray, np.ndarray]] = []  # per request batch: its rows' envs, and their live
        self.player = None
        if device is not None:
            info = spec.env_info
            self.player = attach(UniformPolicy(info.obs_shape, info.action.head_size), info.obs_layout,
                                 info.action.head_size).to(device)
            self.player.register_forward_hook(lambda module, args, output: self.forwarded.append(len(args[0])))
        self.forwarded: list[int] = []
        SecondSeatUniform.built.append(self)

    def unlearned_rows(self):
        return self.unlearned

    def slots(self, envs, rows, version):
        self.asked.append((envs.copy(), self.live[rows].copy()))
        return np.where(self.unlearned[envs], 0, -1)

    def model(self, slot):
        assert slot == 0
        return self.player


@pytest.fixture
def second_seat():
    SecondSeatUniform.built = []
    with LAYERS.scoped():
        register_row_roles("second_seat_uniform", lambda config: config.run.seed == MARK, SecondSeatUniform)
        yield SecondSeatUniform


@pytest.mark.engine
def test_a_registered_row_role_plays_its_rows_and_the_executor_marks_them_opponent(tmp_path, second_seat):
    summary = fastrl.train(C4_CONFIG, [*SMALL, f"run.seed={MARK}", "engine.serial=true"], run_dir=tmp_path / "run")
    assert summary["status"] == "complete"
    actors = [roles for roles in second_seat.built if roles.player is not None]
    assert len(actors) == 1 and len(second_seat.built) == 2  # one executor (no device) and one actor
    envs = np.concatenate([envs for envs, _ in actors[0].asked])
    live = np.concatenate([live for _, live in actors[0].asked])
    assert set(envs.tolist()) == set(range(8))  # every row was asked for, each seat's rows apart
    assert (live[envs % 2 == 1] == UNLEARNED).all()  # the second seats: no loss reads them
    assert not (live[envs % 2 == 0] == UNLEARNED).any()  # the first seats: the env's own marks
    assert actors[0].forwarded and sum(actors[0].forwarded) >= (envs % 2 == 1).sum()  # its player acted on them


@pytest.mark.unit
def test_the_built_in_layers_kinds_apply_by_the_config_and_two_at_once_are_refused(second_seat):
    assert row_roles_kind(load_config(None, [])) is None  # one policy plays every row
    assert row_roles_kind(load_config(None, ["selfplay.opponents='pool'"])).name == "selfplay_pool"
    named = load_config(None, ["multiagent.policies={player_0='a', player_1='b'}"])
    assert row_roles_kind(named).name == "named_policies"
    spec = SimpleNamespace(config=named, envs=6, env_info=SimpleNamespace(agent_names=("player_0", "player_1")))
    roles = row_roles_for(spec, buffers=None)
    assert roles.unlearned_rows().tolist() == [False] * 6  # a learning named policy's rows are read by its loss
    assert roles.slots(np.array([0, 1, 5]), np.array([0, 0, 0]), version=3).tolist() == [-1, 0, 0]
    both = load_config(None, ["selfplay.opponents='pool'", f"run.seed={MARK}"])
    with pytest.raises(ConfigError, match=r"more than one kind of row role applies") as refused:
        row_roles_kind(both)
    assert "selfplay_pool" in str(refused.value) and "second_seat_uniform" in str(refused.value)


@pytest.mark.unit
def test_the_extending_pages_row_role_registers_and_claims_the_second_seats():
    """docs/extending.md's "A row role" example, as written."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "extending.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```python\n(.*?)```", page, re.S) if b.startswith("# my_roles.py"))
    namespace: dict = {}
    with LAYERS.scoped():
        exec(compile(block, "my_roles.py", "exec"), namespace)
        config = load_config(C4_CONFIG, SMALL)
        kind = row_roles_kind(config)
        assert kind is not None and kind.name == "uniform_second_seat"
        spec = SimpleNamespace(config=config, envs=4, env_unit=2)
        roles = kind.part("row_roles")(spec, None, None)  # as an executor builds it: no device, no model
        assert roles.unlearned_rows().tolist() == [False, True, False, True]
        assert roles.slots(np.arange(4), np.zeros(4, np.int64), 0).tolist() == [-1, 0, -1, 0]
