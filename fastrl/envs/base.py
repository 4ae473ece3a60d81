"""What an executor needs from an environment: step and reset straight into buffer rows.

An adapter writes each observation into an array the executor hands it (a row of the
shared trajectory buffer), so observations are never copied between processes or pickled.
``make_env`` returns one (``GymEnv`` for gymnasium envs, ``AtariEnv`` for ALE ids, or a user's own:
a ``module:factory`` may return any object with these members, checked before the run starts;
docs/extending.md); the executor holds a list of them and calls nothing else.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from fastrl.envs.actions import ActionSpec
from fastrl.envs.obs_layout import ObsLayout

# How an agent's row takes part in learning (the slots' ``live`` field, written where an adapter has ``live``: a
# multi-agent env's members, fastrl.envs.pettingzoo). ACTING: its action was taken, the whole loss learns from it;
# WAITING: another agent moves (a turn-based game), its action is ignored, so only the value learns from it;
# ABSENT: the agent has left the episode (its observation is zeros), nothing learns from it; UNLEARNED: a seat
# another player than the learner plays (a row role's, fastrl.sampling.row_roles): its actor forwards the row with
# that player's parameters, and nothing learns from it.
ABSENT, WAITING, ACTING, UNLEARNED = 0, 1, 2, 3


class EnvAdapter(Protocol):
    obs_shape: tuple[int, ...]
    obs_dtype: np.dtype
    # a Dict observation's parts in its row (obs_shape/obs_dtype are the row's); None: a Box
    obs_layout: ObsLayout | None
    action_spec: ActionSpec  # the kind of action, how many u per step, the slot's action layout
    n_actions: int  # columns of the policy head (``action_spec.head_size``; the number of actions if Discrete)
    frames_per_step: int  # emulator frames per agent step, for frame counting

    def reset(self, seed: int, out: np.ndarray) -> None:
        """Start a new episode seeded with ``seed`` and write its first observation into ``out``."""

    def step(self, action, prev: np.ndarray, out: np.ndarray) -> tuple[float, float, int, bool]:
        """Apply ``action`` (an int for Discrete; the slot's flat row, int64 or float32, otherwise; the
        adapter turns it into what its env takes: offset, clipped, reshaped); ``prev`` holds the current
        observation (frame stacks shift from it), the next one is written into ``out``.

        Returns ``(reward, raw_reward, done, episode_over)``: ``reward`` is what the learner sees
        (clipped for Atari), ``raw_reward`` what the score counts; ``done`` is how the step ended
        for learning, a code of ``csrc_free_kernels.step_end``: ``CONTINUES`` (0), ``TERMINATED``
        (a terminal state, or a lost life with episodic life: the return ends) or ``TRUNCATED`` (a
        time limit: the return bootstraps from the value of ``out``, the final observation);
        ``episode_over`` means the executor must call ``reset`` (game over or truncation).
        """

    def get_state(self) -> Any:
        """A picklable snapshot from which ``set_state`` goes on exactly (the env, its RNG, its counters),
        taken at a checkpoint barrier. Raising means the env cannot be saved: a resumed run restarts it
        with a seeded reset instead."""

    def set_state(self, state: Any) -> None:
        """Go on from a ``get_state`` snapshot, taken in another process (a resumed run)."""

    # Optional: ``resets_from_seed = True`` where ``reset(seed)`` alone fixes the episode, whatever the instance did
    # before: a slow-resetting env then starts its next episode in a spare instance while its executor would wait
    # (``engine.reset_ahead``, fastrl.sampling.reset_ahead).
    # Optional: ``episode_stats()`` -> ``{name: number}``, an episode's own figures (Crafter's achievements), read
    # when an episode ends, before its reset; the metrics lines carry their means (``episode_stats``).
    # Optional, for multi-agent envs (``fastrl.envs.pettingzoo``): ``agents`` (rows per env, the members of one
    # group, which every layout keeps in one executor) and ``live`` (ACTING, WAITING or ABSENT, read after
    # every reset and step for the row just written).

    def probe(self, seed: int = 0) -> None:
        """One reset and step on a scratch buffer, in the main process before workers start: checks
        what the env returns and compiles what its steps need (``probe_env``)."""

    def close(self) -> None: ...


class EnvGroup(Protocol):
    """Envs a backend steps together (``EnvBackend.make_group``: a C++ vector env). Each member adapter has
    ``group`` (this) and ``member`` (its place in it). When every member has its action the executor calls
    ``step`` once, in member order; each member's ``step(action, prev, out)`` then writes that step's
    observation and returns its result, and its ``reset`` restarts it alone. The members advance in lockstep,
    so only the barrier modes (sync, hts) take such a backend (checked before a run starts)."""

    size: int

    def step(self, actions: list) -> None: ...
