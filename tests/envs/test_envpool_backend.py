"""``env.backend = "envpool"``: envpool's C++ vector envs as an executor backend, through the plug-in point."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import fastrl
from csrc_free_kernels.step_end import CONTINUES, TRUNCATED
from fastrl.config import ConfigError, EnvConfig
from fastrl.envs import envpool_vector
from fastrl.envs.actions import UnsupportedEnvError
from fastrl.envs.envpool_vector import make_group
from fastrl.envs.registry import backend_for, make_env
from tests.helpers.runs import assert_a_group_backend_resumes_with_restarted_envs, layout_digests

pytest.importorskip("envpool")

QUIET = ["model.compile=false", "run.progress=false", "run.tensorboard=false", "env.backend='envpool'"]
PONG = [*QUIET, "engine.envs=4", "engine.rollout=16", "run.total_frames=1024"]  # 4 envs x 16 steps x 4 frames: 4
CHEETAH = [*QUIET, "engine.envs=4", "engine.rollout=32", "algo.minibatches=4", "algo.epochs=2", "run.total_frames=512"]




def _play(envs, actions):
    """Reset each env, then step every group with ``actions`` (steps x envs): each env's observations and rewards."""
    seen: list[list] = [[] for _ in envs]
    obs = [np.zeros(env.obs_shape, env.obs_dtype) for env in envs]
    for env, out in zip(envs, obs):
        env.reset(0, out)
    for row in actions:
        for group in {id(env.group): env.group for env in envs}.values():
            group.step([row[k] for k, env in enumerate(envs) if env.group is group])
        for k, env in enumerate(envs):
            reward, raw, done, over = env.step(row[k], obs[k], obs[k])
            seen[k].append((obs[k].tobytes(), raw, done))
            if over:
                env.reset(0, obs[k])
    return seen


@pytest.mark.unit
@pytest.mark.parametrize("env_id", ["PongNoFrameskip-v4", "HalfCheetah-v5"])
def test_an_env_steps_the_same_alone_or_in_a_group(env_id):
    """envpool seeds an env once, when made: with its own seed it follows the same trajectory in any group."""
    config = EnvConfig(id=env_id, backend="envpool")
    config.atari.max_episode_frames = 160  # two Pong time limits in 60 steps: the resets are compared too
    config.kwargs = {} if env_id.startswith("Pong") else {"max_episode_steps": 25}
    rng = np.random.default_rng(0)
    probe = make_env(config)
    kind, dims = probe.action_spec.kind, probe.action_spec.dims
    probe.close()
    if kind == "discrete":
        actions = rng.integers(6, size=(60, 3)).tolist()
    else:
        actions = [[rng.uniform(-2, 2, dims).astype(np.float32) for _ in range(3)] for _ in range(60)]
    together = make_group(config, [0, 1, 2], seeds=[11, 12, 13])
    alone = [make_group(config, [i], seeds=[11 + i])[0] for i in range(3)]
    reseeded = make_group(config, [0], seeds=[99])
    try:
        seen = _play(together, actions)
        assert seen == _play(alone, actions)
        assert any(done == TRUNCATED for _, _, done in seen[0])  # the time limit came and the env went on
        assert _play(reseeded, [row[:1] for row in actions])[0] != seen[0]  # the seed is the env's randomness
    finally:
        for env in [*together, *alone, *reseeded]:
            env.close()


@pytest.mark.unit
@pytest.mark.parametrize("env_id", ["PongNoFrameskip-v4", "BreakoutNoFrameskip-v4"])
def test_atari_frames_are_those_of_fastrls_own_preprocessing(env_id):
    """The same frame skip, max-pool, area resize, gray and stack as the ``atari`` backend: within one gray level
    (the resize's rounding), step for step. One no-op and no FIRE, so that both start from the same frame."""
    frames = {}
    for backend in ("atari", "envpool"):
        config = EnvConfig(id=env_id, backend=backend)
        config.atari.noop_max, config.atari.fire_reset = 1, False
        env = make_env(config)
        out = np.zeros(env.obs_shape, np.uint8)
        env.reset(3, out)
        seen = [out.copy()]
        for action in [0, 1, 2, 3, 2, 1] * 5:
            if backend == "envpool":
                env.group.step([action])  # type: ignore[attr-defined]
            env.step(action, out, out)
            seen.append(out.copy())
        env.close()
        frames[backend] = np.array(seen, np.int16)
    assert frames["envpool"].shape == (31, 4, 84, 84)
    assert np.abs(frames["atari"] - frames["envpool"]).max() <= 1


