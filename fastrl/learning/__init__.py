"""Learning: the learner waits for full slots, runs its mode's schedule (``fastrl.modes``) of an update
rule's steps (A2C, delayed A2C, PPO, IMPALA), publishes θ and releases the envs; gala learners also
gossip with each other. Imports nothing heavy."""

from __future__ import annotations


def build_learner(spec, channels, buffers, index: int = 0):
    """The learner a run's mode needs: the async one where slots circulate through queues (looked up
    at call time, so tests can substitute a recording one)."""
    from fastrl.learning import async_learner, learner

    cls = async_learner.AsyncLearner if spec.mode.queued else learner.Learner
    return cls(spec, channels, buffers, index)
