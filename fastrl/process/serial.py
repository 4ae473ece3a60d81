"""Serial mode: executors, actors and learner in this one process, through the same code.

For debugging, cProfile/py-spy and fast tests: each component's ``poll(0)`` does the work that
is ready and returns, so a round-robin loop reproduces the multi-process run exactly. Faults
are the components' own exceptions; whatever ends the loop, the learner saves its last good
state before the components are closed, as it does in its own process.
"""
from __future__ import annotations

from typing import Callable

import torch

from fastrl.buffers import RunBuffers
from fastrl.buffers.control import Flag
from fastrl.sampling.actor import Actor
from fastrl.learning.async_learner import AsyncLearner
from fastrl.sampling.channels import Channels
from fastrl.sampling.executor import Executor
from fastrl.learning.learner import Learner
from fastrl.process.spec import RunSpec


def run_serial(
    spec: RunSpec,
    channels: Channels,
    buffers: RunBuffers,
    telemetry=None,
    stop_requested: Callable[[], bool] = lambda: False,
) -> None:
    """``stop_requested()`` True (Ctrl-C): finish at the next barrier, with an exact checkpoint."""
    engine = spec.config.engine
    torch.set_num_threads(engine.learner_threads)
    executors, actors, learner = [], [], None
    control = buffers.control
    try:
        executors = [Executor(spec, channels, buffers, i) for i in range(engine.executors)]
        actors = [Actor(spec, channels, buffers, i) for i in range(engine.actors)]
        learner = (AsyncLearner if spec.mode.queued else Learner)(spec, channels, buffers)
        control.ready[:] = 1
        if telemetry is not None:
            telemetry.mark_ready()
        learner.start()
        while not control.complete:
            for component in (*executors, *actors):
                component.poll(0)
            learner.poll(0)
            if stop_requested():
                control.set(Flag.FINISH)
            if telemetry is not None:
                telemetry.tick()
                if telemetry.target_reached() or telemetry.time_is_up():
                    control.set(Flag.FINISH)
    finally:
        if learner is not None:
            learner.shutdown()
        for component in (*executors, *actors, *([learner] if learner else [])):
            component.close()
