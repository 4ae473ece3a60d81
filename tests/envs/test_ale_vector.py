"""``env.backend = "ale_vector"``: ale-py's AtariVectorEnv as an executor backend, through the plug-in point."""

from __future__ import annotations

import numpy as np
import pytest

import fastrl
from csrc_free_kernels.step_end import TRUNCATED
from fastrl.config import ConfigError, EnvConfig
from fastrl.envs.ale_vector import make_group
from fastrl.envs.registry import backend_for, backends
from tests.helpers.runs import assert_a_group_backend_resumes_with_restarted_envs, layout_digests

PONG = ["model.compile=false", "run.progress=false", "run.tensorboard=false", "env.backend='ale_vector'",
        "engine.envs=4", "engine.rollout=16", "run.total_frames=1024"]  # 4 envs x 16 steps x 4 frames: 4 updates




def _play(envs, seeds, actions):
    """Reset each env with its seed, then step them all with ``actions`` (steps x envs): obs and rewards seen."""
    seen = []
    obs = [np.zeros(env.obs_shape, np.uint8) for env in envs]
    for env, seed, out in zip(envs, seeds, obs):
        env.reset(seed, out)
    for row in actions:
        for group in {id(env.group): env.group for env in envs}.values():
            members = [(k, env) for k, env in enumerate(envs) if env.group is group]
            group.step([int(row[k]) for k, _ in members])
        for k, env in enumerate(envs):
            reward, raw, done, over = env.step(int(row[k]), obs[k], obs[k])
            seen.append((k, obs[k].tobytes(), raw, done))
            if over:
                env.reset(seeds[k] + 1, obs[k])
    return seen


@pytest.mark.unit
def test_an_env_steps_the_same_alone_or_in_a_group():
    """Each env has its own emulator, reset with fastrl's seeds: in any group its trajectory is the same."""
    config = EnvConfig(id="PongNoFrameskip-v4", backend="ale_vector")
    actions = np.random.default_rng(0).integers(6, size=(40, 3))
    together = make_group(config, [0, 1, 2])
    alone = [make_group(config, [i])[0] for i in range(3)]
    try:
        assert _play(together, [11, 12, 13], actions) == _play(alone, [11, 12, 13], actions)
    finally:
        for env in [*together, *alone]:
            env.close()


@pytest.mark.unit
def test_an_episode_after_a_time_limit_is_the_one_its_reset_seed_starts():
    """A truncated env is reset by fastrl with the stream's seed; AtariVectorEnv's own autoreset must not reset
    it again on the next step (that step would then ignore its action)."""
    config = EnvConfig(id="PongNoFrameskip-v4", backend="ale_vector")
    config.atari.max_episode_frames = 120  # truncated after ~30 agent steps (no-ops and FIRE counted)
    actions = np.random.default_rng(1).integers(6, size=60)
    cut = make_group(config, [0])[0]
    fresh = make_group(config, [0])[0]
    try:
        obs = np.zeros(cut.obs_shape, np.uint8)
        cut.reset(5, obs)
        for action in actions:  # to the time limit
            cut.group.step([int(action)])
            _, _, done, over = cut.step(int(action), obs, obs)
            if over:
                break
        assert over and done == TRUNCATED, done
        cut.reset(7, obs)
        again = np.zeros_like(obs)
        fresh.reset(7, again)
        np.testing.assert_array_equal(obs, again)
        for action in actions[:10]:  # the same episode, step for step
            for env, out in ((cut, obs), (fresh, again)):
                env.group.step([int(action)])
                env.step(int(action), out, out)
            np.testing.assert_array_equal(obs, again)
    finally:
        cut.close()
        fresh.close()


@pytest.mark.engine
def test_pong_trains_on_the_vector_backend_with_the_same_bits_in_every_layout(tmp_path):
    """Two executors of one vector env each, and one executor of two: the same parameters."""
    assert len(layout_digests(tmp_path, "configs/pong_sync.toml", PONG, [(2, 1), (1, 2)], 1024)) == 1


@pytest.mark.slow  # 8 s; the vector backend's layouts test stays in the default run
@pytest.mark.engine
def test_a_vector_backend_run_resumes_with_seeded_resets(tmp_path):
    """AtariVectorEnv cannot save one env's state: its envs restart with seeded resets."""
    assert_a_group_backend_resumes_with_restarted_envs(tmp_path / "r", PONG)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        (["engine.mode='async'", "algo.name='impala'", "algo.normalize_returns=false"],
         r"env.backend = 'ale_vector'.*'sync' or 'hts'"),
        (["env.on_error='reset'"], r"env.backend = 'ale_vector' cannot reset one env"),
        (["env.atari.episodic_life=true"], r"does not take env.atari.episodic_life"),
        (["env.id='CartPole-v1'"], r"env.backend = 'ale_vector' does not take env.id = 'CartPole-v1'"),
        (["env.backend='no_such'"], r"env.backend = 'no_such': no such env backend; registered: 'auto', 'factory'"),
    ],
)
def test_a_backend_that_cannot_run_the_config_is_refused_before_anything_starts(tmp_path, overrides, match):
    with pytest.raises(ConfigError, match=match):
        fastrl.train("configs/pong_sync.toml", [*PONG, *overrides], run_dir=tmp_path / "refused")
    assert not (tmp_path / "refused" / "checkpoints").exists()


@pytest.mark.unit
def test_auto_never_picks_the_vector_backend():
    assert backend_for(EnvConfig(id="PongNoFrameskip-v4")).name == "atari"
    assert [b.name for b in backends() if not b.auto] == ["ale_vector", "envpool"]
