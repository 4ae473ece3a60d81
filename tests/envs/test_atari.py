"""The native ALE adapter (fastrl/envs/atari.py): Atari ids, episodes, rewards, lives, seeds, no-ops and time
limits; its screens (``StepScreens``) against ALE's gray screens through the frame kernels, and the same observations
as ale-py's AtariVectorEnv. The kernels against their references: tests/kernels/test_kernels_frames.py."""
from __future__ import annotations

import numpy as np
import pytest

from csrc_free_kernels.frames import make_resize_plan, maxpool_resize_push
from csrc_free_kernels.step_end import CONTINUES, TERMINATED, TRUNCATED
from fastrl.config import AtariConfig
from fastrl.envs.atari import AtariEnv, is_atari_id, parse_atari_id
from fastrl.envs.atari_screen import StepScreens

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks


# ---------------------------------------------------------------- ids


def test_is_atari_id():
    for env_id in ("ALE/Pong-v5", "PongNoFrameskip-v4", "Breakout-v5", "Pong-v4", "PongDeterministic-v4",
                   "ALE/MsPacman-v5", "MontezumaRevengeNoFrameskip-v4", "ALE/TicTacToe3D-v5", "ALE/Pongg-v5"):
        assert is_atari_id(env_id), env_id
    for env_id in ("CartPole-v1", "LunarLander-v3", "mypkg.envs:make", "Pendulum-v1", "HalfCheetah-v5"):
        assert not is_atari_id(env_id), env_id


def test_id_parsing_and_sticky_defaults():
    assert parse_atari_id("ALE/Pong-v5") == ("pong", 0.25)
    assert parse_atari_id("Breakout-v5") == ("breakout", 0.25)
    assert parse_atari_id("PongNoFrameskip-v4") == ("pong", 0.0)
    assert parse_atari_id("ALE/MsPacman-v5") == ("ms_pacman", 0.25)
    assert parse_atari_id("SpaceInvaders-v0") == ("space_invaders", 0.25)
    assert AtariEnv("ALE/Pong-v5", AtariConfig()).repeat_action_probability == 0.25
    assert AtariEnv("PongNoFrameskip-v4", AtariConfig()).repeat_action_probability == 0.0
    assert AtariEnv("ALE/Pong-v5", AtariConfig(repeat_action_probability=0.1)).repeat_action_probability == 0.1


def test_every_shipped_rom_has_an_id():
    from ale_py import roms

    for rom in roms.get_all_rom_ids():
        assert parse_atari_id(f"ALE/{rom.title().replace('_', '')}-v5")[0] == rom


def test_unknown_game_names_close_matches():
    with pytest.raises(ValueError, match="Pong"):
        AtariEnv("ALE/Pongg-v5", AtariConfig())
    with pytest.raises(ValueError, match="Breakout"):
        AtariEnv("BreakuotNoFrameskip-v4", AtariConfig())


def test_bad_kwargs_and_actions():
    with pytest.raises(ValueError, match="frameskip"):
        AtariEnv("ALE/Pong-v5", AtariConfig(), {"frameskip": 4})
    with pytest.raises(ValueError, match="available"):
        AtariEnv("ALE/Breakout-v5", AtariConfig(), {"mode": 3})
    assert AtariEnv("ALE/Breakout-v5", AtariConfig(), {"mode": 4, "difficulty": 1}).n_actions == 4
    env = AtariEnv("ALE/Pong-v5", AtariConfig())
    obs = np.zeros((2, *env.obs_shape), np.uint8)
    env.reset(0, obs[0])
    with pytest.raises(ValueError):
        env.step(env.n_actions, obs[0], obs[1])


# ---------------------------------------------------------------- the adapter


def _run(env, seed, actions, stop_at_episode_over=True):
    """Observations (copies), rewards, raw rewards, dones, episode_overs of one seeded run."""
    obs = np.zeros((2, *env.obs_shape), env.obs_dtype)
    env.reset(seed, obs[0])
    seen, rows = [obs[0].copy()], []
    for t, action in enumerate(actions):
        rows.append(env.step(int(action), obs[t % 2], obs[(t + 1) % 2]))
        seen.append(obs[(t + 1) % 2].copy())
        if rows[-1][3] and stop_at_episode_over:
            break
    return np.array(seen), np.array(rows, dtype=np.float64).reshape(-1, 4)


def test_pong_episode():
    env = AtariEnv("PongNoFrameskip-v4", AtariConfig())
    assert env.obs_shape == (4, 84, 84) and env.obs_dtype == np.uint8 and env.n_actions == 6
    assert env.frames_per_step == 4
    actions = np.random.default_rng(0).integers(env.n_actions, size=5000)
    obs, rows = _run(env, 0, actions)
    reward, raw, done, over = rows.T
    assert obs.dtype == np.uint8 and obs.shape[1:] == (4, 84, 84)
    assert over[-1] and done[-1] and not over[:-1].any() and not done[:-1].any()
    assert done[-1] == TERMINATED  # the game ended: no bootstrap
    # A Pong game ends when one side has 21 points; Pong's rewards are already +-1.
    assert max((raw == 1).sum(), (raw == -1).sum()) == 21
    np.testing.assert_array_equal(reward, np.sign(raw))
    # The stack shifts by one frame per step; the first stack is the first frame four times.
    assert (obs[0] == obs[0][-1]).all()
    np.testing.assert_array_equal(obs[1:, :-1], obs[:-1, 1:])


