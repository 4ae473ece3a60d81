"""The main process: allocate, start workers, watch them, end the run cleanly whatever happens.

It is the only process that creates or unlinks the run's shared memory. Every way a run can
end goes through the same teardown (``_teardown``): stop flag, give the learner the time to
write its checkpoint of the last good state, join the workers (then terminate, then kill),
write a checkpoint from the last published weights if the learner could not, unlink.

What ends a run early, each detected here: a worker's exception (errors queue), a dead worker
(its process sentinel, within ``WATCH_INTERVAL_S``), a stuck worker (the watchdog), Ctrl-C or
SIGTERM (signals.py: the first stops at the next barrier with an exact checkpoint, the second
at once). The main process never blocks on a queue (drain.py).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import time
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import TYPE_CHECKING

from fastrl.buffers import RunBuffers
from fastrl.buffers.arena import SHM_DIR, shm_free_bytes
from fastrl.buffers.control import Flag
from fastrl.config import resolved_bool
from fastrl.modes import mode_of
from fastrl.process.component import roles
from fastrl.process.drain import QueueDrain
from fastrl.process.faults import (
    Fault,
    Outcome,
    RunFailed,
    RunInterrupted,
    describe_exception,
    exception_details,
    failure_message,
    interrupt_message,
)
from fastrl.process.fork_server import worker_context
from fastrl.process.last_checkpoint import ensure_checkpoint
from fastrl.process.lifeline import stop_processes
from fastrl.process.machine_limits import death_note
from fastrl.process.run_plan import RunPlan
from fastrl.process.signals import SignalGuard
from fastrl.process.watchdog import stale_worker, stall_fault
from fastrl.ranks.rank_link import RankFailed
from fastrl.runs.checkpoint import read_env_episodes
from fastrl.runs.run_dir import RunDir
from fastrl.sampling.channels import Channels
from fastrl.spec import RunSpec, WorkerIds
from fastrl.telemetry.metrics import Telemetry

if TYPE_CHECKING:
    from fastrl.ranks.launch import RunPart

log = logging.getLogger(__name__)
JOIN_TIMEOUT_S = 3.0
KILL_WAIT_S = 1.0
WATCH_INTERVAL_S = 0.1
LAST_REPORT_WAIT_S = 0.5  # a dying worker's own report explains its death better than its exit code
PIDS_FILE = "pids.json"
TORCHRUN_STOP = (
    "(torchrun stops every rank when one ends or fails; its report names the rank that ended first. "
    "Every rank resumes together: torchrun ... -m fastrl train --resume RUN_DIR)"
)


class _Faulted(Exception):
    def __init__(self, fault: Fault):
        super().__init__(fault.what)
        self.fault = fault


def finish_due(telemetry: Telemetry) -> bool:
    """The stop test of every run, in processes or serial: the target return is reached or
    ``run.max_seconds`` is up, so the learners finish at their next barrier (the frame budget is
    their own test). The target's crossing gets a metrics line of its own: the episodes that end before that
    barrier still count in the mean, which may fall back under the target by the run's last line."""
    if telemetry.target_reached():
        telemetry.log_crossing()
        return True
    return telemetry.time_is_up()


