"""An executor's envs in a checkpoint: what a checkpoint barrier saves of each env, and what a resumed run
restores of it to go on bit for bit (its state, RNG stream, episode counters, last observation and recurrent
state, and its last finished episodes)."""

from __future__ import annotations

import logging
from collections import deque
from pathlib import Path

import numpy as np

from fastrl.envs import EnvAdapter
from fastrl.runs.checkpoint import read_env_episodes, read_env_states
from fastrl.seeding import env_rng
from fastrl.spec import RunSpec

log = logging.getLogger(__name__)

Episodes = deque[tuple[int, int, float, int]]  # (rollout, step, return, length) of each finished episode


def restored_streams(
    spec: RunSpec, env_list: list[int], first_rollout: int
) -> tuple[list[np.random.Generator], dict[int, dict]]:
    """Each env's RNG stream, and the saved states a resumed run continues from (by local index)."""
    seed, resume = spec.config.run.seed, spec.resume
    saved = read_env_states(Path(resume.env_states)) if resume and resume.env_states else {}
    rngs, restored = [], {}
    for i, env in enumerate(env_list):
        state = saved.get(env)
        if state is not None and state["env"] is not None:
            rng = np.random.default_rng()
            rng.bit_generator.state = state["rng"]
            restored[i] = state
        else:  # a fresh run, or an env that could not be saved: seeded restart
            rng = env_rng(seed, spec.global_env(env), restart=first_rollout)
        rngs.append(rng)
    return rngs, restored


def restored_episodes(spec: RunSpec, env_list: list[int]) -> list[Episodes]:
    """Each env's last ``run.return_window`` finished episodes, saved with its state so that a resumed run's
    return windows start full (from the checkpoint's, on resume)."""
    resume, window = spec.resume, spec.config.run.return_window
    saved = read_env_episodes(Path(resume.env_states)) if resume and resume.env_states else {}
    return [deque(saved.get(env, ()), maxlen=window) for env in env_list]


def env_state(
    env: EnvAdapter,
    rng: np.random.Generator,
    episode_return: float,
    episode_length: int,
    obs: np.ndarray,
    hidden: np.ndarray | None,
    next_reset_seed: int,
    warn_as: str | None,
) -> dict:
    """One parked env's saved state (``obs``, ``hidden``: its current row's; ``next_reset_seed``: drawn an episode
    ahead, ``fastrl.sampling.reset_ahead``); ``warn_as``: the env id to warn under where the env cannot be saved
    (None: say nothing)."""
    try:
        saved = env.get_state()
    except Exception as exc:  # e.g. an env holding a socket or a simulator handle
        saved = None
        if warn_as is not None:
            log.warning(
                "env %r cannot be saved (%s: %s); a resumed run restarts it with a seeded reset",
                warn_as,
                type(exc).__name__,
                exc,
            )
    return {
        "env": saved,
        "rng": rng.bit_generator.state,
        "episode_return": float(episode_return),
        "episode_length": int(episode_length),
        "next_reset_seed": int(next_reset_seed),
        "obs": obs.copy(),
        **({"hidden": hidden.copy()} if hidden is not None else {}),
    }
