"""reward_scaling.normalize: the kernel against its numpy reference and gymnasium's wrapper, determinism
across process layouts, exact resume with the statistics, a MuJoCo smoke run, and bad values."""
import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import fastrl
from csrc_free_kernels.reward_scaling import (
    discounted_returns,
    new_stats,
    normalize_rewards,
    normalize_rewards_reference,
    scale_rewards,
    step_moments,
)
from fastrl.config import ConfigError, config_from_dict, load_config
from fastrl.runs.checkpoint import load_checkpoint
from tests.helpers.runs import cartpole

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

SETTINGS = settings(max_examples=30, deadline=None, database=None)


def _batch(seed, rows, horizon, done_rate=0.1):
    """rewards/dones as [:, :T] views of [N, T+1] arrays (how the learner reads a storage); both kinds of end."""
    rng = np.random.default_rng(seed)
    rewards = (rng.normal(size=(rows, horizon + 1)) * rng.uniform(0.1, 50)).astype(np.float32)[:, :horizon]
    dones = np.where(rng.random((rows, horizon + 1)) < done_rate, rng.integers(1, 3, (rows, horizon + 1)), 0)
    return rewards, dones.astype(np.uint8)[:, :horizon]


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(1, 12), st.floats(0.0, 1.0),
       st.sampled_from([10.0, 0.5]))
def test_kernel_matches_the_reference_over_successive_rollouts(seed, rows, horizon, gamma, clip):
    got_carry, got_stats = np.zeros(rows), new_stats()
    want_carry, want_stats = np.zeros(rows), new_stats()
    for rollout in range(3):  # carry and statistics go on from one rollout to the next
        rewards, dones = _batch(seed + rollout, rows, horizon)
        got = normalize_rewards(rewards, dones, got_carry, got_stats, gamma, clip)
        want = normalize_rewards_reference(rewards, dones, want_carry, want_stats, gamma, clip)
        assert got.dtype == np.float32 and got.shape == (rows, horizon)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(got_carry, want_carry, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got_stats, want_stats, rtol=1e-10)
        assert np.abs(got).max() <= clip


def test_the_accumulator_restarts_after_any_end_and_rows_of_one_env_chain():
    rewards = np.array([[1, 2, 4, 8]], np.float32)
    dones = np.array([[0, 2, 0, 1]], np.uint8)  # truncated after step 1, terminated after step 3
    carry = np.array([10.0])
    np.testing.assert_allclose(discounted_returns(rewards, dones, carry, 0.5), [[6, 5, 4, 10]])
    assert carry.tolist() == [0.0]
    # two consecutive slots of env 1 in one batch (async): the second goes on from the first
    carry = np.zeros(2)
    twice = discounted_returns(np.ones((2, 2), np.float32), np.zeros((2, 2), np.uint8), carry, 0.5, env_ids=[1, 1])
    np.testing.assert_allclose(twice, [[1, 1.5], [1.75, 1.875]])
    assert carry.tolist() == [0.0, 1.875]
    with pytest.raises(ValueError, match="env_ids"):
        discounted_returns(rewards, dones, np.zeros(1), 0.5, env_ids=[3])


def test_two_halves_merged_by_moments_equal_the_whole():
    """What cohort.moments does across ranks: each half's per-step moments merged equal the whole batch's."""
    rewards, dones = _batch(7, 8, 16)
    whole_stats, halves_stats = new_stats(), new_stats()
    whole = normalize_rewards(rewards, dones, np.zeros(8), whole_stats, 0.99, 10.0)
    returns = discounted_returns(rewards, dones, np.zeros(8), 0.99)
    (m1, v1), (m2, v2) = step_moments(returns[:4]), step_moments(returns[4:])
    delta = m2 - m1
    mean, var = m1 + delta / 2, (v1 + v2) / 2 + delta**2 / 4
    halves = np.concatenate([scale_rewards(rewards[:4], 8, mean, var, halves_stats.copy(), 10.0),
                             scale_rewards(rewards[4:], 8, mean, var, halves_stats, 10.0)])
    np.testing.assert_allclose(halves, whole, rtol=1e-6)
    np.testing.assert_allclose(halves_stats, whole_stats, rtol=1e-12)


def test_without_episode_ends_it_is_gymnasiums_normalize_reward():
    """One env, no ends: the variants agree, so this is what CleanRL trains on."""
    rewards = np.random.default_rng(0).normal(3.0, 2.0, 300).astype(np.float32)

    class Rewards(gym.Env):
        observation_space = gym.spaces.Box(-1, 1, (1,))
        action_space = gym.spaces.Discrete(1)

        def reset(self, *, seed=None, options=None):
            self.t = 0
            return np.zeros(1, np.float32), {}

        def step(self, action):
            self.t += 1
            return np.zeros(1, np.float32), float(rewards[self.t - 1]), False, False, {}

    wrapped = gym.wrappers.NormalizeReward(Rewards(), gamma=0.99)
    wrapped.reset(seed=0)
    want = [wrapped.step(0)[1] for _ in range(300)]
    got = normalize_rewards(rewards[None], np.zeros((1, 300), np.uint8), np.zeros(1), new_stats(), 0.99, np.inf)
    np.testing.assert_allclose(got[0], want, rtol=1e-6)


