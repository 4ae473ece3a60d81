"""The main process: allocate, start workers, watch them, end the run cleanly whatever happens.

It is the only process that creates or unlinks the run's shared memory. Every way a run can
end — budget spent, target reached, a worker's exception, a dead worker, Ctrl-C — goes
through the same teardown: stop flag, join (then terminate, then kill), unlink.
"""
from __future__ import annotations

import logging
import multiprocessing as mp
import os
import time
from dataclasses import dataclass
from multiprocessing.connection import wait
from queue import Empty

from fastrl.buffers import BufferPlan, RunBuffers
from fastrl.buffers.arena import ShmSpaceError, check_space
from fastrl.buffers.control import Flag
from fastrl.buffers.slots import SlotShape
from fastrl.config import Config, ConfigError
from fastrl.envs import EnvInfo, probe_env
from fastrl.modes import get_mode
from fastrl.run_dir import RunDir
from fastrl.runtime.channels import Channels
from fastrl.runtime.spec import RunSpec, WorkerIds
from fastrl.telemetry.metrics import Telemetry

log = logging.getLogger(__name__)
JOIN_TIMEOUT_S = 5.0
WATCH_INTERVAL_S = 0.1


class RunFailed(RuntimeError):
    """A run that ended on a fault; the message is the paragraph the user sees."""


@dataclass
class Interrupted(Exception):
    signal_name: str = "SIGINT"


@dataclass(frozen=True)
class RunPlan:
    buffers: BufferPlan
    env_info: EnvInfo


def plan_run(config: Config) -> RunPlan:
    """Validate the env and the model and size every buffer, before anything is started.

    Problems with the user's env or model are ``ConfigError``s: bad input, not a crash.
    """
    from fastrl.buffers.params import count_parameters
    from fastrl.runtime.actor import build_policy

    engine = config.engine
    try:
        info = probe_env(config.env)
        probe = RunSpec(config, None, None, info, "")  # type: ignore[arg-type]
        n_params = count_parameters(build_policy(probe))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    shape = SlotShape(engine.envs * get_mode(engine.mode).storages, engine.rollout, info.obs_shape, info.obs_dtype)
    ids = WorkerIds(engine.executors, engine.actors, engine.learners)
    plan = BufferPlan(shape, n_params, engine.learners, ids.total)
    try:
        check_space(plan.layout().nbytes)
    except ShmSpaceError as exc:
        raise ConfigError(str(exc)) from None
    return RunPlan(plan, info)


class Supervisor:
    def __init__(self, config: Config, run_dir: RunDir, plan: RunPlan):
        self.config, self.run_dir, self.plan = config, run_dir, plan
        engine = config.engine
        self.ids = WorkerIds(engine.executors, engine.actors, engine.learners)
        self.processes: list[mp.Process] = []

    def run(self) -> dict:
        plan, info = self.plan.buffers, self.plan.env_info
        buffers = RunBuffers.create(plan)
        channels = Channels.create(self.config.engine.actors, self.config.engine.executors)
        spec = RunSpec(self.config, plan, buffers.spec, info, str(self.run_dir.path))
        telemetry = Telemetry(self.config, self.run_dir, buffers.control, self.ids, channels.episodes)
        status = "failed"
        try:
            if self.config.engine.serial:
                from fastrl.runtime.serial import run_serial

                run_serial(spec, channels, buffers, telemetry)
            else:
                self._start_workers(spec, channels)
                self._watch(buffers, channels, telemetry)
            telemetry.mark_finished()
            status = "complete"
        except (KeyboardInterrupt, Interrupted):
            status = "interrupted"
            raise
        finally:
            buffers.control.set(Flag.STOP)
            self._stop_workers()
            telemetry.tick(force=True)
            summary = telemetry.summary(status)
            telemetry.close()
            self.run_dir.write_summary(summary)
            channels.close()
            buffers.close()
            buffers.arena.unlink()
        return summary

    # ------------------------------------------------------------------ workers

    def _start_workers(self, spec: RunSpec, channels: Channels) -> None:
        from fastrl.runtime.worker import worker_main

        ctx = mp.get_context("spawn")
        engine = self.config.engine
        roles = [("executor", i) for i in range(engine.executors)]
        if not engine.inline_actors:
            roles += [("actor", i) for i in range(engine.actors)]
        roles += [("learner", i) for i in range(engine.learners)]
        for role, index in roles:
            p = ctx.Process(
                target=worker_main, args=(role, index, spec, channels, os.getpid()), name=f"fastrl-{role}-{index}", daemon=True
            )
            p.start()
            self.processes.append(p)

    def _watch(self, buffers: RunBuffers, channels: Channels, telemetry: Telemetry) -> None:
        control = buffers.control
        sentinels = {p.sentinel: p for p in self.processes}
        deadline = time.monotonic() + self.config.reliability.startup_timeout_s
        ready = False
        while not control.is_set(Flag.COMPLETE):
            self._raise_reported_error(channels)
            dead = wait(list(sentinels), timeout=WATCH_INTERVAL_S)
            if dead:
                self._raise_reported_error(channels, wait_s=1.0)
                p = sentinels[dead[0]]
                raise RunFailed(f"worker {p.name} (pid {p.pid}) died with exit code {p.exitcode} and reported nothing")
            if not ready and control.ready.all():
                ready = True
                telemetry.mark_ready()
            if not ready and time.monotonic() > deadline:
                missing = [self.ids.name(i) for i in range(self.ids.total) if not control.ready[i]]
                raise RunFailed(f"workers did not start within {self.config.reliability.startup_timeout_s}s: {missing}")
            telemetry.tick()
            if ready and (telemetry.target_reached() or telemetry.time_is_up()):
                control.set(Flag.FINISH)

    @staticmethod
    def _raise_reported_error(channels: Channels, wait_s: float = 0.0) -> None:
        try:
            name, summary, trace = channels.errors.get(block=wait_s > 0, timeout=max(wait_s, 1e-3))
        except Empty:
            return
        raise RunFailed(f"{name} failed: {summary}\n{trace}")

    def _stop_workers(self) -> None:
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        for p in self.processes:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in self.processes:
            if p.is_alive():
                p.terminate()
        for p in self.processes:
            p.join(1.0)
            if p.is_alive():
                p.kill()
                p.join()
