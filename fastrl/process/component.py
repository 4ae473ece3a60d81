"""The one interface every role implements, and the one factory that builds a run's components.

A worker process and the serial loop drive components the same way: build, ``start``, ``poll``
until the run stops, ``shutdown``, ``close``. Executors and actors (``fastrl.sampling``) hold
nothing that must outlive the run, so their ``shutdown`` does nothing; a learner's
(``fastrl.learning``) writes the checkpoint of its last good state. The protocol is structural:
the roles do not import it, so ``fastrl.sampling`` and ``fastrl.learning`` never import this module.
"""

from __future__ import annotations

from typing import Protocol

from fastrl.buffers import RunBuffers
from fastrl.config import EngineConfig, resolved_bool, resolved_int
from fastrl.sampling.channels import Channels
from fastrl.spec import RunSpec


class Component(Protocol):
    def start(self) -> None:
        """Begin: a learner releases the envs (θ it published when built, before ready); executors and actors wait
        for its messages."""

    def poll(self, timeout: float) -> bool:
        """Do the work that is ready, waiting up to ``timeout`` s for some (0: never block); True if any was done."""

    def shutdown(self) -> None:
        """The run is stopping, or this process failed: save what must outlive it."""

    def close(self) -> None:
        """Let go of what it holds (envs, views of the run's segment)."""


def roles(engine: EngineConfig) -> list[tuple[str, int]]:
    """A run's components as (role, index): executors, then actors (none of their own with inline
    actors: each runs inside its executor), then learners; the serial loop polls them in this order."""
    executors = [("executor", i) for i in range(resolved_int(engine.executors, "engine.executors"))]
    actors = (
        []
        if resolved_bool(engine.inline_actors, "engine.inline_actors")
        else [("actor", i) for i in range(resolved_int(engine.actors, "engine.actors"))]
    )
    return executors + actors + [("learner", i) for i in range(engine.learners)]


def torch_threads(role: str, engine: EngineConfig) -> int | None:
    """The intra-op threads a worker of ``role`` gives torch; None: it never runs torch (a plain executor)."""
    if role == "learner":
        return resolved_int(engine.learner_threads, "engine.learner_threads")
    if role == "actor" or resolved_bool(engine.inline_actors, "engine.inline_actors"):
        return engine.actor_threads
    return None


def build_component(role: str, index: int, spec: RunSpec, channels: Channels, buffers: RunBuffers) -> Component:
    """Every role's class is looked up when called (tests substitute recording subclasses in its module),
    and imported only here, so an executor process never imports torch's learner side."""
    if role == "learner":
        from fastrl.learning import build_learner

        return build_learner(spec, channels, buffers, index)
    if role == "actor":
        from fastrl.sampling import actor

        return actor.Actor(spec, channels, buffers, index)
    from fastrl.sampling import executor

    built = executor.Executor(spec, channels, buffers, index)
    if not resolved_bool(spec.config.engine.inline_actors, "engine.inline_actors"):
        return built
    from fastrl.sampling import actor
    from fastrl.sampling.inline import InlinePair

    return InlinePair(built, actor.Actor(spec, channels, buffers, index))  # the "actor" role's build, typed as one
