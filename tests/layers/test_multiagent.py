"""Multi-agent envs in the engine (fastrl/envs/pettingzoo.py): each agent a row, waiting and departed agents kept out
of the loss in every mode, what a multi-agent run cannot do refused before it starts, an env's agents kept on one
executor, and Connect Four's board model. Self-play and matches: test_selfplay.py; two-player Pong:
test_two_player_pong.py. Envs: PettingZoo's connect_four_v3 (turn-based, masked) and tests/helpers/agents_env.py (a
Parallel env whose agents leave early, their observations NaN from then on)."""
import json

import numpy as np
import pytest
import torch

import fastrl
from csrc_free_kernels.step_end import CONTINUES, TERMINATED
from fastrl.algos.ppo import PPOBatch, ppo_loss
from fastrl.config import ConfigError, EnvConfig
from fastrl.envs.base import ABSENT, ACTING, WAITING
from fastrl.envs.pettingzoo import make_games
from fastrl.envs.registry import backend_for, probe_env
from fastrl.evaluation.opponents import connect_four_lookahead
from tests.helpers.multiagent_runs import (
    CONNECT_FOUR,
    LEAVING,
    MLP,
    POOL,
    SMALL,
    c4_run,
    identical,
    leaving_run,
    model_params,
)

pytest.importorskip("pettingzoo")


@pytest.mark.unit
def test_a_turn_based_game_has_one_acting_row_and_the_loser_learns_its_loss_at_the_winners_move():
    envs = make_games(EnvConfig(id=CONNECT_FOUR), [0, 1])
    game = envs[0].group
    rows = np.zeros((2, *envs[0].obs_shape), np.float32)
    try:
        for m, env in enumerate(envs):
            env.reset(3, rows[m])
        rng = np.random.default_rng(0)
        for _ in range(42):
            assert sorted(game.live.tolist()) == [WAITING, ACTING]
            mover = int(np.flatnonzero(game.live == ACTING)[0])
            actions = [0, 0]
            actions[mover] = connect_four_lookahead(game.raw[mover], None, rng)
            game.step(actions)
            results = []
            for m, env in enumerate(envs):  # as the executor does: a member over is reset before the next reads
                results.append(env.step(actions[m], rows[m], rows[m]))
                if results[-1][3]:
                    env.reset(4, rows[m])
            if results[0][3]:
                break
            assert [r[2] for r in results] == [CONTINUES, CONTINUES] and not any(r[0] for r in results)
        rewards = sorted(r[0] for r in results)
        assert rewards in ([-1.0, 1.0], [0.0, 0.0])  # the winner +1 and the waiting loser -1 at one step, or a draw
        assert all(r[2] == TERMINATED and r[3] for r in results)
    finally:
        envs[0].close()


@pytest.mark.unit
def test_a_departed_agents_row_is_zeros_and_absent_until_the_episode_ends():
    envs = make_games(EnvConfig(id=LEAVING, backend="pettingzoo", kwargs={"agents": 3, "life": 2}), [0, 1, 2])
    game = envs[0].group
    rows = np.zeros((3, 4), np.float32)
    for m, env in enumerate(envs):
        env.reset(1, rows[m])
    seen = []
    for _ in range(6):
        game.step([0, 1, 2])
        results = [env.step(0, rows[m], rows[m]) for m, env in enumerate(envs)]
        assert np.isfinite(rows).all()  # the env's NaN never reaches a row
        seen.append((game.live.tolist(), [r[2] for r in results], results[0][3]))
        if game.over:
            break
    assert seen == [
        ([ACTING] * 3, [CONTINUES] * 3, False),
        ([ABSENT, ACTING, ACTING], [TERMINATED, CONTINUES, CONTINUES], False),
        ([ABSENT, ACTING, ACTING], [TERMINATED, CONTINUES, CONTINUES], False),
        ([ABSENT, ABSENT, ACTING], [TERMINATED, TERMINATED, CONTINUES], False),
        ([ABSENT, ABSENT, ACTING], [TERMINATED, TERMINATED, CONTINUES], False),
        ([ABSENT] * 3, [TERMINATED] * 3, True),
    ]
    assert not rows[:2].any()


@pytest.mark.unit
def test_rows_that_did_not_act_change_nothing_in_the_ppo_loss():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 4)
    forward = lambda obs: (model(obs)[:, :3], model(obs)[:, 3])  # noqa: E731
    obs = torch.randn(6, 4)
    live = torch.tensor([ACTING, ACTING, WAITING, ABSENT, ACTING, WAITING])
    acting, present = (live == ACTING).float(), (live >= WAITING).float()

    def loss(garbage: float):
        junk = torch.where(acting.bool(), torch.zeros(6), torch.full((6,), garbage))  # policy terms of non-acting
        absent = torch.where(present.bool(), torch.zeros(6), torch.full((6,), garbage))  # value terms of absent rows
        batch = PPOBatch(obs, torch.tensor([0, 1, 2, 0, 1, 2]), torch.zeros(6) + junk, torch.zeros(6),
                         torch.linspace(-1, 1, 6) + junk, torch.ones(6) + absent, acting, present)
        value, _ = ppo_loss(forward, batch, 0.2, 0.0, 0.5, 0.01, normalize_advantages=True)
        return value

    assert torch.isfinite(loss(0.0)) and loss(0.0) == loss(1e6)


