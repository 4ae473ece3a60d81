"""Self-play (fastrl/layers/selfplay/) on PettingZoo's connect_four_v3: against the shared policy and against a pool
of its snapshots (the draws, the ratings, snapshots in hts), the pool's random and scripted players, each
bit-identical across layouts and on resume, Connect Four learned well enough to beat a random player; and matches
against a named opponent (``fastrl eval --opponent``, ``fastrl bench matches``)."""
import json

import numpy as np
import pytest
import torch

import fastrl
from fastrl.cli import main
from fastrl.config import ConfigError, EnvConfig
from fastrl.envs.base import ACTING
from fastrl.envs.pettingzoo import make_games
from fastrl.envs.registry import probe_env
from fastrl.evaluation.matches import play_matches
from fastrl.evaluation.opponents import connect_four_lookahead
from fastrl.runs.checkpoint import load_checkpoint
from tests.helpers.multiagent_runs import CONNECT_FOUR, POOL, SMALL, c4_run, identical, leaving_run, model_params

pytest.importorskip("pettingzoo")


@pytest.mark.slow  # the pool run keeps multi-agent layout invariance in the default tier
@pytest.mark.engine
def test_self_play_is_bit_identical_across_layouts_and_resumes_exactly(tmp_path):
    job = ["run.total_frames=512", "algo.epochs=2"]
    c4_run(tmp_path, "one", *job, "engine.executors=1", "engine.actors=1", "engine.inline_actors=false")
    c4_run(tmp_path, "two", *job, "engine.executors=2", "engine.actors=2", "engine.inline_actors=false",
        "engine.step_delay_s=0.0005")
    c4_run(tmp_path, "half", "run.total_frames=256", "algo.epochs=2", "engine.executors=2")
    fastrl.train(resume=tmp_path / "half", overrides=["run.total_frames=512", "engine.executors=1", "engine.actors=1"])
    one, two, resumed = (model_params(tmp_path / name) for name in ("one", "two", "half"))
    assert identical(one, two) and identical(one, resumed)
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
    _, run_dir = c4_run(tmp_path, "c4", "run.total_frames=256")
    first = play_matches(run_dir, "connect_four_lookahead", games=6, seed=4)
    assert first == play_matches(run_dir, "connect_four_lookahead", games=6, seed=4)
    against_itself = play_matches(run_dir, str(run_dir), games=4)
    assert against_itself["games"] == 4
    with pytest.raises(ConfigError, match="--opponent 'nobody'"):
        play_matches(run_dir, "nobody", games=2)
    with pytest.raises(ConfigError, match="no callable 'nothing'"):
        play_matches(run_dir, "fastrl.evaluation.opponents:nothing", games=2)


@pytest.mark.unit
def test_the_pools_draws_follow_the_seed_and_rating_prefers_the_opponents_it_beats_least():
    from fastrl.layers.selfplay.pool import Snapshot, expected_score

    assert expected_score(1200, 1200) == 0.5 and expected_score(1600, 1200) == pytest.approx(10 / 11)
    from types import SimpleNamespace

    from fastrl.buffers.control import layer_columns
    from fastrl.config import Config
    from fastrl.layers.selfplay import SELFPLAY_STATS
    from fastrl.layers.selfplay.config import SelfPlayConfig
    from fastrl.layers.selfplay.pool import OPPONENTS, SelfPlayPool

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
    c4_run(tmp_path, "one", *job, "engine.executors=1", "engine.actors=1", "engine.inline_actors=false")
    c4_run(tmp_path, "two", *job, "engine.executors=2", "engine.actors=2", "engine.inline_actors=false",
        "engine.step_delay_s=0.0005")
    c4_run(tmp_path, "half", "run.total_frames=320", "algo.epochs=2", *POOL, "engine.executors=2")
    fastrl.train(resume=tmp_path / "half", overrides=["run.total_frames=640", "engine.executors=1", "engine.actors=1"])
    one, two, resumed = (model_params(tmp_path / name) for name in ("one", "two", "half"))
    assert identical(one, two) and identical(one, resumed)
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
    from fastrl.layers.selfplay import SELFPLAY_STATS
    from fastrl.layers.selfplay.config import SelfPlayConfig
    from fastrl.layers.selfplay.pool import OPPONENTS, SelfPlayPool, pool_slots

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
    c4_run(tmp_path, "one", *job, "engine.executors=1", "engine.actors=1", "engine.inline_actors=false")
    c4_run(tmp_path, "two", *job, "engine.executors=2", "engine.actors=2", "engine.inline_actors=false",
        "engine.step_delay_s=0.0005")
    half = [*job[1:], "run.total_frames=320", "engine.executors=2"]
    c4_run(tmp_path, "half", *half)
    fastrl.train(resume=tmp_path / "half", overrides=["run.total_frames=640", "engine.executors=1", "engine.actors=1"])
    one, two, resumed = (model_params(tmp_path / name) for name in ("one", "two", "half"))
    assert identical(one, two) and identical(one, resumed)
    states = [load_checkpoint(tmp_path / name)["resume"]["selfplay"] for name in ("one", "half")]
    assert states[0]["entries"] == states[1]["entries"] and states[0]["games"] == states[1]["games"] > 0
    # pool_size 3 and a spare: the kept snapshots and the spare hold the 4 slots between them
    assert sorted([slot for _, slot, _ in states[0]["entries"]] + [states[0]["spare"]]) == [0, 1, 2, 3]