@pytest.mark.unit
def test_a_time_limit_ends_an_episode_and_the_reset_starts_a_whole_new_one():
    """After a truncation fastrl resets the env; envpool's own auto-reset must not swallow the next step's action,
    so every episode lasts exactly the limit."""
    config = EnvConfig(id="HalfCheetah-v5", backend="envpool", kwargs={"max_episode_steps": 7})
    (env,) = make_group(config, [0], seeds=[3])
    try:
        out = np.zeros(env.obs_shape, np.float32)
        env.reset(0, out)
        lengths, length = [], 0
        for _ in range(30):
            env.group.step([np.zeros(6, np.float32)])
            _, _, done, over = env.step(None, out, out)
            length += 1
            if over:
                assert done == TRUNCATED
                lengths.append(length)
                length = 0
                env.reset(0, out)
            else:
                assert done == CONTINUES
        assert lengths == [7, 7, 7, 7]
    finally:
        env.close()


@pytest.mark.engine
def test_pong_trains_on_envpool_with_the_same_bits_in_every_layout(tmp_path):
    """Two executors of one envpool each, and one executor of two envpools: the same parameters."""
    assert len(layout_digests(tmp_path, "configs/pong_sync.toml", PONG, [(2, 1), (1, 2)], 1024)) == 1


@pytest.mark.engine
def test_the_shipped_mujoco_config_trains_box_actions_with_the_same_bits_in_two_layouts(tmp_path):
    assert len(layout_digests(tmp_path, "configs/halfcheetah_envpool.toml", CHEETAH, [(1, 1), (2, 1)], 512)) == 1


@pytest.mark.slow  # 8 s
@pytest.mark.engine
def test_an_envpool_run_resumes_with_freshly_seeded_envs(tmp_path):
    """envpool cannot save one env's state: its envs restart with the restart's seeds (seeding.made_env_seed)."""
    assert_a_group_backend_resumes_with_restarted_envs(tmp_path / "r", PONG)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        (["engine.mode='async'", "algo.name='impala'", "algo.normalize_returns=false"],
         r"env.backend = 'envpool'.*'sync' or 'hts'"),
        (["env.on_error='reset'"], r"env.backend = 'envpool' cannot reset one env"),
        (["env.atari.episodic_life=true"], r"does not take env.atari.episodic_life"),
        (["env.atari.noop_max=0"], r"takes env.atari.noop_max >= 1"),
        (["env.id='NoSuchTask-v0'"], r"env.backend = 'envpool' does not take env.id = 'NoSuchTask-v0'"),
        (["env.id='ALE/Pongg-v5'"], r"unknown Atari game 'Pongg'.*Pong"),
    ],
)
def test_a_config_envpool_cannot_run_is_refused_before_anything_starts(tmp_path, overrides, match):
    with pytest.raises((ConfigError, UnsupportedEnvError), match=match):
        fastrl.train("configs/pong_sync.toml", [*PONG, *overrides], run_dir=tmp_path / "refused")
    assert not (tmp_path / "refused" / "checkpoints").exists()


@pytest.mark.unit
def test_without_envpool_installed_the_backend_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "envpool", None)  # import envpool now raises ImportError
    envpool_vector._tasks.cache_clear()
    try:
        with pytest.raises(UnsupportedEnvError,
                           match=r"needs the envpool package: pip install 'fastrl-engine\[envpool\]'"):
            backend_for(EnvConfig(id="PongNoFrameskip-v4", backend="envpool"))
    finally:
        envpool_vector._tasks.cache_clear()


@pytest.mark.unit
def test_auto_never_picks_envpool():
    assert backend_for(EnvConfig(id="PongNoFrameskip-v4")).name == "atari"
    assert backend_for(EnvConfig(id="HalfCheetah-v5")).name == "gymnasium"
