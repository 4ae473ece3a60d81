"""Serial mode: executors, actors and learner in this one process, through the same code.

For debugging, cProfile/py-spy and fast tests: the components are the ones the worker processes
build (``fastrl.process.component``, inline actors included), and each one's ``poll(0)`` does the
work that is ready and returns, so a round-robin loop reproduces the multi-process run exactly.
Faults are the components' own exceptions; whatever ends the loop, every component is shut down
(the learner saves its last good state) and then closed, as in its own process.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from fastrl.buffers import RunBuffers
from fastrl.buffers.control import Flag
from fastrl.config import resolved_int
from fastrl.process.component import Component, build_component, roles
from fastrl.sampling.channels import Channels
from fastrl.spec import RunSpec
from fastrl.telemetry.metrics import Telemetry


def run_serial(
    spec: RunSpec, channels: Channels, buffers: RunBuffers, telemetry: Telemetry, finish_requested: Callable[[], bool]
) -> None:
    """Poll every component until the run is complete; ``finish_requested()`` (the supervisor's stop
    test, asked after each round's telemetry) True: the learner finishes at its next barrier."""
    engine = spec.config.engine
    # one process, one setting: the learner's, the busiest
    torch.set_num_threads(resolved_int(engine.learner_threads, "engine.learner_threads"))
    components: list[Component] = []
    control = buffers.control
    try:
        for role, index in roles(engine):
            components.append(build_component(role, index, spec, channels, buffers))
        control.ready[:] = 1
        telemetry.mark_ready()
        for component in components:
            component.start()
        while not control.complete:
            for component in components:
                component.poll(0)
            telemetry.tick()
            if finish_requested():
                control.set(Flag.FINISH)
    finally:
        for component in components:
            component.shutdown()
        for component in components:
            component.close()