def test_the_scaler_leaves_the_slots_raw_and_moves_on_only_when_committed():
    from fastrl.layers.reward_scaling.scaler import RewardScaler

    rewards, dones = _batch(3, 4, 6)
    storage = {"reward": np.concatenate([rewards, np.ones((4, 1), np.float32)], axis=1),
               "done": np.concatenate([dones, np.zeros((4, 1), np.uint8)], axis=1),
               "action": np.zeros((4, 7), np.int64)}
    raw = storage["reward"].copy()
    scaler = RewardScaler(4, 0.99, 10.0)
    scaled = scaler.scaled(storage)
    assert np.array_equal(storage["reward"], raw) and scaled["action"] is storage["action"]
    carry, stats = np.zeros(4), new_stats()
    np.testing.assert_array_equal(scaled["reward"][:, :6], normalize_rewards(rewards, dones, carry, stats, 0.99, 10.0))
    assert scaled["reward"][:, 6].tolist() == [1.0] * 4  # row T is never learned from: left raw
    assert scaler.state()["stats"].tolist() == new_stats().tolist()  # an update that fails leaves them
    scaler.commit()
    restored = RewardScaler(4, 0.99, 10.0)
    restored.load(scaler.state())
    assert restored.stats.tolist() == stats.tolist() and restored.returns.tolist() == carry.tolist()
    with pytest.raises(ValueError, match="for 4 envs, this learner has 2"):
        RewardScaler(2, 0.99, 10.0).load(scaler.state())


def _train(tmp_path, name, *overrides, env="Pendulum-v1", mode="sync", algo="ppo"):
    config, base = cartpole(tmp_path, f"env.id='{env}'", f"algo.name='{algo}'", "reward_scaling.normalize=true",
                            *overrides, mode=mode)
    return fastrl.train(config, base, run_dir=tmp_path / name), tmp_path / name