def test_reward_clipping_and_raw_score():
    actions = np.random.default_rng(0).integers(6, size=400)
    clipped = AtariEnv("ALE/SpaceInvaders-v5", AtariConfig(repeat_action_probability=0.0))
    _, rows = _run(clipped, 0, actions)
    reward, raw = rows[:, 0], rows[:, 1]
    assert raw.max() > 1  # Space Invaders scores 5..30 a hit
    np.testing.assert_array_equal(reward, np.sign(raw))
    unclipped = AtariEnv("ALE/SpaceInvaders-v5", AtariConfig(repeat_action_probability=0.0, clip_rewards=False))
    _, rows2 = _run(unclipped, 0, actions)
    np.testing.assert_array_equal(rows2[:, 0], raw)
    np.testing.assert_array_equal(rows2[:, 1], raw)


@pytest.mark.parametrize("episodic_life", [False, True])
def test_breakout_lives(episodic_life):
    config = AtariConfig(episodic_life=episodic_life, repeat_action_probability=0.0)
    env = AtariEnv("BreakoutNoFrameskip-v4", config)
    assert env.n_actions == 4
    actions = np.random.default_rng(1).integers(env.n_actions, size=20_000)
    obs, rows = _run(env, 3, actions)
    raw, done, over = rows[:, 1], rows[:, 2].astype(bool), rows[:, 3].astype(bool)
    assert over[-1] and not over[:-1].any()
    assert env._ale.lives() == 0
    lost = np.flatnonzero(done & ~over)
    if episodic_life:
        assert len(lost) == 4  # five lives: four life losses, then game over
        assert (rows[lost, 2] == TERMINATED).all()  # a lost life ends the return for learning
        for t in lost:  # the stack restarts from one frame, as after a reset
            assert (obs[t + 1] == obs[t + 1][-1]).all()
    else:
        assert len(lost) == 0
    assert (raw >= 0).all()  # bricks score 1, 4 or 7; nothing costs points


def test_same_seed_same_episode_whatever_came_before():
    """Sticky actions on: the reset seed alone fixes no-ops and sticky draws."""
    config = AtariConfig(repeat_action_probability=0.25)
    actions = np.random.default_rng(2).integers(4, size=150)
    env = AtariEnv("ALE/Breakout-v5", config)
    first = _run(env, 11, actions, stop_at_episode_over=False)
    _run(env, 5, actions[::-1], stop_at_episode_over=False)  # something else in between
    again = _run(env, 11, actions, stop_at_episode_over=False)
    fresh = _run(AtariEnv("ALE/Breakout-v5", config), 11, actions, stop_at_episode_over=False)
    for other in (again, fresh):
        np.testing.assert_array_equal(first[0], other[0])
        np.testing.assert_array_equal(first[1], other[1])
    different = [_run(env, seed, actions, stop_at_episode_over=False)[0] for seed in (12, 13)]
    assert any(not np.array_equal(first[0], obs) for obs in different)


def test_noop_count_comes_from_seed():
    env = AtariEnv("PongNoFrameskip-v4", AtariConfig(noop_max=30, fire_reset=False))
    out = np.zeros(env.obs_shape, np.uint8)
    counts = set()
    for seed in range(8):
        env.reset(seed, out)
        counts.add(env._ale.getEpisodeFrameNumber())
        env.reset(seed, out)
        assert env._ale.getEpisodeFrameNumber() in counts
    assert len(counts) > 1 and all(1 <= c <= 30 for c in counts)


def test_truncation_counts_emulator_frames():
    config = AtariConfig(noop_max=0, fire_reset=False, max_episode_frames=100, repeat_action_probability=0.0)
    env = AtariEnv("PongNoFrameskip-v4", config)
    _, rows = _run(env, 0, np.zeros(100, int))
    assert len(rows) == 25 and rows[-1, 2] and rows[-1, 3]  # 25 steps x 4 frames
    assert rows[-1, 2] == TRUNCATED and (rows[:-1, 2] == CONTINUES).all()  # a time limit, not a game over


def test_other_settings():
    env = AtariEnv("ALE/Pong-v5", AtariConfig(full_action_space=True, frame_skip=1, size=64, stack=2))
    assert env.n_actions == 18 and env.frames_per_step == 1 and env.obs_shape == (2, 64, 64)
    obs, rows = _run(env, 0, np.random.default_rng(0).integers(18, size=50))
    assert obs.shape == (51, 2, 64, 64) and not rows[:, 3].any()
    env.close()


