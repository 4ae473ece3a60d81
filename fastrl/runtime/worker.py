"""The body of every worker process: attach, build the component, loop until told to stop.

Faults are reported, never swallowed: an exception goes to the errors queue with its
traceback and the process exits non-zero; the main process then ends the run. Workers ignore
SIGINT (the main process owns Ctrl-C) and exit on their own if the main process dies.
"""
from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import traceback

from fastrl.buffers import RunBuffers
from fastrl.buffers.control import Flag
from fastrl.runtime.channels import Channels
from fastrl.runtime.spec import RunSpec, WorkerIds

POLL_TIMEOUT_S = 0.05
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Ask Linux to SIGTERM us when the main process dies (best effort elsewhere)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


class InlinePair:
    """An executor and the actor serving its envs in one process: no cross-process round trip per step."""

    def __init__(self, executor, actor):
        self.executor, self.actor = executor, actor

    def poll(self, timeout: float) -> bool:
        did = self.executor.poll(0)
        did = self.actor.poll(0) or did
        return did or self.executor.poll(timeout)  # idle: block until the learner's next "go"

    def close(self) -> None:
        self.executor.close()
        self.actor.close()


def build_component(role: str, index: int, spec: RunSpec, channels: Channels, buffers: RunBuffers):
    engine = spec.config.engine
    if role == "executor":
        from fastrl.runtime.executor import Executor

        executor = Executor(spec, channels, buffers, index)
        if not engine.inline_actors:
            return executor
        return InlinePair(executor, build_component("actor", index, spec, channels, buffers))
    import torch

    torch.set_num_threads(engine.actor_threads if role == "actor" else engine.learner_threads)
    if role == "actor":
        from fastrl.runtime.actor import Actor

        return Actor(spec, channels, buffers, index)
    from fastrl.runtime.learner import Learner

    return Learner(spec, channels, buffers, index)


def worker_main(role: str, index: int, spec: RunSpec, channels: Channels, parent_pid: int) -> None:
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    engine = spec.config.engine
    ids = WorkerIds(engine.executors, engine.actors, engine.learners)
    worker = {"executor": ids.executor, "actor": ids.actor, "learner": ids.learner}[role](index)
    name = ids.name(worker)
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {name} %(levelname)s %(message)s")
    buffers = RunBuffers.attach(spec.arena, spec.plan)
    component = None
    try:
        component = build_component(role, index, spec, channels, buffers)
        control = buffers.control
        control.beat(worker)
        control.ready[worker] = 1
        if role == "executor" and engine.inline_actors:
            control.ready[ids.actor(index)] = 1
        if role == "learner":
            component.start()
        beats = 0
        while not control.is_set(Flag.STOP):
            component.poll(POLL_TIMEOUT_S)
            beats += 1
            if beats % 64 == 0 or role == "learner":
                control.beat(worker)
                if os.getppid() != parent_pid:
                    return  # the main process is gone: nobody will read our results
    except BaseException as exc:  # report everything, including SystemExit from SIGTERM
        if not isinstance(exc, SystemExit):
            summary = f"{type(exc).__name__}: {exc}"
            try:
                channels.errors.put((name, summary, traceback.format_exc()), timeout=1.0)
            except Exception:
                pass
            sys.exit(1)
        raise
    finally:
        if component is not None:
            component.close()
        buffers.close()