def _identical(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _scaling(run) -> dict:
    return load_checkpoint(run)["resume"]["reward_scaling"]


# sync: one barrier order, in the slow run
@pytest.mark.parametrize("mode", [pytest.param("sync", marks=pytest.mark.slow), "hts"])
def test_parameters_and_statistics_do_not_depend_on_process_layout_or_timing(tmp_path, mode):
    """Pendulum PPO, 1/1 and 2/2 executors/actors with random step delays: bit-identical after 20 updates."""
    results = []
    for executors, actors in [(1, 1), (2, 2)]:
        _, run = _train(tmp_path, f"x{executors}a{actors}", f"engine.executors={executors}",
                        f"engine.actors={actors}", "engine.step_delay_s=0.002", mode=mode)
        results.append((load_checkpoint(run)["model"], _scaling(run)))
    (model, scaling), (other_model, other_scaling) = results
    assert _identical(model, other_model) and _identical(scaling, other_scaling)
    assert scaling["stats"][0] == pytest.approx(1e-4 + 20 * 5 * 8)  # once per step, over the 8 envs
    assert scaling["stats"][2] > 1.0  # Pendulum's returns spread far wider than the prior's variance 1
    if mode == "sync":  # and the rule trained on the scaled rewards
        _, raw = _train(tmp_path, "raw", "engine.serial=true", "reward_scaling.normalize=false", mode=mode)
        assert not _identical(model, load_checkpoint(raw)["model"])


# sync: slow run
@pytest.mark.parametrize(("mode", "algo"), [pytest.param("sync", "a2c", marks=pytest.mark.slow), ("hts", "ppo")])
def test_a_run_resumed_at_a_checkpoint_equals_the_uninterrupted_one(tmp_path, mode, algo):
    _, whole = _train(tmp_path, "whole", "engine.serial=true", mode=mode, algo=algo)
    _, half = _train(tmp_path, "half", "run.total_frames=400", mode=mode, algo=algo)
    assert load_checkpoint(half)["exact"]
    halfway = _scaling(half)
    fastrl.train(resume=half, overrides=["run.total_frames=800", "engine.executors=2"])
    resumed, expected = load_checkpoint(half), load_checkpoint(whole)
    assert resumed["frames"] == 800 and _identical(resumed["model"], expected["model"])
    assert _identical(_scaling(half), _scaling(whole)) and not _identical(_scaling(half), halfway)
    assert halfway["returns"].abs().min() > 0  # mid-episode accumulators (Pendulum's episodes are 200 steps)


def test_async_impala_scales_every_batch_by_its_envs(tmp_path):
    # 1600 frames are 200 steps per env, Pendulum's time limit: an env whose 200th step was trained would have
    # its accumulator reset to 0 by the truncation, so whether one is depends on the batches. No limit here.
    summary, run = _train(tmp_path, "async", "engine.executors=2", "run.total_frames=1600", "algo.batch_slots=4",
                          "env.kwargs={ max_episode_steps = 100000 }", mode="async", algo="impala")
    assert summary["status"] == "complete"
    checkpoint = load_checkpoint(run)
    scaling = checkpoint["resume"]["reward_scaling"]
    assert scaling["stats"][0] == pytest.approx(1e-4 + checkpoint["updates"] * 5 * 4)
    assert (scaling["returns"] != 0).all()  # every env's accumulator, by the env named in its full slots


def test_hopper_smoke(tmp_path, monkeypatch):
    pytest.importorskip("mujoco", reason="MuJoCo is not installed: pip install 'fastrl-engine[mujoco]'")
    monkeypatch.chdir(tmp_path)  # MuJoCo writes its warnings to MUJOCO_LOG.TXT in the working directory
    summary, run = _train(tmp_path, "hopper", "engine.serial=true", "engine.rollout=64", "run.total_frames=2048",
                          "algo.epochs=2", "algo.minibatches=4", "model.normalize_obs=true", env="Hopper-v5")
    assert summary["status"] == "complete" and summary["frames"] == 2048
    assert _scaling(run)["stats"][0] == pytest.approx(1e-4 + 2048)
    assert summary["final_return_mean"] is not None  # Hopper falls within 2048 steps: episodes were counted


@pytest.mark.parametrize(("override", "message"), [
    ("reward_scaling.clip=0", "reward_scaling.clip = 0.0: must be > 0"),
    ("reward_scaling.clip=-1", "reward_scaling.clip = -1.0: must be > 0"),
    ("reward_scaling.clip=nan", "reward_scaling.clip = nan: must be a finite number"),
    ("reward_scaling.clip='big'", "reward_scaling.clip = 'big': expected"),
    ("reward_scaling.normalize=1", "reward_scaling.normalize = 1: expected bool"),
    ("algo.reward_clip=0", "reward_scaling.clip = 0.0: must be > 0"),  # the old name, read as the new
])
def test_bad_values_name_the_key(override, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        load_config(None, [override])


def test_collecting_without_learning_refuses_reward_normalization():
    with pytest.raises(ConfigError, match="reward_scaling.normalize = true needs a learning algorithm"):
        load_config(None, ["algo.name='none'", "reward_scaling.normalize=true"])


def test_the_old_algo_keys_still_read_as_the_sections_with_a_warning(tmp_path, caplog):
    """algo.normalize_rewards and algo.reward_clip were the core's keys; a file, a --set and a checkpoint's config
    that write them still read, each as the layer's key, with one line naming it; both names at once are refused."""
    old = tmp_path / "old.toml"
    old.write_text('[env]\nid = "CartPole-v1"\n[algo]\nnormalize_rewards = true\nreward_clip = 5.0\n')
    with caplog.at_level("WARNING"):
        config = load_config(old, ["algo.reward_clip=3.0"])  # the old key's --set overrides the file's
    assert (config.reward_scaling.normalize, config.reward_scaling.clip) == (True, 3.0)
    assert "algo.normalize_rewards is deprecated: write reward_scaling.normalize" in caplog.text
    assert config_from_dict({"algo": {"normalize_rewards": True}}).reward_scaling.normalize
    with pytest.raises(ConfigError, match="algo.reward_clip and reward_scaling.clip are both set"):
        config_from_dict({"algo": {"reward_clip": 3.0}, "reward_scaling": {"clip": 4.0}})


@pytest.mark.slow  # two ranks; test_multinode keeps two ranks learning as one in the default tier
def test_two_ranks_of_four_envs_scale_as_one_rank_of_eight(tmp_path):
    """cohort.moments merges every rank's per-step moments: the statistics (and so the parameters) of 2 ranks x
    4 envs are those of 1 rank x 8 up to float rounding, and bit-identical between the ranks."""
    from tests.helpers.torchrun import QUICK, _finish, _rank_dir, _torchrun

    overrides = [*QUICK, "engine.rollout=16", "algo.minibatches=4", "algo.epochs=2", "run.total_frames=1024"]
    proc = _torchrun(tmp_path / "ranks", "configs/pendulum_ppo.toml", *overrides)
    err = _finish(proc)
    assert proc.returncode == 0, err
    fastrl.train("configs/pendulum_ppo.toml", [*overrides, "engine.serial=true"], run_dir=tmp_path / "one")
    rank0, rank1 = (load_checkpoint(_rank_dir(tmp_path / "ranks", r)) for r in (0, 1))
    one = load_checkpoint(tmp_path / "one")
    scaling0, scaling1 = rank0["resume"]["reward_scaling"], rank1["resume"]["reward_scaling"]
    assert torch.equal(scaling0["stats"], scaling1["stats"]) and _identical(rank0["model"], rank1["model"])
    single = one["resume"]["reward_scaling"]
    assert single["stats"][0] == pytest.approx(1e-4 + 8 * 128)
    # the one-rank run's parameters differ by rounding, so its actions and rewards do too: close, not equal
    torch.testing.assert_close(scaling0["stats"], single["stats"], rtol=1e-6, atol=0)
    torch.testing.assert_close(torch.cat([scaling0["returns"], scaling1["returns"]]), single["returns"], rtol=1e-5,
                               atol=1e-5)
    for name in one["model"]:
        torch.testing.assert_close(rank0["model"][name], one["model"][name], rtol=1e-5, atol=1e-5)
