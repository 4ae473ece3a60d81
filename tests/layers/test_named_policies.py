"""Named policies (``multiagent.policies``, fastrl/layers/named_policies/policies.py): each agent of a multi-agent env
played by a policy of its own, learned from its agents' rows alone or frozen from a checkpoint. Envs: PettingZoo's
connect_four_v3 (turn-based, masked) and tests/helpers/agents_env.py (a Parallel env of 3 agents that leave
early, their observations NaN from then on)."""
import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import fastrl
from fastrl.cli import main
from fastrl.config import ConfigError, load_config
from fastrl.layers.named_policies.policies import NamedPolicies, policy_map
from fastrl.runs.checkpoint import load_checkpoint

pytest.importorskip("pettingzoo")

C4_CONFIG = "configs/connect_four_selfplay.toml"
SMALL = ["run.progress=false", "run.tensorboard=false", "run.log_interval_s=0.5", "engine.rollout=8",
         "algo.minibatches=2", "selfplay.opponents='shared'", "engine.envs=8", "algo.epochs=2",
         "selfplay.random_share=0", "selfplay.scripted=''", "selfplay.scripted_share=0"]  # the shipped mix's off
TWO_ROLES = "multiagent.policies={player_0='first', player_1='second'}"
LEAVING = ["env.id='tests.helpers.agents_env:leaving_agents'", "env.backend='pettingzoo'", "model.name='mlp'",
           "env.kwargs={agents=3, life=4}", "engine.envs=6", "run.total_frames=960"]


def _c4(tmp_path, name, *overrides):
    run_dir = tmp_path / name
    summary = fastrl.train(C4_CONFIG, [*SMALL, *overrides], run_dir=run_dir)
    return summary, run_dir