@pytest.mark.unit
def test_rows_that_did_not_act_change_nothing_in_the_impala_loss():
    """Env 0 turn-based (its waiting rows' actions and behaviour log-probs thrown away), env 1's agent gone after
    step 1 (its absent rows' actions, log-probs and rewards never read): junk there leaves the loss as it was."""
    from fastrl.algos.impala import impala_loss
    from fastrl.buffers.device_storage import Uploads
    from fastrl.config import AlgoConfig
    from tests.helpers.recording import LinearPolicy

    torch.manual_seed(0)
    model = LinearPolicy((4,), 3)
    live = np.array([[ACTING, WAITING, ACTING, WAITING, ACTING], [ACTING, ACTING, ABSENT, ABSENT, ABSENT]], np.int8)
    done = np.full((2, 5), CONTINUES, np.int8)
    done[1, 1] = TERMINATED  # the agent's last step: nothing after it bootstraps into its rows before

    def loss(garbage: float) -> torch.Tensor:
        unused = (live != ACTING).astype(np.float32) * garbage
        gone = (live == ABSENT).astype(np.float32) * garbage
        storage = Uploads(torch.device("cpu")).of({
            "obs": np.random.default_rng(1).standard_normal((2, 5, 4)).astype(np.float32) * (live != ABSENT)[..., None],
            "action": (np.array([[0, 1, 2, 0, 1], [2, 1, 0, 2, 1]]) + unused.astype(np.int64)) % 3,
            "logp": (np.full((2, 5), -1.1) + unused).astype(np.float32),
            "reward": (np.array([[0, 0, 0, 1, 0], [0, -1, 0, 0, 0]]) + gone).astype(np.float32),
            "done": done,
            "live": live,
        })
        value, _ = impala_loss(model, storage, AlgoConfig(), torch.device("cpu"))
        return value

    assert torch.isfinite(loss(0.0)) and loss(0.0) == loss(7.0)


@pytest.mark.unit
def test_pettingzoo_ids_and_factories_find_their_backend():
    assert backend_for(EnvConfig(id=CONNECT_FOUR)).name == "pettingzoo"
    assert backend_for(EnvConfig(id=LEAVING, backend="pettingzoo")).name == "pettingzoo"
    assert backend_for(EnvConfig(id="tests.helpers.masked_env:masked")).name == "factory"  # a gym factory still
    info = probe_env(EnvConfig(id=CONNECT_FOUR))
    assert info.agents == 2 and info.obs_shape == (7 + 6 * 7 * 2,) and info.action.head_size == 7


@pytest.mark.engine
@pytest.mark.parametrize(("mode", "algo", "extra"), [
    ("sync", "ppo", []), ("hts", "ppo", []), ("sync", "a2c", []), ("hts", "a2c", []),
    # IMPALA: each agent's slots go to the learner as they fill (2 to a batch), the env steps once all have one
    ("async", "impala", ["algo.batch_slots=2"]),
    # two GALA learners, each on one env of 3 agents
    ("gala", "a2c", ["engine.learners=2", "algo.optimizer='rmsprop'"]),
])
def test_agents_that_leave_early_never_reach_the_loss(tmp_path, mode, algo, extra):
    """3 agents per env, 3 rows per env step, in every mode; the departed agents' NaN observations would make the
    loss NaN."""
    summary, run_dir = leaving_run(tmp_path, "run", f"algo.name='{algo}'", *extra, mode=mode)
    assert summary["status"] == "complete" and summary["frames"] == 960  # 6 rows x 8 steps x 20 updates
    assert all(torch.isfinite(t).all() for t in model_params(run_dir).values())
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert lines[-1]["episodes"] > 0


@pytest.mark.engine
def test_an_async_pair_whose_envs_never_run_dry_still_beats_its_heartbeat_and_stops(tmp_path):
    """Connect Four under IMPALA with inline actors: free slots always wait, so the executor-actor pair always has
    work; it must still return to its loop (the heartbeat the watchdog reads, the stop flag) within a poll."""
    summary, _ = c4_run(tmp_path, "async", "engine.mode='async'", "algo.name='impala'", "engine.envs=64",
                     "engine.inline_actors=true", "reliability.watchdog_s=1.5", "run.max_seconds=2.5",
                     "run.total_frames=100_000_000")
    assert summary["status"] == "complete" and summary["frames"] > 0


