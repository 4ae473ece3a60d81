"""Atari frame kernels against their numpy references, and the native ALE adapter.

Tolerances: max-pool, stack push and stack fill are exact. The area resize is exact against
the float64 reference for power-of-two weights (integer factors 2, 4) and constant images;
for other factors it is within 1 on a small fraction of pixels, where the exact average sits
within float32 rounding of a half (the kernel sums in float32, like OpenCV).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from csrc_free_kernels.frames import (
    area_resize,
    area_resize_reference,
    area_table,
    area_weights_reference,
    colors_known_kernel,
    indexed_maxpool_resize_push_kernel,
    learn_colors_kernel,
    make_resize_plan,
    maxpool,
    maxpool_reference,
    maxpool_resize_push,
    maxpool_resize_push_reference,
    push_reference,
    stack_fill,
    stack_fill_reference,
)
from csrc_free_kernels.step_end import CONTINUES, TERMINATED, TRUNCATED
from fastrl.config import AtariConfig
from fastrl.envs.atari import AtariEnv, is_atari_id, parse_atari_id
from fastrl.envs.atari_screen import StepScreens

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

SHAPES = [(84, 84), (64, 64), (42, 42), (105, 80), (52, 40), (96, 72), (200, 170), (8, 8)]


def _frames(seed, shape=(210, 160)):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, shape, dtype=np.uint8), rng.integers(0, 256, shape, dtype=np.uint8)


# ---------------------------------------------------------------- kernels


@pytest.mark.parametrize("src,dst", [(210, 84), (160, 84), (210, 64), (160, 42), (160, 170), (7, 3), (10, 10)])
def test_area_table_matches_dense_weights(src, dst):
    index, weight = area_table(src, dst)
    dense = np.zeros((dst, src))
    np.add.at(dense, (np.repeat(np.arange(dst), index.shape[1]), index.ravel()), weight.ravel())
    np.testing.assert_allclose(dense, area_weights_reference(src, dst), atol=2e-3)  # slivers < 1e-3 dropped
    np.testing.assert_allclose(weight.sum(axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("shape", SHAPES)
def test_resize_within_one_of_exact_average(shape):
    plan = make_resize_plan((210, 160), shape)
    for seed in range(3):
        src, _ = _frames(seed)
        got = area_resize(src, np.empty(shape, np.uint8), plan)
        diff = got.astype(int) - area_resize_reference(src, shape)
        assert np.abs(diff).max() <= 1
        assert np.count_nonzero(diff) <= 0.01 * diff.size


@pytest.mark.parametrize("shape", [(105, 80), (105, 40), (210, 160)])
def test_resize_exact_for_power_of_two_weights(shape):
    plan = make_resize_plan((210, 160), shape)
    src, _ = _frames(7)
    np.testing.assert_array_equal(area_resize(src, np.empty(shape, np.uint8), plan), area_resize_reference(src, shape))


def test_resize_of_constant_image_is_constant():
    plan = make_resize_plan()
    for value in (0, 1, 87, 142, 255):
        src = np.full((210, 160), value, np.uint8)
        assert (area_resize(src, np.empty((84, 84), np.uint8), plan) == value).all()


@pytest.mark.parametrize("shape", [(84, 84), (42, 42), (105, 80)])
@pytest.mark.parametrize("stack", [1, 2, 4])
def test_maxpool_resize_push_matches_reference(shape, stack):
    plan = make_resize_plan((210, 160), shape)
    a, b = _frames(stack)
    prev = np.random.default_rng(1).integers(0, 256, (stack, *shape), dtype=np.uint8)
    out = np.zeros_like(prev)
    maxpool_resize_push(a, b, prev, out, plan)
    want = maxpool_resize_push_reference(a, b, prev)
    np.testing.assert_array_equal(out[:-1], want[:-1])  # the shift is exact
    assert np.abs(out[-1].astype(int) - want[-1]).max() <= 1
    # Max-pool first, then resize: the same as resizing the max-pooled frame.
    np.testing.assert_array_equal(out[-1], area_resize(maxpool_reference(a, b), np.empty(shape, np.uint8), plan))


def test_push_in_place_equals_push_into_other_row():
    plan = make_resize_plan()
    a, b = _frames(3)
    prev = np.random.default_rng(2).integers(0, 256, (4, 84, 84), dtype=np.uint8)
    out = np.empty_like(prev)
    maxpool_resize_push(a, b, prev, out, plan)
    inplace = prev.copy()
    maxpool_resize_push(a, b, inplace, inplace, plan)
    np.testing.assert_array_equal(inplace, out)
    np.testing.assert_array_equal(out[:-1], push_reference(prev, out[-1])[:-1])


def test_maxpool_and_stack_fill_exact():
    a, b = _frames(5)
    np.testing.assert_array_equal(maxpool(a, b, np.empty_like(a)), maxpool_reference(a, b))
    stack = np.random.default_rng(0).integers(0, 256, (4, 84, 84), dtype=np.uint8)
    want = stack_fill_reference(stack)
    np.testing.assert_array_equal(stack_fill(stack), want)


def test_kernel_rejects_mismatched_shapes():
    plan = make_resize_plan()
    a, b = _frames(0)
    with pytest.raises(ValueError):
        maxpool_resize_push(a, b, np.zeros((4, 84, 84), np.uint8), np.zeros((4, 64, 64), np.uint8), plan)
    with pytest.raises(ValueError):
        maxpool_resize_push(a[:200], b[:200], np.zeros((4, 84, 84), np.uint8), np.zeros((4, 84, 84), np.uint8), plan)


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


# ---------------------------------------------------------------- palette-indexed, incremental path


def _indexed_push(a, b, a_ref, b_ref, lut, state, prev, plan, full, may_differ=None):
    frame, small, changed = state
    out = np.empty_like(prev)
    may_differ = np.ones((1, a.shape[0]), np.bool_) if may_differ is None else may_differ
    rows = indexed_maxpool_resize_push_kernel(a, b, a_ref, b_ref, lut, frame, small, prev, out, *plan, changed, full,
                                              may_differ)
    return out, rows


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), colours=st.integers(1, 128), change=st.floats(0.0, 1.0))
def test_indexed_push_equals_the_gray_path_step_after_step(seed, colours, change):
    """A sequence of palette-index frames with sparse changes: the incremental kernel's output is,
    bit for bit, the full kernel's on the frames' gray levels, at every step (and the recomputed
    output rows are only those reading a changed source row)."""
    rng = np.random.default_rng(seed)
    plan = make_resize_plan()
    palette = rng.choice(np.arange(0, 256, 2), colours, replace=False).astype(np.uint8)
    lut = np.full(256, -1, np.int16)
    lut[palette] = rng.integers(0, 256, colours)
    state = (np.zeros((210, 160), np.uint8), np.zeros((84, 84), np.uint8), np.zeros(210, np.bool_))
    a_ref = b_ref = np.zeros((210, 160), np.uint8)
    a, b = (palette[rng.integers(colours, size=(210, 160))] for _ in range(2))
    prev = np.zeros((4, 84, 84), np.uint8)
    for step in range(6):
        out, rows = _indexed_push(a, b, a_ref, b_ref, lut, state, prev, plan, step == 0)
        want = np.empty_like(prev)
        maxpool_resize_push(lut[a].astype(np.uint8), lut[b].astype(np.uint8), prev, want, plan)
        np.testing.assert_array_equal(out, want)
        assert rows == 84 or step > 0
        prev, a_ref, b_ref = out, a, b
        a, b = a.copy(), b.copy()
        for frame in (a, b):  # a few changed blocks, sometimes none
            for _ in range(int(rng.integers(0, 4) * change)):
                y, x = rng.integers(0, 200), rng.integers(0, 150)
                frame[y:y + 10, x:x + 10] = palette[rng.integers(colours)]


def _pushed_once():
    """Random index frames a, b pushed once in full: (plan, lut, a, b, kernel state, output, rows)."""
    plan = make_resize_plan()
    lut = np.arange(256, dtype=np.int16)
    a, b = _frames(0)
    state = (np.zeros((210, 160), np.uint8), np.zeros((84, 84), np.uint8), np.zeros(210, np.bool_))
    first, rows = _indexed_push(a, b, a, b, lut, state, np.zeros((4, 84, 84), np.uint8), plan, True)
    return plan, lut, a, b, state, first, rows


def test_indexed_push_recomputes_nothing_when_nothing_changed():
    plan, lut, a, b, state, first, rows = _pushed_once()
    again, rows_again = _indexed_push(a, b, a, b, lut, state, first, plan, False)
    assert rows == 84 and rows_again == 0
    np.testing.assert_array_equal(again[-1], first[-1])
    np.testing.assert_array_equal(again[:-1], first[1:])


def test_indexed_push_reads_only_rows_that_may_differ():
    """Rows outside the ``may_differ`` bound are skipped unread; the bound's rows are updated."""
    plan, lut, a, b, state, first, _ = _pushed_once()
    a2, b2 = a.copy(), b.copy()
    a2[10:20] = 255
    b2[100:110] = 255
    bound = np.zeros((3, 210), np.bool_)
    bound[0, 10:20] = True  # b's change lies outside the bound: left as it was
    _, rows = _indexed_push(a2, b2, a, b, lut, state, first, plan, False, bound)
    assert 0 < rows < 84 and (state[0][10:20] == 255).all() and not (state[0][100:110] == 255).all()
    bound[2, 100:110] = True  # any flag row counts
    _, rows_both = _indexed_push(a2, b2, a, b, lut, state, first, plan, False, bound)
    assert (state[0][100:110] == 255).all() and rows_both > 0


