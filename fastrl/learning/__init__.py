"""Learning: the learner waits for full slots, runs its mode's schedule (``fastrl.modes``) of an update
rule's steps (A2C, delayed A2C, PPO, IMPALA), publishes θ and releases the envs; gala learners also
gossip with each other. Imports nothing heavy: the last-checkpoint path and the schedules read the update sizes
from here."""

from __future__ import annotations


def build_learner(spec, channels, buffers, index: int = 0):
    """The learner a run's mode needs: the async one where slots circulate through queues (looked up
    at call time, so tests can substitute a recording one)."""
    from fastrl.learning import async_learner, learner

    cls = async_learner.AsyncLearner if spec.mode.queued else learner.Learner
    return cls(spec, channels, buffers, index)


def agent_steps_per_update(spec, index: int) -> int:
    """Agent steps one update of learner ``index`` learns from: a rollout of each of its envs, or one async batch."""
    return spec.mode.slots_per_update(len(spec.learner_envs(index)), spec.config.algo.batch_slots) * spec.steps


def frames_per_update(spec, index: int) -> int:
    """Env frames one update learns from: version v (rollout v) has learned from v times this many."""
    return agent_steps_per_update(spec, index) * spec.env_info.frames_per_step