@pytest.mark.parametrize("game", ["pong", "breakout", "ms_pacman", "enduro", "riverraid", "space_invaders"])
@pytest.mark.parametrize("frame_skip", [4, 1])
def test_step_screens_equal_ale_gray_screens(game, frame_skip):
    """Real emulator frames, random play through game overs and resets: StepScreens (indices,
    learned gray levels, incremental update) gives exactly the stack the gray path gives."""
    from ale_py import ALEInterface, LoggerMode, roms

    ALEInterface.setLoggerMode(LoggerMode.Error)
    ale = ALEInterface()
    ale.setFloat("repeat_action_probability", 0.0)
    ale.loadROM(str(roms.get_rom_path(game)))
    plan = make_resize_plan()
    screens = StepScreens(ale, plan)
    mid, last = np.zeros((210, 160), np.uint8), np.zeros((210, 160), np.uint8)
    ours, want = np.zeros((4, 84, 84), np.uint8), np.zeros((4, 84, 84), np.uint8)
    rng = np.random.default_rng(0)
    actions = ale.getMinimalActionSet()
    ale.reset_game()
    screens.restart()
    for step in range(400 if frame_skip == 4 else 800):
        action = actions[rng.integers(len(actions))]
        pooled = frame_skip > 1
        for i in range(frame_skip):
            ale.act(action)
            if ale.game_over():
                pooled = False
                break
            if i == frame_skip - 2:
                screens.fetch_mid()
                ale.getScreenGrayscale(mid)
        screens.fetch_last(pool=pooled)
        ale.getScreenGrayscale(last)
        screens.push(ours, ours)
        maxpool_resize_push(mid if pooled else last, last, want, want, plan)
        np.testing.assert_array_equal(ours, want, err_msg=f"{game} step {step}")
        if ale.game_over() or rng.random() < 0.01:  # and now and then a reset mid-game
            ale.reset_game()
            screens.restart()


# ---------------------------------------------------------------- equivalence with AtariVectorEnv


@pytest.mark.parametrize("game,env_id", [("pong", "PongNoFrameskip-v4"), ("breakout", "BreakoutNoFrameskip-v4")])
def test_same_observations_as_atari_vector_env(game, env_id):
    """Same actions, same frames as ale-py's AtariVectorEnv (frameskip 4, max-pool, 84x84, stack 4).

    Both sides: no no-ops (AtariVectorEnv draws 0..noop_max-1 of them, so noop_max=0 or 1
    gives none), no sticky actions, no FIRE at reset, no episodic life, raw rewards. What
    cannot match, and is therefore not compared:
    - reset padding: AtariVectorEnv pads the first stack with zero frames, we repeat the
      first frame (baselines FrameStack), so only the newest min(t+1, 4) frames are compared;
    - FIRE at reset: AtariVectorEnv plays one FIRE frame, we play FIRE and the third action
      for one agent step each (baselines FireResetEnv);
    - the observation of the step that ends the game: AtariVectorEnv leaves its frame-skip
      loop on game over before saving the screen, so its last frame is stale; ours is the
      final screen. Rewards and the step of termination are compared.
    Pixels may differ by 1: both use OpenCV's INTER_AREA weights, but the kernel sums rows
    before columns (see csrc_free_kernels/frames.py).
    """
    from ale_py import AtariVectorEnv

    env = AtariEnv(env_id, AtariConfig(noop_max=0, fire_reset=False, repeat_action_probability=0.0, clip_rewards=False))
    vec = AtariVectorEnv(game, 1, noop_max=0, use_fire_reset=False, repeat_action_probability=0.0,
                         reward_clipping=False, episodic_life=False, num_threads=1)
    try:
        obs = np.zeros((2, 4, 84, 84), np.uint8)
        env.reset(0, obs[0])
        vec_obs, _ = vec.reset(seed=0)
        assert not vec_obs[0, :3].any()  # zero padding on their side
        rng = np.random.default_rng(1)
        differing = 0
        for t in range(3000):
            newest = min(t + 1, 4)
            diff = np.abs(obs[t % 2, -newest:].astype(int) - vec_obs[0, -newest:])
            assert diff.max() <= 1, f"step {t}"
            differing += np.count_nonzero(diff)
            action = int(rng.integers(env.n_actions))
            _, raw, done, over = env.step(action, obs[t % 2], obs[(t + 1) % 2])
            vec_obs, vec_reward, terminated, truncated, _ = vec.step(np.array([action]))
            assert raw == vec_reward[0] and done == terminated[0] and over == terminated[0], f"step {t}"
            if over:
                break
        assert over, "the game should end within 3000 random steps"
        assert differing <= 1e-4 * 84 * 84 * 4 * t
    finally:
        vec.close()


def test_gymnasium_ids_win_over_rom_names():
    """Blackjack-v1 is gymnasium's toy-text env, though ale-py also ships a Blackjack ROM."""
    from fastrl.envs.registry import _is_atari

    assert not _is_atari("Blackjack-v1")
    assert _is_atari("ALE/Blackjack-v5") and _is_atari("BlackjackNoFrameskip-v4")
