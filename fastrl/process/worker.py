"""The body of every worker process: attach, build the component, loop until told to stop.

Faults are reported, never swallowed: an exception goes to the errors queue with its
traceback and the process exits non-zero; the main process then ends the run. A learner
saves the last good state before it exits, whatever the reason. Workers ignore SIGINT (the
main process owns Ctrl-C), beat a heartbeat the main process's watchdog reads, dump their
Python stack to ``RUN_DIR/logs/<worker>.stack`` on SIGUSR1 (the watchdog asks before it
ends a run on a stuck worker), and exit on their own if the main process dies.
"""
from __future__ import annotations

import ctypes
import faulthandler
import logging
import os
import signal
import sys
import time
from pathlib import Path

from fastrl.buffers import RunBuffers
from fastrl.buffers.control import Flag
from fastrl.sampling.channels import Channels
from fastrl.process.core_rotation import CoreRotation
from fastrl.process.faults import StopRequested, describe_exception, exception_details
from fastrl.process.spec import RunSpec, WorkerIds

POLL_TIMEOUT_S = 0.05
BEAT_INTERVAL_S = 0.2
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Ask Linux to SIGTERM us when the main process dies (best effort elsewhere)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def stack_file(run_dir: str, name: str) -> Path:
    return Path(run_dir) / "logs" / f"{name}.stack"


class _Termination:
    """SIGTERM: executors and actors leave at once; the learner finishes its step and saves first."""

    def __init__(self, role: str):
        self.requested = False
        self.immediate = role != "learner"
        signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, *_) -> None:
        self.requested = True
        if self.immediate:
            sys.exit(143)


def build_component(role: str, index: int, spec: RunSpec, channels: Channels, buffers: RunBuffers):
    engine = spec.config.engine
    if role == "executor":
        from fastrl.sampling.executor import Executor

        executor = Executor(spec, channels, buffers, index)
        if not engine.inline_actors:
            return executor
        from fastrl.sampling.inline import InlinePair

        return InlinePair(executor, build_component("actor", index, spec, channels, buffers))
    import torch

    torch.set_num_threads(engine.actor_threads if role == "actor" else engine.learner_threads)
    if role == "actor":
        from fastrl.sampling.actor import Actor

        return Actor(spec, channels, buffers, index)
    if spec.mode.queued:
        from fastrl.learning.async_learner import AsyncLearner

        return AsyncLearner(spec, channels, buffers, index)
    from fastrl.learning.learner import Learner

    return Learner(spec, channels, buffers, index)


def _beating_ids(role: str, index: int, ids: WorkerIds, inline: bool) -> list[int]:
    worker = {"executor": ids.executor, "actor": ids.actor, "learner": ids.learner}[role](index)
    return [worker, ids.actor(index)] if role == "executor" and inline else [worker]


def worker_main(role: str, index: int, spec: RunSpec, channels: Channels, parent_pid: int) -> None:
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    termination = _Termination(role)
    engine = spec.config.engine
    ids = WorkerIds(engine.executors, engine.actors, engine.learners)
    beating = _beating_ids(role, index, ids, engine.inline_actors)
    name = ids.name(beating[0])
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {name} %(levelname)s %(message)s")
    stack = stack_file(spec.run_dir, name)
    stack.parent.mkdir(parents=True, exist_ok=True)
    stack_out = open(stack, "w")
    faulthandler.register(signal.SIGUSR1, file=stack_out, all_threads=False)
    buffers = RunBuffers.attach(spec.arena, spec.plan)
    component = None
    try:
        component = build_component(role, index, spec, channels, buffers)
        control = buffers.control
        for worker in beating:
            control.beat(worker)
            control.ready[worker] = 1
        if role == "learner":
            component.start()
        last_beat = time.monotonic()
        rotation = CoreRotation(index, engine.core_rotation_s if role == "executor" else 0.0)
        while not control.is_set(Flag.STOP) and not termination.requested:
            component.poll(POLL_TIMEOUT_S)
            now = time.monotonic()
            rotation.tick(now)
            if now - last_beat >= BEAT_INTERVAL_S:
                for worker in beating:
                    control.heartbeat[worker] = now
                last_beat = now
                if os.getppid() != parent_pid:
                    break  # the main process is gone: nobody will read our results
    except StopRequested:  # stopped while waiting on a gala peer: an ordinary stop
        _shutdown(component)
    except BaseException as exc:  # report everything, including SystemExit from SIGTERM
        if not isinstance(exc, SystemExit):
            _report(channels, name, exc, spec.config.reliability.queue_timeout_s)
            _shutdown(component)
            sys.exit(1)
        raise
    else:
        _shutdown(component)
    finally:
        if component is not None:
            component.close()
        faulthandler.unregister(signal.SIGUSR1)
        stack_out.close()
        buffers.close()


def _report(channels: Channels, name: str, exc: BaseException, queue_timeout_s: float) -> None:
    try:
        channels.errors.put((name, describe_exception(exc, queue_timeout_s), exception_details(exc)), timeout=1.0)
    except Exception:
        pass  # the errors queue itself is wedged: the main process still sees this process exit


def _shutdown(component) -> None:
    """A learner saves the last good state before the process exits (a no-op for the others)."""
    shutdown = getattr(component, "shutdown", None)
    if shutdown is not None:
        try:
            shutdown()
        except Exception:
            logging.getLogger(__name__).exception("could not save the last checkpoint")
