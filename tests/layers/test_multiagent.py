"""PettingZoo envs in the engine (fastrl/envs/pettingzoo.py): each agent a row, waiting and departed agents kept
out of the loss, bit-identical across layouts and on resume, Connect Four learned by self-play, and matches
against a named opponent (``fastrl eval --opponent``). Envs: PettingZoo's connect_four_v3 (turn-based, masked)
and tests/helpers/agents_env.py (a Parallel env whose agents leave early, their observations NaN from then on)."""
import json

import numpy as np
import pytest
import torch

import fastrl
from csrc_free_kernels.step_end import CONTINUES, TERMINATED
from fastrl.algos.ppo import PPOBatch, ppo_loss
from fastrl.cli import main
from fastrl.config import ConfigError, EnvConfig
from fastrl.envs.base import ABSENT, ACTING, WAITING
from fastrl.envs.pettingzoo import make_games
from fastrl.envs.registry import backend_for, probe_env
from fastrl.evaluation.matches import play_matches
from fastrl.evaluation.opponents import connect_four_lookahead
from fastrl.runs.checkpoint import load_checkpoint

pytest.importorskip("pettingzoo")

CONNECT_FOUR = "pettingzoo.classic:connect_four_v3"
LEAVING = "tests.helpers.agents_env:leaving_agents"
SMALL = ["run.progress=false", "run.tensorboard=false", "run.log_interval_s=0.5", "engine.rollout=8",
         "algo.minibatches=2"]
# the shipped config's random and scripted players off: a test adds the players it is about
NO_FIXED_PLAYERS = ["selfplay.random_share=0", "selfplay.scripted=''", "selfplay.scripted_share=0"]
MLP = ["model.name='mlp'", "model.hidden=[256, 256]"]  # for rows without a board


def _c4(tmp_path, name, *overrides):
    run_dir = tmp_path / name
    summary = fastrl.train("configs/connect_four_selfplay.toml",
                           [*SMALL, "engine.envs=8", *NO_FIXED_PLAYERS, "selfplay.opponents='shared'", *overrides],
                           run_dir=run_dir)
    return summary, run_dir


def _leaving(tmp_path, name, *overrides, mode="sync"):
    run_dir = tmp_path / name
    summary = fastrl.train("configs/connect_four_selfplay.toml", [
        *SMALL, f"env.id='{LEAVING}'", "env.backend='pettingzoo'", *NO_FIXED_PLAYERS, *MLP,
        "selfplay.opponents='shared'",
        "env.kwargs={agents=3, life=4}", "engine.envs=6", f"engine.mode='{mode}'", "run.total_frames=960",
        *overrides], run_dir=run_dir)
    return summary, run_dir


def _params(run_dir) -> dict:
    return load_checkpoint(run_dir)["model"]


