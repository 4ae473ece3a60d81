"""The body of every worker process: attach, build its component (``fastrl.process.component``),
start it, poll it until told to stop, shut it down, close it.

Faults are reported, never swallowed: an exception goes to the errors queue with its
traceback and the process exits non-zero; the main process then ends the run. A learner
saves the last good state before it exits, whatever the reason. Workers ignore SIGINT (the
main process owns Ctrl-C), beat a heartbeat the main process's watchdog reads, dump their
Python stack to ``RUN_DIR/logs/<worker>.stack`` on SIGUSR1 (the watchdog asks before it
ends a run on a stuck worker), and exit on their own if the main process dies: executors and
actors are killed with it (SIGKILL: nothing of theirs needs saving, and a worker blocked in C
would outlive a catchable signal), the learner gets SIGTERM and saves first.

SIGTERM and SIGHUP mostly come to the whole process group at once (a scheduler, torchrun, a
closed terminal). The main process got the same signal and stops the run at its next barrier,
which needs every worker, so a worker leaves at once only when the run is already being torn
down, or when the main process shows no sign of stopping within ``SIGNAL_AIMED_S`` (the signal
was sent to this worker alone, e.g. ``kill <pid>``).
"""

from __future__ import annotations

import faulthandler
import logging
import signal
import sys
import time
from pathlib import Path

from fastrl.buffers import RunBuffers
from fastrl.buffers.control import Control, Flag
from fastrl.config import resolved_bool, resolved_int
from fastrl.errors import StopRequested
from fastrl.process.component import Component, build_component, torch_threads
from fastrl.process.core_rotation import CoreRotation
from fastrl.process.faults import describe_exception, exception_details
from fastrl.process.fork_server import apply_environment, release_server
from fastrl.process.lifeline import die_with_parent, orphaned
from fastrl.process.malloc import keep_freed_memory
from fastrl.sampling.channels import Channels
from fastrl.spec import RunSpec, WorkerIds

POLL_TIMEOUT_S = 0.05
BEAT_INTERVAL_S = 0.2
# How long a SIGTERM'd worker waits for a killed main process to be gone entirely (below).
ORPHAN_WAIT_S = 0.5
# A SIGTERM or SIGHUP that the main process has not answered with a stop (it polls every 0.1 s) within
# this long was sent to this worker alone: it leaves.
SIGNAL_AIMED_S = 2.0


def stack_file(run_dir: str, name: str) -> Path:
    return Path(run_dir) / "logs" / f"{name}.stack"


class _Termination:
    """SIGTERM and SIGHUP: left to the main process when it stops the run too (a signal to the process group);
    else executors and actors leave at once, the learner finishes its step and saves first."""

    def __init__(self, role: str):
        self.requested = False
        self.immediate = role != "learner"
        self.control: Control | None = None  # once attached
        self.signalled_at: float | None = None  # a signal not yet acted on
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, self._handle)

    def _handle(self, *_) -> None:
        if self.control is not None and not self.control.is_set(Flag.STOP):
            self.signalled_at = self.signalled_at or time.monotonic()  # the main process may be stopping the run
            return
        self._leave()

    def _leave(self) -> None:
        self.requested = True
        if self.immediate:
            sys.exit(143)

    def poll(self) -> None:
        """Leave now if the signal was aimed at this worker alone: the main process is not stopping the run."""
        if self.signalled_at is None or self.control is None or self.control.is_set(Flag.FINISH):
            return
        if time.monotonic() - self.signalled_at > SIGNAL_AIMED_S:
            self._leave()


def _orphaned(signalled: bool) -> bool:
    """Whether the main process is gone. A worker SIGTERM'd by a dying main process (PDEATHSIG, through
    the fork server) can see the main process's end of the pipe still open for a moment, until its last
    thread has exited, so it waits for it."""
    deadline = time.monotonic() + (ORPHAN_WAIT_S if signalled else 0.0)
    while not orphaned():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def _beating_ids(role: str, index: int, ids: WorkerIds, inline: bool) -> list[int]:
    worker = {"executor": ids.executor, "actor": ids.actor, "learner": ids.learner}[role](index)
    return [worker, ids.actor(index)] if role == "executor" and inline else [worker]


def worker_main(role: str, index: int, spec: RunSpec, channels: Channels, environ: dict[str, str]) -> None:
    """A worker's whole life; ``environ``: the main process's environment at the run's start."""
    release_server()  # so that the fork server, and so this process's parent-death signal, ends with the main one
    die_with_parent(signal.SIGTERM if role == "learner" else signal.SIGKILL)  # the learner saves first
    apply_environment(environ)
    if spec.config.engine.keep_freed_memory:
        keep_freed_memory()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    termination = _Termination(role)
    engine = spec.config.engine
    ids = WorkerIds(
        resolved_int(engine.executors, "engine.executors"),
        resolved_int(engine.actors, "engine.actors"),
        engine.learners,
    )
    beating = _beating_ids(role, index, ids, resolved_bool(engine.inline_actors, "engine.inline_actors"))
    name = ids.name(beating[0])
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {name} %(levelname)s %(message)s")
    if spec.log_file:  # a rank of a torchrun launch: its log file gathers every process of the rank
        from fastrl.ranks.launch import log_to_file

        log_to_file(Path(spec.log_file))
    stack = stack_file(spec.run_dir, name)
    stack.parent.mkdir(parents=True, exist_ok=True)
    stack_out = open(stack, "w")
    faulthandler.register(signal.SIGUSR1, file=stack_out, all_threads=False)
    buffers = RunBuffers.attach(spec.arena, spec.plan)
    component = None
    try:
        _set_torch_threads(torch_threads(role, engine))
        component = build_component(role, index, spec, channels, buffers)
        control = termination.control = buffers.control
        for worker in beating:
            control.beat(worker)
            control.ready[worker] = 1
        component.start()
        last_beat = time.monotonic()
        rotation = CoreRotation(index, engine.core_rotation_s if role == "executor" else 0.0)
        while not control.is_set(Flag.STOP) and not termination.requested:
            component.poll(POLL_TIMEOUT_S)
            termination.poll()
            now = time.monotonic()
            rotation.tick(now)
            if now - last_beat >= BEAT_INTERVAL_S:
                for worker in beating:
                    control.heartbeat[worker] = now
                last_beat = now
                if orphaned():
                    break  # the main process is gone: nobody will read our results
    except StopRequested:  # stopped while waiting on a peer learner: an ordinary stop
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
        for signum in (signal.SIGTERM, signal.SIGHUP):  # a second PDEATHSIG must not cut the clean-up short
            signal.signal(signum, signal.SIG_IGN)
        if _orphaned(termination.requested):  # main was killed (-9): nobody else frees the memory;
            buffers.arena.unlink(orphaned=True)  # first, so a failing close below cannot skip it (the name only)
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


def _set_torch_threads(threads: int | None) -> None:
    if threads is not None:  # imported only here: a plain executor never loads torch
        import torch

        torch.set_num_threads(threads)


def _shutdown(component: Component | None) -> None:
    """A learner saves the last good state before the process exits (a no-op for the others); a failure
    to save is logged, not raised, so the process still exits with the code its run earned."""
    if component is None:  # it failed while being built: nothing to save
        return
    try:
        component.shutdown()
    except Exception:
        logging.getLogger(__name__).exception("could not save the last checkpoint")
