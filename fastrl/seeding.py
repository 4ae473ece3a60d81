"""Every random stream of a run derives from (run seed, purpose, index): nothing depends on timing."""

from __future__ import annotations

import numpy as np

ENV_STREAM = 1
MODEL_STREAM = 2


def env_rng(seed: int, env_index: int, restart: int = 0) -> np.random.Generator:
    """The env's own stream: its reset seeds and its per-step random number for the actor.

    ``restart`` > 0 gives a fresh stream for an env restarted at that rollout by a resume
    that had no saved state for it, so it does not replay the run's first episodes.
    """
    entropy = [seed, ENV_STREAM, env_index] + ([restart] if restart else [])
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))


def model_seed(seed: int) -> int:
    return int(np.random.SeedSequence([seed, MODEL_STREAM]).generate_state(1)[0])