def _identical(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _policies(run_dir) -> dict:
    return load_checkpoint(run_dir)["resume"]["policies"]


@pytest.mark.unit
def test_the_runs_policy_is_the_first_learning_one_in_the_envs_agent_order():
    agents = ("player_0", "player_1")
    config = load_config(None, ["multiagent.policies={player_1='b', player_0='a'}"])
    named = policy_map(config, agents)
    assert named.names == ("a", "b") and named.of_agent == (0, 1) and named.slots == 1
    assert named.rows_of(1, 8).tolist() == [1, 3, 5, 7] and named.row_slots(4).tolist() == [-1, 0, -1, 0]
    frozen = load_config(None, ["multiagent.policies={player_0='old', player_1='new'}",
                                "multiagent.frozen={old='runs/x'}"])
    named = policy_map(frozen, agents)
    assert named.names == ("new", "old") and named.of_agent == (1, 0) and named.frozen == (False, True)
    assert named.frozen_rows(4).tolist() == [True, False, True, False]
    assert policy_map(load_config(None, []), agents) is None  # no map: one shared policy


@pytest.mark.unit
def test_each_policy_learns_from_its_own_agents_rows_alone():
    """Three agents, two learning policies: the other policy's rule sees rows 1, 4 (agent_1 of two envs), the run's
    policy every other row; each policy is published into its own slot."""
    config_overrides = ["multiagent.policies={agent_0='x', agent_1='y', agent_2='x'}"]
    config = load_config(None, config_overrides)
    named = policy_map(config, ("agent_0", "agent_1", "agent_2"))
    seen, published = [], {}

    class Rule:
        entropy_coef = clip = 0.0
        trained = None

        def learn(self, storage, rollout):
            seen.append(storage["row"][:, 0].tolist())

        def advance(self):
            return None

    class Step:
        def update(self, net, rollout):
            from contextlib import nullcontext

            return nullcontext()

    class Slot:
        def __init__(self, k):
            self.k = k

        def publish(self, model, version):
            published[self.k] = (model, version)

    buffers = SimpleNamespace(player_params=Slot, control=SimpleNamespace(learner_stats=np.zeros((1, 8))))
    model = torch.nn.Linear(2, 2)
    policies = NamedPolicies(config, 6, named, buffers, None, lambda stats, rows: (model, Rule(), None, Step()))
    storage = {"row": np.repeat(np.arange(6)[:, None], 3, axis=1)}
    policies.learn(storage, 0, SimpleNamespace(of=lambda arrays: arrays), 0.01, 0.1)
    policies.advance()
    assert seen == [[1, 4]]
    assert policies.run_policy_rows(storage)["row"][:, 0].tolist() == [0, 2, 3, 5]
    policies.publish(7)
    assert published == {0: (model, 7)}
    # hts: rollout j+1 plays while the learner publishes for j+2, so each other policy has a slot per parity
    in_hts = policy_map(load_config(None, [*config_overrides, "engine.mode='hts'"]), ("agent_0", "agent_1", "agent_2"))
    assert in_hts.slots == 2 and in_hts.row_slots(3, version=7).tolist() == [-1, 1, -1]
    published.clear()
    policies = NamedPolicies(config, 6, in_hts, buffers, None, lambda stats, rows: (model, Rule(), None, Step()))
    policies.publish(7)
    policies.publish(8)
    assert published == {1: (model, 7), 0: (model, 8)}


@pytest.mark.unit
def test_named_policies_are_rated_against_each_other_from_their_games_alone():
    """Elo between named policies: each game's agents of different policies are a rated pair once all of its agents
    have reported; agents of one policy are not rated against each other."""
    from fastrl.layers.agent_rows.elo import PolicyRatings

    # three agents: x, y, x (as multiagent.policies={agent_0='x', agent_1='y', agent_2='x'}), two games
    ratings = PolicyRatings(["x", "y", "x"] * 2, agents=3, elo_k=16.0)
    ratings.add(0, 1.0)
    ratings.add(1, -1.0)
    assert ratings.games == 0 and ratings.ratings == {"x": 1200.0, "y": 1200.0}  # game 0 not complete yet
    ratings.add(2, 0.0)  # x beat y twice in game 0 (returns 1 and 0 against -1)
    assert ratings.games == 1 and ratings.ratings["x"] > 1200.0 > ratings.ratings["y"]
    assert ratings.ratings["x"] + ratings.ratings["y"] == pytest.approx(2400.0)  # zero-sum
    before = dict(ratings.ratings)
    for row, ret in ((3, 0.0), (4, 0.0), (5, 0.0)):  # game 1: a draw all round moves the favourite down
        ratings.add(row, ret)
    assert ratings.games == 2 and ratings.ratings["x"] < before["x"]
    same = PolicyRatings(["a", "a"], agents=2, elo_k=16.0)
    same.add(0, 1.0)
    same.add(1, -1.0)
    assert same.games == 0 and same.ratings == {"a": 1200.0}


@pytest.mark.engine
@pytest.mark.parametrize("mode", ["sync", pytest.param("hts", marks=pytest.mark.slow)])
def test_two_learning_policies_are_bit_identical_across_layouts_resume_exactly_and_each_learns(tmp_path, capsys,
                                                                                                mode):
    job = ["run.total_frames=512", TWO_ROLES, f"engine.mode='{mode}'"]
    _c4(tmp_path, "one", *job, "engine.executors=1", "engine.actors=1", "engine.inline_actors=false")
    _c4(tmp_path, "two", *job, "engine.executors=2", "engine.actors=2", "engine.inline_actors=false",
        "engine.step_delay_s=0.0005")
    _c4(tmp_path, "half", "run.total_frames=256", TWO_ROLES, f"engine.mode='{mode}'", "engine.executors=2")
    fastrl.train(resume=tmp_path / "half", overrides=["run.total_frames=512", "engine.executors=1", "engine.actors=1"])
    one, two, half = (load_checkpoint(tmp_path / name) for name in ("one", "two", "half"))
    assert _identical(one["model"], two["model"]) and _identical(one["model"], half["model"])
    seconds = [c["resume"]["policies"]["learning"]["second"]["model"] for c in (one, two, half)]
    assert _identical(seconds[0], seconds[1]) and _identical(seconds[0], seconds[2])
    assert not _identical(one["model"], seconds[0])  # two policies, two sets of parameters
    assert one["resume"]["policies"]["learning"]["second"]["optimizer"]["state"]  # it took optimizer steps
    lines = [json.loads(line) for line in (tmp_path / "one" / "metrics.jsonl").read_text().splitlines()]
    assert set(lines[-1]["policy_returns"]) == {"first", "second"}
    elo = lines[-1]["policy_elo"]
    assert set(elo) == {"first", "second"} and lines[-1]["policy_games"] > 0 and elo["first"] != 1200.0
    assert sum(elo.values()) == pytest.approx(2400.0, abs=0.02)
    # eval plays either policy; the run's own is the first agent's
    assert main(["eval", str(tmp_path / "one"), "--params", "policy-second", "--opponent", "random",
                 "--episodes", "4"]) == 0
    assert json.loads(capsys.readouterr().out)["games"] == 4
    with pytest.raises(ConfigError, match=r"the run's policies are first, second"):
        fastrl.evaluate(tmp_path / "one", params="policy-third")


@pytest.mark.engine
def test_a_frozen_policy_plays_its_checkpoint_and_never_learns(tmp_path):
    _, champion = _c4(tmp_path, "champion", "run.total_frames=256")
    frozen = ["multiagent.policies={player_0='learner', player_1='champion'}",
              f"multiagent.frozen={{champion='{champion}'}}"]
    summary, run_dir = _c4(tmp_path, "against", "run.total_frames=512", *frozen)
    assert summary["status"] == "complete"
    kept = _policies(run_dir)
    assert kept["learning"] == {}
    flat = torch.cat([t.reshape(-1) for t in load_checkpoint(champion)["model"].values()])
    assert torch.equal(kept["frozen"]["champion"], flat)
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert set(lines[-1]["policy_returns"]) == {"learner", "champion"}
    # resumed after the champion's run is gone: it plays the parameters the run's checkpoint kept
    champion.rename(tmp_path / "moved")
    summary = fastrl.train(resume=run_dir, overrides=["run.total_frames=768"])
    assert summary["status"] == "complete" and torch.equal(_policies(run_dir)["frozen"]["champion"], flat)
    # three agents, the middle one frozen, in a Parallel env whose departed agents' rows are NaN
    _, leaving = _c4(tmp_path, "leaving-champion", *LEAVING, "multiagent.policies={agent_0='a', agent_1='b', "
                     "agent_2='a'}")
    summary, run_dir = _c4(tmp_path, "leaving", *LEAVING, "multiagent.policies={agent_0='a', agent_1='b', "
                           "agent_2='a'}", f"multiagent.frozen={{b='{leaving}'}}")
    assert summary["status"] == "complete"
    assert all(torch.isfinite(t).all() for t in load_checkpoint(run_dir)["model"].values())


@pytest.mark.engine
@pytest.mark.parametrize(("overrides", "match"), [
    (["multiagent.policies={player_0='a'}"], r"every agent of env .*player_0, player_1.*missing: player_1"),
    (["multiagent.policies={player_0='a', player_1='b', player_9='c'}"], r"not agents of the env: player_9"),
    ([TWO_ROLES, "multiagent.frozen={third='x'}"], r"multiagent.frozen names \['third'\], which no agent plays"),
    ([TWO_ROLES, "multiagent.frozen={first='x', second='y'}"], r"freezes every policy.*nothing would learn"),
    ([TWO_ROLES, "selfplay.opponents='pool'"], r"selfplay.opponents = 'pool' draws them"),
    ([TWO_ROLES, "engine.mode='async'", "algo.name='impala'"],
     r"multiagent.policies.*'sync' or 'hts'.*engine.mode = 'async'"),
    ([TWO_ROLES, "multiagent.frozen={second='no/such/run'}"], r"multiagent.frozen.second = 'no/such/run'.*nothing"),
    (["multiagent.frozen={second='x'}"], r"multiagent.policies is empty"),
])
def test_bad_named_policies_are_refused_before_work_starts(tmp_path, overrides, match):
    with pytest.raises(ConfigError, match=match):
        _c4(tmp_path, "refused", *overrides)
    assert not (tmp_path / "refused" / "checkpoints").exists()


@pytest.mark.engine
def test_a_frozen_policy_of_another_model_is_refused_naming_the_key(tmp_path):
    cartpole = tmp_path / "cartpole"
    fastrl.train("configs/cartpole_ppo.toml", ["run.progress=false", "run.tensorboard=false",
                                               "run.total_frames=512"], run_dir=cartpole)
    with pytest.raises(ConfigError, match=r"multiagent.frozen.second = .*do not fit this run's model 'board'"):
        _c4(tmp_path, "refused", TWO_ROLES, f"multiagent.frozen={{second='{cartpole}'}}")