class Supervisor:
    def __init__(self, plan: RunPlan, run_dir: RunDir, part: RunPart):
        """``part``: this process's part of the run, as its launch settled it (``fastrl.ranks.launch``): the
        checkpoint it resumes, its log file and, when torchrun launched the run, its line to the other ranks'
        main processes (``link``)."""
        self.config, self.run_dir, self.plan, self.part = plan.config, run_dir, plan, part
        self.resume, self.link, self.log_file = part.resume_point, part.link, part.log_file
        self.ids = WorkerIds.of(self.config)
        self.processes: dict[str, BaseProcess] = {}  # spawned: the spawn context's Process class
        self.signals = SignalGuard()

    def run(self) -> dict:
        with self.signals:  # installed before the segment exists: no signal can leave it behind
            fault, outcome, summary = self._run_and_tear_down()
        return self._conclude(fault, outcome, summary)

    def _run_and_tear_down(self) -> tuple[Fault | None, Outcome, dict]:
        buffers = RunBuffers.create(self.plan.buffers)
        try:
            engine = self.config.engine
            channels = Channels.create(self.ids.actors, self.ids.executors, engine.learners)
            threaded = not self.config.engine.serial
            self.errors = QueueDrain(channels.errors, "errors", threaded)
            self.episodes = QueueDrain(channels.episodes, "episodes", threaded)
            take, remote = self.episodes.take, None
            if self.link is not None:  # rank 0's metrics are the run's: every rank's episodes and frames
                take, remote = self.link.episodes(take), self._remote_frames if self.link.ranks.leader else None
            telemetry = Telemetry(self.config, self.run_dir, buffers.control, self.ids, take, remote)
            if self.resume is not None and self.resume.env_states:
                telemetry.resume_windows(read_env_episodes(Path(self.resume.env_states)))
        except BaseException:
            buffers.close()
            buffers.arena.unlink()
            raise
        spec = RunSpec(
            self.config,
            self.plan.buffers,
            buffers.spec,
            self.plan.env_info,
            str(self.run_dir.path),
            self.resume,
            self.link.ranks if self.link else None,
            self.log_file,
        )
        fault = None
        try:
            self._run(spec, channels, buffers, telemetry)
        except _Faulted as exc:
            fault = exc.fault
        except Exception as exc:  # serial mode: the components' own exceptions land here
            fault = Fault(describe_exception(exc, self.config.reliability.queue_timeout_s), exception_details(exc))
        except KeyboardInterrupt:  # a forced stop in serial mode
            self.signals.forced = True
        finally:
            outcome, summary = self._teardown(spec, channels, buffers, telemetry, fault)
        return fault, outcome, summary

    def _run(self, spec: RunSpec, channels: Channels, buffers: RunBuffers, telemetry: Telemetry) -> None:
        if self.config.engine.serial:
            from fastrl.process.serial import run_serial

            self.signals.raise_on_force = True
            try:  # a stop request (Ctrl-C) finishes at the next barrier too, with an exact checkpoint
                run_serial(
                    spec,
                    channels,
                    buffers,
                    telemetry,
                    finish_requested=lambda: self.signals.received is not None or finish_due(telemetry),
                )
            finally:
                self.signals.raise_on_force = False
        elif not self.signals.received:  # a stop asked while the run was set up: nothing to start
            self._start_workers(spec, channels)
            telemetry.watch_processes(self._worker_pids())
            self._watch(buffers, telemetry)
        telemetry.mark_finished()

    def _conclude(self, fault: Fault | None, outcome: Outcome, summary: dict) -> dict:
        interrupted = interrupt_message(self.signals.received, outcome.exact, outcome) if self.signals.received else ""
        if interrupted and self.link is not None:  # torchrun stops every rank when one ends: which one?
            interrupted += " " + (self.link.explain() or TORCHRUN_STOP)
        if fault is None and not interrupted and outcome.unwritten:  # trained to the end, but not all of it kept
            fault = Fault("the run completed, but its last files could not all be written")
        if fault is not None:
            message = failure_message(fault, outcome)
            log.info("the run failed: %s", message)  # for a rank's log file (the command prints it too)
            raise RunFailed(message, outcome.checkpoint, outcome.run_dir)
        if interrupted:
            assert self.signals.received is not None  # there is a message only for a received signal
            log.info("%s", interrupted)
            raise RunInterrupted(interrupted, self.signals.received, outcome.checkpoint, outcome.run_dir)
        return summary

    # ------------------------------------------------------------------ workers

    def _start_workers(self, spec: RunSpec, channels: Channels) -> None:
        from fastrl.process.worker import worker_main

        context, environ = worker_context(self.config.engine.start_method), dict(os.environ)
        for role, index in roles(self.config.engine):
            p = context.Process(
                target=worker_main, args=(role, index, spec, channels, environ), name=f"{role}-{index}", daemon=True
            )
            p.start()
            self.processes[p.name] = p

    def _worker_pids(self) -> dict[str, int]:
        """The workers' pids, by name (once started, each has one)."""
        pids = {}
        for name, p in self.processes.items():
            assert p.pid is not None, f"{name} was never started"
            pids[name] = p.pid
        return pids

    def _process_of(self, worker: int) -> BaseProcess:
        name = self.ids.name(worker)
        if name.startswith("actor") and resolved_bool(self.config.engine.inline_actors, "engine.inline_actors"):
            name = name.replace("actor", "executor")
        return self.processes[name]

    def _watch(self, buffers: RunBuffers, telemetry: Telemetry) -> None:
        control, reliability = buffers.control, self.config.reliability
        sentinels = {p.sentinel: p for p in self.processes.values()}
        deadline = time.monotonic() + reliability.startup_timeout_s
        ready, stop_by = False, None
        while not control.complete:
            self._raise_reported_error()
            dead = wait(list(sentinels), timeout=WATCH_INTERVAL_S)
            if dead:
                self._raise_reported_error(wait_s=LAST_REPORT_WAIT_S)  # it failed (a full disk, say): a fault
                if self.signals.received:  # the stop signal reached the workers too (sent to one, torchrun's)
                    return
                sentinel = dead[0]
                assert isinstance(sentinel, int)  # wait() returns some of the objects it was given: sentinels
                raise _Faulted(_death(sentinels[sentinel]))
            if not ready and control.ready.all():
                ready = True
                telemetry.mark_ready()
                self._write_pids()
            if not ready and time.monotonic() > deadline:
                missing = [self.ids.name(i) for i in range(self.ids.total) if not control.ready[i]]
                raise _Faulted(Fault(f"workers did not start within reliability.startup_timeout_s: {missing}"))
            if ready:
                stuck = stale_worker(control, reliability.watchdog_s, self.ids.executors)
                if stuck is not None:
                    process = self._process_of(stuck)
                    raise _Faulted(
                        stall_fault(
                            control,
                            self.ids,
                            stuck,
                            process.name,
                            process.pid,
                            self.config.env.id,
                            str(self.run_dir.path),
                        )
                    )
            if ready:  # training time counts from ready: no metrics line is dated in start-up
                telemetry.tick()
            self._tick_ranks(telemetry)
            if ready and (
                finish_due(telemetry) if self.link is None or self.link.ranks.leader else telemetry.time_is_up()
            ):
                control.set(Flag.FINISH)  # under torchrun, rank 0 (which sees every rank's episodes) judges the target
            if self.signals.received and stop_by is None:
                control.set(Flag.SIGNALLED)  # the learner saves its current state first (a SIGKILL may follow),
                control.set(Flag.FINISH)  # then finishes at the next barrier, with an exact checkpoint
                stop_by = time.monotonic() + reliability.shutdown_timeout_s
            if self.signals.forced or (stop_by is not None and time.monotonic() > stop_by):
                return  # no barrier in time: the teardown saves the learner's current state instead

    def _remote_frames(self, local: float) -> float:
        """The other ranks' frames: as many as this rank's where their learners step together, else (a mode of
        independent learners) what they reported last."""
        assert self.link is not None  # handed to the telemetry only under torchrun (run(): None without a link)
        if mode_of(self.config).independent:
            return self.link.remote_frames()
        return local * (self.link.ranks.ranks - 1)

    def _tick_ranks(self, telemetry: Telemetry) -> None:
        if self.link is None:
            return
        try:
            self.link.tick(telemetry.local_frames)
        except RankFailed as exc:
            raise _Faulted(Fault(f"rank {self.link.ranks.rank} stopped because {exc}")) from None

    def _raise_reported_error(self, wait_s: float = 0.0) -> None:
        if wait_s:
            self.errors.wait_for_item(wait_s)
        for name, summary, trace in self.errors.take():
            cause = self.link.explain() if self.link is not None else ""  # a collective that failed: which rank?
            raise _Faulted(Fault(f"{name} failed: {summary}" + (f" ({cause})" if cause else ""), trace, worker=name))

    def _write_pids(self) -> None:
        """For people and tests: which process is which (``kill -9`` one to see a fault handled)."""
        pids = {"main": os.getpid(), "workers": {name: p.pid for name, p in self.processes.items()}}
        (self.run_dir.path / PIDS_FILE).write_text(json.dumps(pids, indent=2) + "\n")

    # ------------------------------------------------------------------ the one way a run ends

    def _teardown(self, spec, channels, buffers, telemetry, fault: Fault | None) -> tuple[Outcome, dict]:
        control = buffers.control
        if self.link is not None:  # first: the other ranks end too, naming this one, or know its silence is no fault
            how = "failed" if fault else "stopped" if self.signals.received else "done"
            self.link.report(fault.what if fault else how, how)
        try:
            control.set(Flag.STOP)
            if fault is not None and fault.stalled and fault.worker in self.processes:
                self.processes[fault.worker].kill()  # stuck inside a call: it cannot answer a stop flag
            if self.processes:
                self._await_learner_checkpoint(control)
            self._stop_workers()
            outcome = ensure_checkpoint(spec, buffers, self.run_dir, allowed=not self.signals.forced)
            if self.link is not None:  # every rank resumes the run together, each from its own directory
                outcome = dataclasses.replace(
                    outcome,
                    run_dir=str(self.part.root),
                    resume_command="torchrun <the same options> -m fastrl train --resume {run_dir}",
                )
            status = "failed" if fault else "interrupted" if self.signals.received else "complete"
            unwritten = [outcome.unwritten] if outcome.unwritten else []
            _written(lambda: telemetry.tick(force=True), "the last metrics line", unwritten)
            summary = telemetry.summary(status)
            summary["run_dir"] = str(outcome.run_dir)
            if self.link is not None:
                summary["ranks"] = self.link.ranks.ranks
            _written(telemetry.close, "metrics.jsonl and the sinks", unwritten)
            _written(lambda: self.run_dir.write_summary(summary), "summary.json", unwritten)
            outcome = dataclasses.replace(outcome, unwritten="; ".join(unwritten))
        finally:
            self.errors.ask_to_stop()  # both readers leave at their next timeout, together
            self.episodes.ask_to_stop()
            self.errors.stop()
            self.episodes.stop()
            channels.close()
            buffers.close()
            buffers.arena.unlink()
            (self.run_dir.path / PIDS_FILE).unlink(missing_ok=True)
        return outcome, summary

    def _await_learner_checkpoint(self, control) -> None:
        learners = [p for name, p in self.processes.items() if name.startswith("learner")]
        deadline = time.monotonic() + self.config.reliability.shutdown_timeout_s
        while not control.saved and time.monotonic() < deadline and not self.signals.forced:
            if not any(p.is_alive() for p in learners):
                return
            time.sleep(0.02)

    def _stop_workers(self) -> None:
        processes = list(self.processes.values())
        deadline = time.monotonic() + (0.0 if self.signals.forced else JOIN_TIMEOUT_S)
        while time.monotonic() < deadline and not self.signals.forced:
            alive = [p.sentinel for p in processes if p.is_alive()]
            if not alive:
                break
            wait(alive, timeout=0.05)  # wakes as the last one exits (a second Ctrl-C within 0.05 s)
        stop_processes(processes, KILL_WAIT_S)


def _written(write, what: str, unwritten: list[str]) -> None:
    """One of the teardown's writes: a full disk (any OSError) goes into the closing message, not a traceback,
    and the teardown goes on (the shared memory is freed whatever happens)."""
    try:
        write()
    except OSError as exc:
        log.warning("could not write %s: %s", what, exc)
        unwritten.append(f"{what} ({exc})")


def _death(p: BaseProcess) -> Fault:
    p.join(0.1)
    code = p.exitcode
    how = f"was killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exited with code {code}"
    if code == -signal.SIGBUS:  # how Linux ends a process touching shared memory that cannot be backed
        how += (
            f" (shared memory ran out: {SHM_DIR} has {shm_free_bytes() / 2**20:.0f} MiB free now; fastrl cleanup frees "
            "what killed runs left there)"
        )
    if code == -signal.SIGKILL:  # reported nothing: the OOM killer's signature, under a cgroup limit
        how += death_note()
    return Fault(
        f"{p.name} (pid {p.pid}) {how} without reporting an error; the queues it used may be wedged, "
        "so the run was ended rather than waiting on them",
        worker=p.name,
    )
