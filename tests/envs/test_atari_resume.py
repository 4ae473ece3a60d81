"""An Atari env's saved state, restored in another emulator (a resumed run): bit for bit where ALE's state is
whole, and said so where it is not (``fastrl.envs.ale_state_check``)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from fastrl.envs import ale_state_check
from fastrl.envs.atari import AtariEnv
from fastrl.schema import AtariConfig


@pytest.fixture(autouse=True)
def _unchecked(monkeypatch):
    monkeypatch.setattr(ale_state_check, "_checks", {})  # each test sees a process that has checked nothing


def _played(env: AtariEnv, steps: int, seed: int) -> np.ndarray:
    """``steps`` random steps from a reset with ``seed`` (resets at episode ends): the last observation."""
    obs = np.zeros((2, *env.obs_shape), env.obs_dtype)
    env.reset(seed, obs[0])
    for t, action in enumerate(np.random.default_rng(seed).integers(env.n_actions, size=steps)):
        if env.step(int(action), obs[t % 2], obs[(t + 1) % 2])[3]:
            env.reset(seed + t, obs[(t + 1) % 2])
    return obs[steps % 2].copy()


def _go_on(env: AtariEnv, last: np.ndarray, actions) -> tuple[np.ndarray, np.ndarray]:
    """Observations and step results of ``actions`` from observation ``last``, resetting at episode ends."""
    obs = np.stack([last, last])
    seen, rows = [], []
    for t, action in enumerate(actions):
        rows.append(env.step(int(action), obs[t % 2], obs[(t + 1) % 2]))
        if rows[-1][3]:
            env.reset(1000 + t, obs[(t + 1) % 2])
        seen.append(obs[(t + 1) % 2].copy())
    return np.array(seen), np.array(rows)


def test_an_atari_env_restored_in_another_process_goes_on_bit_for_bit(caplog):
    """Sticky actions on, so the adapter's own stream is restored too; the compared stretch crosses resets."""
    config = AtariConfig(repeat_action_probability=0.25)
    env = AtariEnv("ALE/Breakout-v5", config)  # short random episodes: the stretch below crosses a reset
    last = _played(env, 100, seed=3)
    state = env.get_state()
    actions = np.random.default_rng(9).integers(env.n_actions, size=400)
    restored = AtariEnv("ALE/Breakout-v5", config)
    with caplog.at_level(logging.WARNING, logger=ale_state_check.__name__):
        restored.set_state(state)
    went_on = _go_on(env, last, actions)
    resumed = _go_on(restored, last, actions)
    assert went_on[1][:, 3].any(), "the stretch should hold an episode's end and a reset"
    np.testing.assert_array_equal(went_on[0], resumed[0])
    np.testing.assert_array_equal(went_on[1], resumed[1])
    assert not caplog.records  # a whole state: nothing to say


def test_a_game_whose_saved_state_is_incomplete_is_said_so_at_restore(caplog):
    """Q*bert: ALE's state leaves part of the emulator out, so the restored env parts from the saved one; the
    restore warns, once per game and process."""
    config = AtariConfig(repeat_action_probability=0.0)
    env = AtariEnv("QbertNoFrameskip-v4", config)
    last = _played(env, 400, seed=1)
    state = env.get_state()
    restored = AtariEnv("QbertNoFrameskip-v4", config)
    with caplog.at_level(logging.WARNING, logger=ale_state_check.__name__):
        restored.set_state(state)
        AtariEnv("QbertNoFrameskip-v4", config).set_state(state)
    warnings = [r for r in caplog.records if "not bit for bit" in r.getMessage()]
    assert len(warnings) == 1 and "QbertNoFrameskip-v4" in warnings[0].getMessage()
    actions = np.random.default_rng(2).integers(env.n_actions, size=300)
    assert not np.array_equal(_go_on(env, last, actions)[0], _go_on(restored, last, actions)[0])


@pytest.mark.parametrize("game,whole", [("pong", True), ("breakout", True), ("qbert", False), ("tetris", False)])
def test_the_check_tells_whole_states_from_incomplete_ones(game, whole):
    from ale_py import roms

    path = str(roms.get_rom_path(game))
    ale = ale_state_check.emulator(path)
    actions = ale.getMinimalActionSet()
    for i in np.random.default_rng(4).integers(len(actions), size=800):
        ale.act(actions[i])
        if ale.game_over():
            ale.reset_game()
    assert ale_state_check.restores_exactly(path, ale.cloneState()) is whole


def test_the_ale_states_bench_names_the_roms_whose_states_part_and_the_ones_alone_cannot_play():
    """Combat needs two players: ALE ends its process, which the sweep reports instead of dying with it."""
    from fastrl.bench.ale_states import sweep

    result = sweep(["pong", "qbert", "combat"], states=1, frames=60)
    assert result["roms"]["pong"] == {
        "states": 1, "parted": 0, "flagged": 0, "false_alarms": 0, "reset_depends_on_past": False
    }
    assert result["roms"]["qbert"]["parted"] == result["roms"]["qbert"]["flagged"] == 1
    assert result["roms"]["combat"] == "unplayable"
    assert result["parted"] == ["qbert"] and result["false_alarms"] == []
