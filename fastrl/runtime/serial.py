"""Serial mode: executors, actors and learner in this one process, through the same code.

For debugging, cProfile/py-spy and fast tests: each component's ``poll(0)`` does the work that
is ready and returns, so a round-robin loop reproduces the multi-process run exactly.
"""
from __future__ import annotations

import torch

from fastrl.buffers import RunBuffers
from fastrl.buffers.control import Flag
from fastrl.runtime.actor import Actor
from fastrl.runtime.channels import Channels
from fastrl.runtime.executor import Executor
from fastrl.runtime.learner import Learner
from fastrl.runtime.spec import RunSpec


def run_serial(spec: RunSpec, channels: Channels, buffers: RunBuffers, telemetry=None) -> None:
    engine = spec.config.engine
    torch.set_num_threads(engine.learner_threads)
    executors = [Executor(spec, channels, buffers, i) for i in range(engine.executors)]
    actors = [Actor(spec, channels, buffers, i) for i in range(engine.actors)]
    learner = Learner(spec, channels, buffers)
    control = buffers.control
    control.ready[:] = 1
    if telemetry is not None:
        telemetry.mark_ready()
    try:
        learner.start()
        while not control.is_set(Flag.COMPLETE):
            for component in (*executors, *actors):
                component.poll(0)
            learner.poll(0)
            if telemetry is not None:
                telemetry.tick()
                if telemetry.target_reached() or telemetry.time_is_up():
                    control.set(Flag.FINISH)
    finally:
        for component in (*executors, *actors, learner):
            component.close()
