"""Episodes reset ahead: an env whose reset is slow starts its next episode in a spare instance while its executor
would otherwise wait.

Crafter builds a world in each reset (~50 ms, as long as ~50 of its steps), so a rollout's time depends on how many
of its envs' episodes happened to end in it, and in the barrier modes the executor that drew fewer resets waits for
the one that drew more. With ``engine.reset_ahead`` an executor that would block (at a rollout barrier, or with
every env waiting for a free slot) instead resets a spare instance of one of its envs with that env's next reset
seed; when the env's episode ends, the spare, its first observation already written, takes the env's place and the
finished instance becomes the next spare. The reset's cost moves into time that was idle; a spare not ready when its
episode ends costs nothing (the env resets in place, as without it).

Why runs stay bit-identical with it on or off: each env's reset seeds are drawn one episode ahead on its own stream
whether or not a spare is used (``Executor._reset_seed``), and only adapters that declare ``resets_from_seed`` (the
seed alone fixes the episode, whatever the instance did before) take part. A spare that fails to reset is dropped
for that episode: the env then resets in place, where ``env.on_error`` rules as always.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from fastrl.config import resolved_int
from fastrl.envs import EnvAdapter
from fastrl.envs.registry import make_envs
from fastrl.sampling.env_faults import RESET, EnvFaults
from fastrl.seeding import made_env_seed

if TYPE_CHECKING:
    from fastrl.spec import RunSpec

# resets at least this slow (the median of an executor's first ones) are reset ahead under "auto": Crafter's take
# ~50 ms; ALE's, gymnasium's classic and MuJoCo envs' well under 5 ms, where a spare instance would only cost memory
AUTO_MIN_RESET_S = 0.005


def wanted(setting: bool | str, envs: Sequence[EnvAdapter], first_resets_s: Sequence[float], idle_cores: bool) -> bool:
    """Whether an executor resets ahead: ``engine.reset_ahead`` true, or "auto" with slow first resets where its
    waits leave its core idle; only where every adapter declares ``resets_from_seed`` (the run's check refuses true
    otherwise)."""
    if setting is False or not envs or not all(getattr(env, "resets_from_seed", False) for env in envs):
        return False
    slow = bool(first_resets_s) and statistics.median(first_resets_s) >= AUTO_MIN_RESET_S
    return setting is True or (slow and idle_cores)


def cores_idle_in_waits(spec: RunSpec) -> bool:
    """Whether an executor's waits leave a core idle: no CPU learner computes beside the executors (a run that only
    samples, a CUDA learner) or the cores outnumber the executors, the actor processes and the learners' threads.
    Measured on 2 cores, where a CPU learner's 2 threads take both while the executors wait for its update: resets
    moved there slowed the update as much as they sped the rollouts (Crafter PPO, paired: 0.98x and 0.84x)."""
    engine = spec.config.engine
    if spec.config.algo.name == "none" or engine.device == "cuda":
        return True
    actors = 0 if engine.inline_actors is True else resolved_int(engine.actors, "engine.actors")
    threads = engine.learners * resolved_int(engine.learner_threads, "engine.learner_threads")
    busy = resolved_int(engine.executors, "engine.executors") + actors + threads
    return len(os.sched_getaffinity(0)) >= busy if hasattr(os, "sched_getaffinity") else False


def spare_instance(spec: RunSpec, env_list: list[int], first_rollout: int, i: int) -> EnvAdapter:
    """A new adapter for an executor's env ``i`` (local index), made as the executor made the env."""
    global_env = spec.global_env(env_list[i])
    seed = made_env_seed(spec.config.run.seed, global_env, restart=first_rollout)
    return make_envs(spec.config.env, [global_env], 1, [seed])[0]


class SpareEpisodes:
    """One spare adapter per env, each reset (or not yet) with its env's next reset seed."""

    def __init__(self, make_spare: Callable[[int], EnvAdapter], obs_row: np.ndarray, n: int):
        self.make_spare = make_spare  # local index -> a new adapter for that env
        self.spares: list[EnvAdapter | None] = [None] * n
        self.obs = np.zeros((n, *obs_row.shape), obs_row.dtype)  # each ready spare's first observation
        self.seeds: list[int | None] = [None] * n  # the seed each spare was reset with; None: not ready
        self.refused: list[int | None] = [None] * n  # a seed whose spare reset failed: not tried again

    def next_to_build(self, next_seeds: Sequence[int], episode_lengths: Sequence[int]) -> int | None:
        """The env to reset a spare for: of those without a ready one, the longest episode (likeliest to end
        first); None when every env has one."""
        best, best_length = None, -1
        for i, seed in enumerate(next_seeds):
            if self.seeds[i] == seed or self.refused[i] == seed:
                continue
            if episode_lengths[i] > best_length:
                best, best_length = i, episode_lengths[i]
        return best

    def build_next(
        self, next_seeds: Sequence[int], episode_lengths: Sequence[int], faults: EnvFaults, env_list: list[int]
    ) -> bool:
        """Reset the spare ``next_to_build`` names, its call marked in the activity row (a hang is named as a
        reset's); False when none is due. A failure is not the run's: the env resets in place when its episode
        ends, where ``env.on_error`` rules as always."""
        i = self.next_to_build(next_seeds, episode_lengths)
        if i is None:
            return False
        faults.mark(RESET, env_list[i], episode_lengths[i], -1)
        try:
            self.build(i, next_seeds[i])
        except Exception:
            pass
        faults.idle()
        return True

    def build(self, i: int, seed: int) -> None:
        """Reset env ``i``'s spare with ``seed``; an exception propagates after marking the seed refused."""
        self.seeds[i] = None
        spare = self.spares[i]
        if spare is None:
            spare = self.spares[i] = self.make_spare(i)
        try:
            spare.reset(seed, self.obs[i])
        except BaseException:
            self.refused[i] = seed
            raise
        self.seeds[i] = seed

    def take(self, i: int, seed: int, out: np.ndarray, finished: EnvAdapter) -> EnvAdapter | None:
        """Env ``i``'s spare if it was reset with ``seed`` (its first observation copied into ``out``), the
        ``finished`` instance kept as the next spare; None where no spare is ready for this episode."""
        spare = self.spares[i]
        if spare is None or self.seeds[i] != seed:
            return None
        out[...] = self.obs[i]
        self.spares[i], self.seeds[i] = finished, None
        return spare

    def close(self) -> None:
        for spare in self.spares:
            if spare is not None:
                spare.close()
