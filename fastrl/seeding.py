"""Every random stream of a run derives from (run seed, purpose, index): nothing depends on timing."""

from __future__ import annotations

import numpy as np

ENV_STREAM = 1
MODEL_STREAM = 2
MADE_ENV_STREAM = 3


def env_rng(seed: int, env_index: int, restart: int = 0) -> np.random.Generator:
    """The env's own stream: its reset seeds and its per-step random number for the actor.

    ``restart`` > 0 gives a fresh stream for an env restarted at that rollout by a resume
    that had no saved state for it, so it does not replay the run's first episodes.
    """
    entropy = [seed, ENV_STREAM, env_index] + ([restart] if restart else [])
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))


def made_env_seed(seed: int, env_index: int, restart: int = 0) -> int:
    """The seed of an env that its backend seeds once, when it is made (envpool ignores ``reset(seed)``): from the
    env's own (run seed, index, restart), apart from its reset stream; 31 bits, as envpool's ``env_seed`` takes."""
    entropy = [seed, MADE_ENV_STREAM, env_index] + ([restart] if restart else [])
    return int(np.random.SeedSequence(entropy).generate_state(1)[0]) & 0x7FFFFFFF


def model_seed(seed: int) -> int:
    return int(np.random.SeedSequence([seed, MODEL_STREAM]).generate_state(1)[0])