@pytest.mark.engine
def test_a_pool_needs_sync_or_hts_and_a_multi_agent_env(tmp_path):
    with pytest.raises(ConfigError, match=r"selfplay.opponents = 'pool'.*'sync' or 'hts'.*'async'"):
        c4_run(tmp_path, "async", *POOL, "engine.mode='async'", "algo.name='impala'")
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


@pytest.mark.engine
def test_a_pools_random_player_is_a_zero_slot_drawn_from_the_seed_and_scored(tmp_path):
    """selfplay.random_share: that share of the games against a uniformly random legal player (the pool's last
    slot, zeros: every legal action the same logit), bit-identical across layouts, its games scored apart."""
    job = ["run.total_frames=640", "algo.epochs=2", *POOL, "selfplay.random_share=0.5"]
    c4_run(tmp_path, "one", *job, "engine.executors=1", "engine.actors=1", "engine.inline_actors=false")
    c4_run(tmp_path, "two", *job, "engine.executors=2", "engine.actors=2", "engine.inline_actors=false")
    assert identical(model_params(tmp_path / "one"), model_params(tmp_path / "two"))
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
    zero = build_policy(probe_env(config.env), config, "cpu")
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
    c4_run(tmp_path, "one", "run.total_frames=640", *job, "engine.executors=1", "engine.actors=1",
        "engine.inline_actors=false")
    c4_run(tmp_path, "two", "run.total_frames=640", *job, "engine.executors=2", "engine.actors=2",
        "engine.inline_actors=false", "engine.step_delay_s=0.0005")
    c4_run(tmp_path, "half", "run.total_frames=320", *job, "engine.executors=2")
    fastrl.train(resume=tmp_path / "half", overrides=["run.total_frames=640", "engine.executors=1", "engine.actors=1"])
    one, two, resumed = (model_params(tmp_path / name) for name in ("one", "two", "half"))
    assert identical(one, two) and identical(one, resumed)
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
        c4_run(tmp_path, "no_share", *POOL, scripted)
    with pytest.raises(ConfigError, match=r"selfplay.scripted = ''.*set both"):
        c4_run(tmp_path, "no_player", *POOL, "selfplay.scripted_share=0.5")
    with pytest.raises(ConfigError, match=r"random_share \+ selfplay.scripted_share = 1.25"):
        c4_run(tmp_path, "sum", *POOL, scripted, "selfplay.scripted_share=0.75", "selfplay.random_share=0.5")
    with pytest.raises(ConfigError, match=r"selfplay.scripted_share = 0.5 .* set selfplay.opponents = 'pool'"):
        c4_run(tmp_path, "shared", scripted, "selfplay.scripted_share=0.5")
    with pytest.raises(ConfigError, match=r"selfplay.scripted = 'connect_four_lookahead': .*connect_four_v3"):
        leaving_run(tmp_path, "leaving", "selfplay.opponents='pool'", scripted, "selfplay.scripted_share=0.5")