def test_colors_known_looks_only_where_the_frame_changed():
    lut = np.full(256, -1, np.int16)
    lut[[0, 2]] = [10, 20]
    ref = np.zeros((210, 160), np.uint8)
    frame = ref.copy()
    frame[5, 7] = 2
    rows = np.zeros(210, np.bool_)
    assert colors_known_kernel(frame, ref, lut, False, rows) and np.flatnonzero(rows).tolist() == [5]
    assert colors_known_kernel(frame, ref, lut, True, rows) and rows.all()
    ref[100, 100] = frame[100, 100] = 8  # unknown, but unchanged from a frame already known
    assert colors_known_kernel(frame, ref, lut, False, rows) and not colors_known_kernel(frame, ref, lut, True, rows)
    frame[50, 3] = 6
    frame[150, 3] = 2
    assert not colors_known_kernel(frame, ref, lut, False, rows)
    assert np.flatnonzero(rows).tolist() == [5, 50, 150]  # every changed row, past the unknown colour


def test_learn_colors_refuses_a_second_gray_level_for_one_index():
    lut = np.full(256, -1, np.int16)
    frame = np.array([[4, 4, 6]], np.uint8)
    assert learn_colors_kernel(frame, np.array([[30, 30, 40]], np.uint8), lut)
    assert lut[4] == 30 and lut[6] == 40 and (np.delete(lut, [4, 6]) == -1).all()
    assert not learn_colors_kernel(frame, np.array([[31, 30, 40]], np.uint8), lut)


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