def _identical(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


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
    summary, run_dir = _leaving(tmp_path, "run", f"algo.name='{algo}'", *extra, mode=mode)
    assert summary["status"] == "complete" and summary["frames"] == 960  # 6 rows x 8 steps x 20 updates
    assert all(torch.isfinite(t).all() for t in _params(run_dir).values())
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert lines[-1]["episodes"] > 0


@pytest.mark.engine
def test_an_async_pair_whose_envs_never_run_dry_still_beats_its_heartbeat_and_stops(tmp_path):
    """Connect Four under IMPALA with inline actors: free slots always wait, so the executor-actor pair always has
    work; it must still return to its loop (the heartbeat the watchdog reads, the stop flag) within a poll."""
    summary, _ = _c4(tmp_path, "async", "engine.mode='async'", "algo.name='impala'", "engine.envs=64",
                     "engine.inline_actors=true", "reliability.watchdog_s=1.5", "run.max_seconds=2.5",
                     "run.total_frames=100_000_000")
    assert summary["status"] == "complete" and summary["frames"] > 0


@pytest.mark.slow  # the pool run keeps multi-agent layout invariance in the default tier
@pytest.mark.engine
def test_self_play_is_bit_identical_across_layouts_and_resumes_exactly(tmp_path):
    job = ["run.total_frames=512", "algo.epochs=2"]
    _c4(tmp_path, "one", *job, "engine.executors=1", "engine.actors=1", "engine.inline_actors=false")
    _c4(tmp_path, "two", *job, "engine.executors=2", "engine.actors=2", "engine.inline_actors=false",
        "engine.step_delay_s=0.0005")
    _c4(tmp_path, "half", "run.total_frames=256", "algo.epochs=2", "engine.executors=2")
    fastrl.train(resume=tmp_path / "half", overrides=["run.total_frames=512", "engine.executors=1", "engine.actors=1"])
    one, two, resumed = (_params(tmp_path / name) for name in ("one", "two", "half"))
    assert _identical(one, two) and _identical(one, resumed)
    assert load_checkpoint(tmp_path / "half")["exact"]


@pytest.mark.slow  # learns to a score: minutes
@pytest.mark.engine
def test_connect_four_self_play_beats_a_random_player(tmp_path, capsys):
    """The fast version of the benchmark (docs/multi-agent.md): the shipped config (the pool, its random and
    look-ahead players, the board model) for 150K rows, then 200 games."""
    run_dir = tmp_path / "c4"
    summary = fastrl.train("configs/connect_four_selfplay.toml",
                           ["run.progress=false", "run.tensorboard=false", "run.total_frames=150000"], run_dir=run_dir)
    assert summary["status"] == "complete"
    assert main(["eval", str(run_dir), "--opponent", "random", "--episodes", "200"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["games"] == 200 and result["wins"] + result["draws"] + result["losses"] == 200
    assert result["by_seat"]["player_0"]["wins"] + result["by_seat"]["player_0"]["losses"] <= 100
    assert result["win_rate"] >= 0.75, result  # a random player wins ~50% against another


@pytest.mark.engine
def test_matches_replay_from_their_seed_and_name_what_they_cannot_play(tmp_path):
    _, run_dir = _c4(tmp_path, "c4", "run.total_frames=256")
    first = play_matches(run_dir, "connect_four_lookahead", games=6, seed=4)
    assert first == play_matches(run_dir, "connect_four_lookahead", games=6, seed=4)
    against_itself = play_matches(run_dir, str(run_dir), games=4)
    assert against_itself["games"] == 4
    with pytest.raises(ConfigError, match="--opponent 'nobody'"):
        play_matches(run_dir, "nobody", games=2)
    with pytest.raises(ConfigError, match="no callable 'nothing'"):
        play_matches(run_dir, "fastrl.evaluation.opponents:nothing", games=2)


@pytest.mark.engine
@pytest.mark.parametrize(("overrides", "match"), [
    (["engine.envs=7"], r"engine.envs = 7 counts agent rows.*2 agents.*multiple of 2"),
    (["env.on_error='reset'"], r"cannot reset one env of a failed group"),
    (["engine.mode='gala'", "engine.learners=2", "engine.envs=6", "algo.name='a2c'"],
     r"each gala learner's envs must hold whole envs of 2 agents"),
    (["algo.name='pqn'"], r"algo.name = 'pqn' does not learn from multi-agent envs"),
    (["engine.executors=5"], r"engine.executors = 5 is more than the 4 envs of 2 agents"),
])
def test_what_a_multi_agent_run_cannot_do_is_refused_before_it_starts(tmp_path, overrides, match):
    with pytest.raises(ConfigError, match=match):
        _c4(tmp_path, "refused", *overrides)
    assert not (tmp_path / "refused" / "checkpoints").exists()


POOL = ["selfplay.opponents='pool'", "selfplay.pool_size=3", "selfplay.snapshot_every=2"]


@pytest.mark.unit
def test_the_pools_draws_follow_the_seed_and_rating_prefers_the_opponents_it_beats_least():
    from fastrl.multiagent.selfplay import Snapshot, expected_score

    assert expected_score(1200, 1200) == 0.5 and expected_score(1600, 1200) == pytest.approx(10 / 11)
    from types import SimpleNamespace

    from fastrl.buffers.control import layer_columns
    from fastrl.config import Config
    from fastrl.multiagent import SELFPLAY_STATS
    from fastrl.multiagent.config import SelfPlayConfig
    from fastrl.multiagent.selfplay import OPPONENTS, SelfPlayPool

    def pool(seed, sampling):
        config = Config()
        config.run.seed, config.selfplay = seed, SelfPlayConfig(opponents="pool", sampling=sampling, pool_size=4)
        spec = SimpleNamespace(config=config, env_unit=2, envs=4000, mode=SimpleNamespace(run_ahead=False))
        arrays = {OPPONENTS: np.zeros((2, 2000), np.int64)}
        control = SimpleNamespace(stat_column=layer_columns(SELFPLAY_STATS).__getitem__)
        buffers = SimpleNamespace(player_params=lambda k: None, layer_array=arrays.__getitem__, control=control)
        made = SelfPlayPool(spec, buffers, np.zeros(64))
        made.entries = [Snapshot(v, v, rating) for v, rating in enumerate((1000.0, 1200.0, 1400.0, 1600.0))]
        made.rating = 1400.0
        return made

    assert np.array_equal(pool(1, "uniform")._draw(), pool(1, "uniform")._draw())
    assert not np.array_equal(pool(1, "uniform")._draw(), pool(2, "uniform")._draw())
    assert set(pool(1, "latest")._draw().tolist()) == {3}
    counts = np.bincount(pool(1, "rating")._draw(), minlength=4)
    assert counts[3] > counts[2] > counts[1] > counts[0]  # the stronger the snapshot, the more often it is drawn


@pytest.mark.engine
def test_a_pool_run_is_bit_identical_across_layouts_resumes_exactly_and_logs_ratings(tmp_path):
    job = ["run.total_frames=640", "algo.epochs=2", *POOL]
    _c4(tmp_path, "one", *job, "engine.executors=1", "engine.actors=1", "engine.inline_actors=false")
    _c4(tmp_path, "two", *job, "engine.executors=2", "engine.actors=2", "engine.inline_actors=false",
        "engine.step_delay_s=0.0005")
    _c4(tmp_path, "half", "run.total_frames=320", "algo.epochs=2", *POOL, "engine.executors=2")
    fastrl.train(resume=tmp_path / "half", overrides=["run.total_frames=640", "engine.executors=1", "engine.actors=1"])
    one, two, resumed = (_params(tmp_path / name) for name in ("one", "two", "half"))
    assert _identical(one, two) and _identical(one, resumed)
    states = [load_checkpoint(tmp_path / name)["resume"]["selfplay"] for name in ("one", "half")]
    assert states[0]["entries"] == states[1]["entries"] and states[0]["games"] == states[1]["games"] > 0
    assert [v for v, _, _ in states[0]["entries"]] == [4, 6, 8]  # versions 0-9 acted, a snapshot every 2, 3 kept
    lines = [json.loads(line) for line in (tmp_path / "one" / "metrics.jsonl").read_text().splitlines()]
    assert lines[-1]["pool_size"] == 3 and lines[-1]["pool_games"] > 0 and lines[-1]["elo"] != 1200.0


@pytest.mark.unit
def test_in_hts_a_new_snapshot_never_overwrites_one_the_rollout_in_flight_plays():
    """hts draws rollout j+2's opponents at barrier j while rollout j+1 plays its own: the slot a snapshot is
    written into is never one of the running rollout's, and each rollout's games are rated against the snapshots
    it was drawn, after they left the pool too."""
    from types import SimpleNamespace

    from csrc_free_kernels.step_end import TERMINATED
    from fastrl.buffers.control import layer_columns
    from fastrl.config import Config
    from fastrl.multiagent import SELFPLAY_STATS
    from fastrl.multiagent.config import SelfPlayConfig
    from fastrl.multiagent.selfplay import OPPONENTS, SelfPlayPool, pool_slots

    config = Config()
    config.selfplay = SelfPlayConfig(opponents="pool", sampling="uniform", pool_size=2, snapshot_every=1)
    written = []

    class Slot:
        def __init__(self, k):
            self.k = k

        def publish(self, model, version):
            written.append((version, self.k))

    assert pool_slots(config.selfplay, run_ahead=True) == 3 and pool_slots(config.selfplay, run_ahead=False) == 2
    spec = SimpleNamespace(config=config, env_unit=2, envs=64, mode=SimpleNamespace(run_ahead=True))
    arrays = {OPPONENTS: np.zeros((2, 32), np.int64)}
    control = SimpleNamespace(stat_column=layer_columns(SELFPLAY_STATS).__getitem__)
    buffers = SimpleNamespace(player_params=Slot, layer_array=arrays.__getitem__, control=control)
    pool = SelfPlayPool(spec, buffers, np.zeros(64))
    storage = {"reward": np.zeros((64, 3), np.float32), "done": np.zeros((64, 3), np.uint8)}
    storage["reward"][:, 0], storage["done"][:, 0] = 1.0, TERMINATED  # each learning seat wins a game a rollout
    pool.prepare(0, None)
    pool.prepare(1, None)  # hts's start: rollouts 0 and 1 drawn before either plays
    for j in range(12):  # barrier j: rollout j is in, rollout j+1 plays, rollout j+2 is drawn
        pool.observe(storage, j)
        playing = set(buffers.layer_array(OPPONENTS)[(j + 1) % 2].tolist())
        pool.prepare(j + 2, None)
        version, slot = written[-1]
        assert version == j + 2 and slot not in playing
    assert sorted({slot for _, slot in written}) == [0, 1, 2] and pool.games == 12 * 32
    assert len(pool.retired) <= 2  # only the snapshots a drawn rollout still names are kept


@pytest.mark.slow  # the sync pool run keeps it in the default tier
@pytest.mark.engine
def test_a_pool_in_hts_is_bit_identical_across_layouts_and_resumes_exactly(tmp_path):
    job = ["run.total_frames=640", "algo.epochs=2", *POOL, "selfplay.snapshot_every=1", "engine.mode='hts'"]
    _c4(tmp_path, "one", *job, "engine.executors=1", "engine.actors=1", "engine.inline_actors=false")
    _c4(tmp_path, "two", *job, "engine.executors=2", "engine.actors=2", "engine.inline_actors=false",
        "engine.step_delay_s=0.0005")
    half = [*job[1:], "run.total_frames=320", "engine.executors=2"]
    _c4(tmp_path, "half", *half)
    fastrl.train(resume=tmp_path / "half", overrides=["run.total_frames=640", "engine.executors=1", "engine.actors=1"])
    one, two, resumed = (_params(tmp_path / name) for name in ("one", "two", "half"))
    assert _identical(one, two) and _identical(one, resumed)
    states = [load_checkpoint(tmp_path / name)["resume"]["selfplay"] for name in ("one", "half")]
    assert states[0]["entries"] == states[1]["entries"] and states[0]["games"] == states[1]["games"] > 0
    # pool_size 3 and a spare: the kept snapshots and the spare hold the 4 slots between them
    assert sorted([slot for _, slot, _ in states[0]["entries"]] + [states[0]["spare"]]) == [0, 1, 2, 3]


@pytest.mark.engine
def test_a_pool_needs_sync_or_hts_and_a_multi_agent_env(tmp_path):
    with pytest.raises(ConfigError, match=r"selfplay.opponents = 'pool'.*'sync' or 'hts'.*'async'"):
        _c4(tmp_path, "async", *POOL, "engine.mode='async'", "algo.name='impala'")
    with pytest.raises(ConfigError, match=r"needs a multi-agent env"):
        fastrl.train("configs/cartpole_ppo.toml", [*SMALL, *POOL], run_dir=tmp_path / "cartpole")


@pytest.mark.engine
def test_the_matches_bench_trains_for_its_minutes_then_plays_each_opponent(tmp_path, capsys):
    assert main(["bench", "matches", "--minutes", "0.05", "--games", "4", "--opponent", "random", "--greedy",
                 "--set", "engine.envs=8", "--set", "engine.rollout=8", "--set", "algo.minibatches=2",
                 "--set", "run.progress=false", "--run-dir", str(tmp_path / "run")]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result["matches"]) == {"random"} and result["matches"]["random"]["wins"] <= 4 and result["greedy"]
    # stopped by its 3 s of training at the next barrier (a loaded machine's barrier may take seconds), not by the
    # config's frame budget, which would take many minutes
    assert result["train_s"] <= 0.05 * 60 + 30 and (tmp_path / "run" / "matches.json").is_file()
    with pytest.raises(SystemExit):
        main(["bench", "matches", "--games", "4"])  # --minutes is required


PONG2 = "pettingzoo.atari:pong_v3"


def _pong2(tmp_path, name, *overrides):
    run_dir = tmp_path / name
    summary = fastrl.train("configs/pong_selfplay.toml", [
        *SMALL, "engine.envs=4", "model.precision='fp32'", "run.total_frames=512", "algo.epochs=1",
        "algo.lr_schedule='constant'", *overrides],  # its linear lr anneals over total_frames: the halves differ
        run_dir=run_dir)
    return summary, run_dir


@pytest.mark.unit
def test_two_player_pong_is_one_emulator_for_both_paddles_mirrored_for_the_second_and_restores_exactly():
    pytest.importorskip("multi_agent_ale_py")
    config = EnvConfig(id=PONG2, atari=fastrl.config.AtariConfig(mirror_players=True))
    first, restored = (make_games(config, [0, 1])[0].group for _ in range(2))
    assert first.agents == ["first_0", "second_0"] and first.n_actions == 6 and first.obs_shape == (4, 84, 84)
    for m in range(2):
        first.reset_member(m, 7)
    rng = np.random.default_rng(0)
    scores = np.zeros(2)
    for _ in range(300):
        first.step(list(rng.integers(6, size=2)))
        scores += first.raw_rewards
        assert np.array_equal(first.step_obs[1], first.step_obs[0][:, :, ::-1])
    assert np.abs(scores).sum() > 0  # points were scored (+1 to the scorer, -1 to the other; a late serve -1)
    restored.restore(first.state())
    moves = rng.integers(6, size=(200, 2))
    seen = [(first.step(list(a)), first.step_obs.copy(), first.raw_rewards.copy())[1:] for a in moves]
    again = [(restored.step(list(a)), restored.step_obs.copy(), restored.raw_rewards.copy())[1:] for a in moves]
    assert all(np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1]) for x, y in zip(seen, again))


@pytest.mark.slow  # two emulators per env; Connect Four keeps the promise in the default tier
@pytest.mark.engine
def test_two_player_pong_self_play_is_bit_identical_across_layouts_and_resumes_exactly(tmp_path):
    pytest.importorskip("multi_agent_ale_py")
    _pong2(tmp_path, "one", "engine.executors=1", "engine.actors=1", "engine.inline_actors=false")
    _pong2(tmp_path, "two", "engine.executors=2", "engine.actors=2", "engine.inline_actors=false")
    _pong2(tmp_path, "half", "run.total_frames=256", "engine.executors=2")
    fastrl.train(resume=tmp_path / "half", overrides=["run.total_frames=512", "engine.executors=1", "engine.actors=1"])
    one, two, resumed = (_params(tmp_path / name) for name in ("one", "two", "half"))
    assert _identical(one, two) and _identical(one, resumed)
    assert load_checkpoint(tmp_path / "half")["exact"]


@pytest.mark.slow  # 7 s of matches; the two-player game's bits stay in the default run
@pytest.mark.engine
def test_a_two_player_pong_policy_plays_a_random_paddle_and_the_one_player_game(tmp_path):
    pytest.importorskip("multi_agent_ale_py")
    from fastrl.evaluation import evaluate

    _, run_dir = _pong2(tmp_path, "pong2")
    match = play_matches(run_dir, "random", games=2)
    assert match["wins"] + match["draws"] + match["losses"] == 2 and match["by_seat"]["second_0"]
    one_player = evaluate(run_dir, episodes=1, max_steps=200, env_id="PongNoFrameskip-v4")
    assert one_player["env_id"] == "PongNoFrameskip-v4" and one_player["lengths"] == [200]
    with pytest.raises(ConfigError, match="'CartPole-v1': its rows"):
        evaluate(run_dir, episodes=1, env_id="CartPole-v1")


@pytest.mark.engine
@pytest.mark.slow  # two emulators a game, played from the CLI
def test_a_one_player_pong_policy_plays_two_player_pong_from_the_cli_in_either_seat(tmp_path, capsys):
    pytest.importorskip("multi_agent_ale_py")
    run_dir = tmp_path / "pong1"
    fastrl.train("configs/pong_sync.toml", [*SMALL, "engine.envs=4", "model.precision='fp32'", "run.total_frames=128",
                                            "algo.epochs=1"], run_dir=run_dir)
    assert main(["eval", str(run_dir), "--env", PONG2, "--opponent", "random", "--episodes", "2"]) == 0
    match = json.loads(capsys.readouterr().out)
    assert match["env_id"] == PONG2 and match["wins"] + match["draws"] + match["losses"] == 2
    assert sum(match["by_seat"]["second_0"].values()) == 1  # the mirrored seat is played too
    with pytest.raises(ConfigError, match="'CartPole-v1' with --opponent: not a multi-agent game"):
        play_matches(run_dir, "random", games=1, env_id="CartPole-v1")
    with pytest.raises(ConfigError, match="a single-agent env: --opponent plays"):
        play_matches(run_dir, "random", games=1)


@pytest.mark.engine
@pytest.mark.slow  # a benchmark round
def test_the_two_player_bench_counts_each_emulator_frame_once(capsys):
    pytest.importorskip("multi_agent_ale_py")
    assert main(["bench", "two-player", "--seconds", "2", "--rounds", "1", "--games", "1", "--bare"]) == 0
    result = json.loads(capsys.readouterr().out)
    (measured,) = result["rounds"]
    two, one, bare = measured["two_player"], measured["one_player"], measured["bare"]
    # the emulators alone: both step frames, and the bare ratio is theirs
    assert bare["two_player_fps"] > 0 and bare["one_player_fps"] > 0
    assert result["bare_ratio"] == pytest.approx(bare["two_player_fps"] / bare["one_player_fps"], abs=1e-3)
    assert result["players"] == 2 and two["envs"] == 2 and one["envs"] == 1
    assert two["emulator_frames_per_s"] == pytest.approx(two["frames_per_s"] / 2, abs=0.1)
    assert result["ratio"] == pytest.approx(two["emulator_frames_per_s"] / one["frames_per_s"], abs=1e-3)
    assert main(["bench", "two-player", "pong_sync"]) == 2  # a one-player config is named, not measured


@pytest.mark.unit
def test_the_auto_layout_never_splits_an_envs_agents_across_executors():
    from fastrl.config import EngineConfig
    from fastrl.process.auto_layout import Machine, choose_layout

    # (cores, rows, agents, executors): never more executors than games; 32 games on 12 free cores: 11 of 3 each
    for cores, envs, agents, executors in [(2, 2, 2, 1), (16, 8, 2, 4), (16, 64, 2, 11), (2, 16, 1, 2)]:
        layout = choose_layout(EngineConfig(envs=envs), Machine(cores, cuda=False), agents)
        assert layout.executors == executors, (cores, envs, agents, layout)


@pytest.mark.engine
def test_a_pools_random_player_is_a_zero_slot_drawn_from_the_seed_and_scored(tmp_path):
    """selfplay.random_share: that share of the games against a uniformly random legal player (the pool's last
    slot, zeros: every legal action the same logit), bit-identical across layouts, its games scored apart."""
    job = ["run.total_frames=640", "algo.epochs=2", *POOL, "selfplay.random_share=0.5"]
    _c4(tmp_path, "one", *job, "engine.executors=1", "engine.actors=1", "engine.inline_actors=false")
    _c4(tmp_path, "two", *job, "engine.executors=2", "engine.actors=2", "engine.inline_actors=false")
    assert _identical(_params(tmp_path / "one"), _params(tmp_path / "two"))
    state = load_checkpoint(tmp_path / "one")["resume"]["selfplay"]
    table = state["table"].numpy()
    assert (table == 3).any() and (table != 3).any()  # pool_size 3: slot 3 is the random player, some envs' only
    rating, scores = state["random"]
    assert len(scores) > 0 and rating != 1200.0
    lines = [json.loads(line) for line in (tmp_path / "one" / "metrics.jsonl").read_text().splitlines()]
    assert lines[-1]["random_score"] is not None
    from fastrl.config import load_config
    from fastrl.models.policy import build_policy

    config = load_config("configs/connect_four_selfplay.toml", [])
    zero = build_policy(probe_env(config.env), config)
    for tensor in zero.state_dict().values():
        tensor.zero_()
    envs = make_games(config.env, [0, 1])
    row = np.zeros((1, *envs[0].obs_shape), np.float32)
    envs[0].reset(3, row[0])
    logits, _ = zero(torch.from_numpy(row))
    assert torch.equal(logits, torch.zeros_like(logits))  # an empty board: every column legal, every one alike
    envs[0].close()


@pytest.mark.unit
def test_the_scripted_look_ahead_network_plays_as_the_eval_player_does():
    """selfplay.scripted = 'connect_four_lookahead' (fastrl.models.scripted) on the engine's rows: where a win or a
    block exists, the one column fastrl eval's player picks, alone; elsewhere every legal column alike."""
    from fastrl.models.scripted import CERTAIN, build_scripted

    config = EnvConfig(id=CONNECT_FOUR)
    envs = make_games(config, [0, 1])
    game = envs[0].group
    network = build_scripted("connect_four_lookahead", probe_env(config))
    rows = np.zeros((2, *envs[0].obs_shape), np.float32)
    rng = np.random.default_rng(1)
    seen = {"win": 0, "block": 0, "open": 0}
    try:
        for m, env in enumerate(envs):
            env.reset(0, rows[m])
        for _ in range(1500):
            mover = int(np.flatnonzero(game.live == ACTING)[0])
            logits, value = network(torch.from_numpy(rows[mover : mover + 1]))
            logits = logits[0].numpy()
            raw = game.raw[mover]
            legal = np.flatnonzero(raw["action_mask"])
            picked = connect_four_lookahead(raw, None, np.random.default_rng(0))
            if logits.max() >= CERTAIN:  # a win or a block: that column alone
                assert np.flatnonzero(logits == logits.max()).tolist() == [picked]
                again = connect_four_lookahead(raw, None, np.random.default_rng(1))
                seen["win" if _wins_now(raw, picked) else "block"] += 1
                assert again == picked  # the eval player chose it without its rng too
            else:
                assert np.all(logits[legal] == 0) and np.all(logits[np.setdiff1d(np.arange(7), legal)] < -1e8)
                seen["open"] += 1
            assert torch.equal(value, torch.zeros(1))
            actions = [0, 0]
            actions[mover] = int(rng.choice(legal))
            game.step(actions)
            for m, env in enumerate(envs):
                if env.step(actions[m], rows[m], rows[m])[3]:
                    env.reset(int(rng.integers(1000)), rows[m])
    finally:
        for env in envs:
            env.close()
    assert min(seen.values()) >= 20, seen  # random play reaches all three kinds of position


def _wins_now(raw, column: int) -> bool:
    from fastrl.evaluation.opponents import _landing_row, _wins

    mine = np.asarray(raw["observation"])[..., 0].astype(bool)
    occupied = np.asarray(raw["observation"]).any(-1)
    row = _landing_row(occupied, column)
    trial = mine.copy()
    trial[row, column] = True
    return _wins(trial, row, column)


@pytest.mark.engine
@pytest.mark.slow  # the sync pool run keeps the pool's layout invariance and resume in the default tier
def test_a_pools_scripted_player_is_drawn_beside_the_random_one_bit_identically_and_resumes(tmp_path):
    """selfplay.scripted plays its share of the games from the same per-game draw as the random player, in the slot
    past the shared segment's; the run is bit-identical across layouts and resumes exactly with its scores."""
    job = ["algo.epochs=2", *POOL, "selfplay.random_share=0.25", "selfplay.scripted_share=0.5",
           "selfplay.scripted='connect_four_lookahead'"]
    _c4(tmp_path, "one", "run.total_frames=640", *job, "engine.executors=1", "engine.actors=1",
        "engine.inline_actors=false")
    _c4(tmp_path, "two", "run.total_frames=640", *job, "engine.executors=2", "engine.actors=2",
        "engine.inline_actors=false", "engine.step_delay_s=0.0005")
    _c4(tmp_path, "half", "run.total_frames=320", *job, "engine.executors=2")
    fastrl.train(resume=tmp_path / "half", overrides=["run.total_frames=640", "engine.executors=1", "engine.actors=1"])
    one, two, resumed = (_params(tmp_path / name) for name in ("one", "two", "half"))
    assert _identical(one, two) and _identical(one, resumed)
    states = [load_checkpoint(tmp_path / name)["resume"]["selfplay"] for name in ("one", "half")]
    assert states[0]["scripted"] == states[1]["scripted"]
    rating, scores = states[0]["scripted"]
    assert len(scores) > 0 and rating != 1200.0
    table = states[0]["table"].numpy()
    assert {3, 4} <= set(table.ravel().tolist())  # pool_size 3: slot 3 the random player, slot 4 the scripted one
    lines = [json.loads(line) for line in (tmp_path / "one" / "metrics.jsonl").read_text().splitlines()]
    assert lines[-1]["scripted_score"] is not None and lines[-1]["random_score"] is not None


@pytest.mark.engine
def test_a_scripted_player_needs_its_share_a_pool_and_an_env_it_can_read(tmp_path):
    scripted = "selfplay.scripted='connect_four_lookahead'"
    with pytest.raises(ConfigError, match=r"selfplay.scripted = 'connect_four_lookahead'.*scripted_share = 0.0"):
        _c4(tmp_path, "no_share", *POOL, scripted)
    with pytest.raises(ConfigError, match=r"selfplay.scripted = ''.*set both"):
        _c4(tmp_path, "no_player", *POOL, "selfplay.scripted_share=0.5")
    with pytest.raises(ConfigError, match=r"random_share \+ selfplay.scripted_share = 1.25"):
        _c4(tmp_path, "sum", *POOL, scripted, "selfplay.scripted_share=0.75", "selfplay.random_share=0.5")
    with pytest.raises(ConfigError, match=r"selfplay.scripted_share = 0.5 .* set selfplay.opponents = 'pool'"):
        _c4(tmp_path, "shared", scripted, "selfplay.scripted_share=0.5")
    with pytest.raises(ConfigError, match=r"selfplay.scripted = 'connect_four_lookahead': .*connect_four_v3"):
        _leaving(tmp_path, "leaving", "selfplay.opponents='pool'", scripted, "selfplay.scripted_share=0.5")


@pytest.mark.unit
def test_the_board_model_convolves_connect_fours_planes_where_they_sit_in_the_row(tmp_path):
    """model.name = 'board' (fastrl.models.board): the row's [6, 7, 2] part read back as planes of the board (a
    piece moved one column moves the first convolution's output one column), the mask beside it as features."""
    from fastrl.config import load_config
    from fastrl.models.policy import build_policy

    config = load_config("configs/connect_four_selfplay.toml", ["model.name='board'", "model.hidden=[64]"])
    info = probe_env(config.env)
    torch.manual_seed(0)
    policy = build_policy(info, config)
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
    _c4(tmp_path, "one", *job, "engine.executors=1", "engine.actors=1", "engine.inline_actors=false")
    _c4(tmp_path, "two", *job, "engine.executors=2", "engine.actors=2", "engine.inline_actors=false")
    assert _identical(_params(tmp_path / "one"), _params(tmp_path / "two"))
    assert any(name.startswith("convolutions.") for name in _params(tmp_path / "one"))


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