@pytest.mark.engine
@pytest.mark.parametrize(("overrides", "match"), [
    (["engine.envs=7"], r"engine.envs = 7 counts agent rows.*2 agents.*multiple of 2"),
    (["env.on_error='reset'"], r"cannot reset one env of a failed group"),
    (["engine.mode='gala'", "engine.learners=2", "engine.envs=6", "algo.name='a2c'"],
     r"each learner's envs must hold whole envs of 2 agents"),
    (["algo.name='pqn'"], r"algo.name = 'pqn' does not learn from multi-agent envs"),
    (["engine.executors=5"], r"engine.executors = 5 is more than the 4 envs of 2 agents"),
])
def test_what_a_multi_agent_run_cannot_do_is_refused_before_it_starts(tmp_path, overrides, match):
    with pytest.raises(ConfigError, match=match):
        c4_run(tmp_path, "refused", *overrides)
    assert not (tmp_path / "refused" / "checkpoints").exists()


@pytest.mark.unit
def test_the_auto_layout_never_splits_an_envs_agents_across_executors():
    from fastrl.config import EngineConfig
    from fastrl.process.auto_layout import Machine, choose_layout

    # (cores, rows, agents, executors): never more executors than games; 32 games on 12 free cores: 11 of 3 each
    for cores, envs, agents, executors in [(2, 2, 2, 1), (16, 8, 2, 4), (16, 64, 2, 11), (2, 16, 1, 2)]:
        layout = choose_layout(EngineConfig(envs=envs), Machine(cores, cuda=False), agents)
        assert layout.executors == executors, (cores, envs, agents, layout)


@pytest.mark.unit
def test_the_board_model_convolves_connect_fours_planes_where_they_sit_in_the_row(tmp_path):
    """model.name = 'board' (fastrl.models.board): the row's [6, 7, 2] part read back as planes of the board (a
    piece moved one column moves the first convolution's output one column), the mask beside it as features."""
    from fastrl.config import load_config
    from fastrl.models.policy import build_policy

    config = load_config("configs/connect_four_selfplay.toml", ["model.name='board'", "model.hidden=[64]"])
    info = probe_env(config.env)
    torch.manual_seed(0)
    policy = build_policy(info, config, "cpu")
    layout = info.obs_layout
    board = next(part for part in layout.parts if part.name == "observation")
    rows = torch.zeros((2, *info.obs_shape))
    mask = next(part for part in layout.parts if part.name == "action_mask")
    rows[:, mask.offset // 4 : mask.offset // 4 + 7] = 1.0
    planes = rows[:, board.offset // 4 : board.offset // 4 + 84].view(2, 6, 7, 2)
    planes[0, 5, 2, 0] = 1.0  # my piece at the bottom of column 2; in the second row, of column 3
    planes[1, 5, 3, 0] = 1.0
    first = policy.convolutions[0]
    with torch.no_grad():
        seen = first(torch.stack([planes[0], planes[1]]).permute(0, 3, 1, 2))
        logits, value = policy(rows)
    assert torch.equal(seen[0, :, :, 0:6], seen[1, :, :, 1:7])  # the same piece, one column over
    assert logits.shape == (2, 7) and value.shape == (2,) and not torch.equal(logits[0], logits[1])
    with pytest.raises(ConfigError, match=r"model 'board' reads a Dict observation's rank-3 float part"):
        fastrl.train("configs/cartpole_ppo.toml", [*SMALL, "model.name='board'"], run_dir=tmp_path / "cartpole")


@pytest.mark.engine
def test_connect_four_trains_with_the_board_model_bit_identically_across_layouts(tmp_path):
    job = ["run.total_frames=640", "algo.epochs=2", *POOL, "model.name='board'", "model.hidden=[32]",
           "model.kwargs={channels=[8, 8]}"]
    c4_run(tmp_path, "one", *job, "engine.executors=1", "engine.actors=1", "engine.inline_actors=false")
    c4_run(tmp_path, "two", *job, "engine.executors=2", "engine.actors=2", "engine.inline_actors=false")
    assert identical(model_params(tmp_path / "one"), model_params(tmp_path / "two"))
    assert any(name.startswith("convolutions.") for name in model_params(tmp_path / "one"))


@pytest.mark.unit
def test_a_convolutional_models_learner_gets_the_threads_a_cnns_does(monkeypatch):
    """engine.learner_threads = 'auto': the board model's step is split over the cores as the Atari CNN's is (on
    2 cores both threads, since sync's executors wait while it learns); an MLP's stays on one thread."""
    from fastrl.config import load_config
    from fastrl.process.auto_layout import Machine
    from fastrl.process.run_plan import plan_run

    monkeypatch.setattr(Machine, "detect", classmethod(lambda cls: Machine(2, cuda=False)))
    board = plan_run(load_config("configs/connect_four_selfplay.toml", []))
    mlp = plan_run(load_config("configs/connect_four_selfplay.toml", MLP))
    assert (board.config.model.name, board.config.engine.learner_threads) == ("board", 2)
    assert (mlp.config.model.name, mlp.config.engine.learner_threads) == ("mlp", 1)
    assert board.config.engine.micro_batch == mlp.config.engine.micro_batch  # the actors' batches (and bits) as before
