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
import traceback
from dataclasses import dataclass
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from pathlib import Path

from fastrl.buffers import BufferPlan, RunBuffers
from fastrl.buffers.arena import SHM_DIR, ShmSpaceError, check_space, shm_free_bytes
from fastrl.buffers.control import Flag
from fastrl.buffers.slots import SlotShape
from fastrl.config import Config, ConfigError, resolved_bool, resolved_int
from fastrl.envs import EnvInfo, probe_env
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
from fastrl.process.signals import SignalGuard
from fastrl.process.watchdog import stale_worker, stall_fault
from fastrl.ranks.launch import RankFailed, RankLink, run_root
from fastrl.runs.checkpoint import read_env_episodes
from fastrl.runs.run_dir import RunDir
from fastrl.sampling.channels import Channels
from fastrl.spec import ResumePoint, RunSpec, WorkerIds
from fastrl.telemetry.metrics import Telemetry
from fastrl.telemetry.sinks import check_sinks

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


@dataclass(frozen=True)
class RunPlan:
    buffers: BufferPlan
    env_info: EnvInfo
    config: Config  # "auto" layout keys resolved: what the run uses and its config.toml records


def check_env_backend(config) -> None:
    """A backend that steps env groups together (``EnvBackend.make_group``) keeps their envs in lockstep: only the
    barrier modes, where every env steps the same rollout, take it (unless each group is one env's agents, which
    fill their slots together in any mode); and a failed group step cannot reset one env."""
    from fastrl.envs.registry import backend_for

    backend = backend_for(config.env)
    if backend.make_group is None:
        return
    if config.engine.mode not in ("sync", "hts") and not backend.group_is_one_env:
        raise ConfigError(
            f"env.backend = {backend.name!r} steps each env group together, which needs every env on the same "
            f"rollout: engine.mode = 'sync' or 'hts' (got {config.engine.mode!r})"
        )
    if config.env.on_error != "raise":
        raise ConfigError(
            f"env.backend = {backend.name!r} cannot reset one env of a failed group: set env.on_error = 'raise'"
        )


def check_scripted(config, info) -> None:
    """``selfplay.scripted`` builds for the env's rows (each actor builds its own once the run starts)."""
    from fastrl.models.scripted import build_scripted

    if config.selfplay.scripted_share > 0:
        try:
            build_scripted(config.selfplay.scripted, info)
        except ValueError as exc:
            raise ConfigError(f"selfplay.scripted = {config.selfplay.scripted!r}: {exc}") from None


MULTI_AGENT_ALGOS = ("ppo", "a2c", "impala")  # the losses that weigh each row by how its agent took part (live)


def check_agents(config, info) -> None:
    """A multi-agent env's k rows stay together: ``engine.envs`` and every rank's and executor's share hold whole
    envs; only the losses that read the rows' ``live`` field learn from them (a waiting agent's row must not)."""
    agents, engine = info.agents, config.engine
    if agents == 1:
        if config.selfplay.opponents == "pool":
            raise ConfigError(
                f"selfplay.opponents = 'pool' needs a multi-agent env (PettingZoo); env {config.env.id!r} has one agent"
            )
        return
    games = engine.envs // agents
    if engine.envs % agents:  # under torchrun: each rank's share
        raise ConfigError(
            f"engine.envs = {engine.envs} counts agent rows: env {config.env.id!r} has {agents} agents, so it must be "
            f"a multiple of {agents} (under torchrun, each rank's share)"
        )
    if config.selfplay.opponents == "pool" and (engine.mode not in ("sync", "hts") or engine.learners > 1):
        raise ConfigError(
            f"selfplay.opponents = 'pool' draws each env's opponent for a rollout at a barrier, as the rollout's "
            f"weights are published: engine.mode = 'sync' or 'hts' with one learner (got engine.mode = "
            f"{engine.mode!r}, engine.learners = {engine.learners})"
        )
    if config.algo.name not in (*MULTI_AGENT_ALGOS, "none"):  # "none": sampling only (fastrl bench two-player)
        raise ConfigError(
            f"algo.name = {config.algo.name!r} does not learn from multi-agent envs (env {config.env.id!r}, {agents} "
            f"agents): {' or '.join(map(repr, MULTI_AGENT_ALGOS))}, whose losses skip waiting and absent agents"
        )
    if engine.mode == "gala" and (engine.envs // engine.learners) % agents:
        raise ConfigError(
            f"engine.envs = {engine.envs} over engine.learners = {engine.learners}: each gala learner's envs must hold "
            f"whole envs of {agents} agents (env {config.env.id!r}), so engine.envs / engine.learners must be a "
            f"multiple of {agents}"
        )
    executors = engine.executors
    if isinstance(executors, int) and executors > games:
        raise ConfigError(
            f"engine.executors = {executors} is more than the {games} envs of {agents} agents in engine.envs = "
            f"{engine.envs}: an env's agents are stepped by one executor"
        )


def plan_run(config: Config, resuming: bool = False) -> RunPlan:
    """Validate the env and the model, choose the "auto" process layout and compiling, size every buffer,
    before anything is started.

    Problems with the user's env or model are ``ConfigError``s: bad input, not a crash.
    """
    import torch

    from fastrl.algos.registry import load_algorithm
    from fastrl.buffers.params import count_parameters
    from fastrl.config import validate
    from fastrl.devices import resolve_devices
    from fastrl.learning.named_policies import check_policies, policy_map
    from fastrl.learning.selfplay import pool_slots
    from fastrl.models.compiling import resolve_compile
    from fastrl.models.policy import build_policy
    from fastrl.process.auto_layout import resolve_layout

    config = resolve_devices(config)  # "auto" devices placed, a GPU asked for where there is none refused
    load_algorithm(config.algo.name)  # a plug-in's module imported and its registration checked ...
    validate(config)  # ... and the config checked against it, as a built-in's is when the config is read
    try:
        info = probe_env(config.env)
        policy = build_policy(info, config)
        n_params = count_parameters(policy)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    except Exception as exc:  # the user's env or model code failed at start
        raise ConfigError(
            f"env {config.env.id!r} / model {config.model.name!r} failed at start: "
            f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
        ) from None
    check_env_backend(config)
    image_model = hasattr(policy, "set_precision")  # a built-in CNN: threads and compiling pay for it
    # any convolution makes the learner's step worth splitting over threads (Connect Four's board model: 1.26x the
    # rows on two cores with 2 threads), though only the built-in CNNs are measured compiled
    convolves = image_model or any(isinstance(m, torch.nn.Conv2d) for m in policy.modules())
    # once, here: every process gets the same numbers
    config = resolve_layout(config, image_model=image_model, agents=info.agents, split_learner=convolves)
    config = resolve_compile(config, torch.device(config.engine.device), image_model)  # and the same graphs
    check_agents(config, info)
    check_scripted(config, info)
    # multiagent.policies, in the env's agent order; a resumed run's frozen policies are in its checkpoint
    config = check_policies(config, info.agent_names, policy, resuming)
    engine = config.engine
    check_sinks(config)  # a missing tensorboardX or wandb is bad input, not a crash once training runs
    mode = mode_of(config)
    slots = mode.slot_count(engine.envs, config.algo.batch_slots)
    action = info.action
    assert action is not None  # EnvInfo.__post_init__ fills it in (Discrete) where the env gave none
    shape = SlotShape(
        slots,
        engine.rollout,
        info.obs_shape,
        info.obs_dtype,
        action.slot_shape,
        action.slot_dtype,
        hidden_size=2 * config.model.lstm,
        live=info.agents > 1,
    )
    ids = _worker_ids(config)
    named = policy_map(config, info.agent_names)  # the other named policies' parameters share the pool segment
    pool = (
        pool_slots(config.selfplay, mode.run_ahead)
        if config.selfplay.opponents == "pool"
        else named.slots
        if named
        else 0
    )
    plan = BufferPlan(
        shape,
        n_params,
        engine.learners,
        ids.total,
        mode.weight_slots,
        engine.mode == "gala",
        pool,
        engine.envs // info.agents if config.selfplay.opponents == "pool" else 0,
    )
    try:
        check_space(plan.layout().nbytes)
    except ShmSpaceError as exc:
        raise ConfigError(str(exc)) from None
    return RunPlan(plan, info, config)


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
    def __init__(
        self,
        config: Config,
        run_dir: RunDir,
        plan: RunPlan,
        resume: ResumePoint | None = None,
        link: RankLink | None = None,
        log_file: str | None = None,
    ):
        """``link``: this rank's line to the others' main processes when torchrun launched the run."""
        self.config, self.run_dir, self.plan, self.resume = config, run_dir, plan, resume
        self.link, self.log_file = link, log_file
        self.ids = _worker_ids(config)
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
                stuck = stale_worker(control, reliability.watchdog_s)
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
        """The other ranks' frames: as many as this rank's where their learners step together (every mode
        but gala), else what they reported last."""
        assert self.link is not None  # handed to the telemetry only under torchrun (run(): None without a link)
        if self.config.engine.mode == "gala":
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
                    run_dir=str(run_root(self.run_dir.path, self.link.rank)),
                    resume_command="torchrun <the same options> -m fastrl train --resume {run_dir}",
                )
            status = "failed" if fault else "interrupted" if self.signals.received else "complete"
            unwritten = [outcome.unwritten] if outcome.unwritten else []
            _written(lambda: telemetry.tick(force=True), "the last metrics line", unwritten)
            summary = telemetry.summary(status)
            if self.link is not None:
                summary["ranks"] = self.link.ranks.ranks
            _written(telemetry.close, "metrics.jsonl and the sinks", unwritten)
            _written(lambda: self.run_dir.write_summary(summary), "summary.json", unwritten)
            outcome = dataclasses.replace(outcome, unwritten="; ".join(unwritten))
        finally:
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
        while any(p.is_alive() for p in processes) and time.monotonic() < deadline and not self.signals.forced:
            time.sleep(0.02)
        stop_processes(processes, KILL_WAIT_S)


def _written(write, what: str, unwritten: list[str]) -> None:
    """One of the teardown's writes: a full disk (any OSError) goes into the closing message, not a traceback,
    and the teardown goes on (the shared memory is freed whatever happens)."""
    try:
        write()
    except OSError as exc:
        log.warning("could not write %s: %s", what, exc)
        unwritten.append(f"{what} ({exc})")


def _worker_ids(config: Config) -> WorkerIds:
    """The run's worker numbering; ``config``'s layout keys are resolved (``plan_run``)."""
    engine = config.engine
    return WorkerIds(
        resolved_int(engine.executors, "engine.executors"),
        resolved_int(engine.actors, "engine.actors"),
        engine.learners,
    )


def _death(p: BaseProcess) -> Fault:
    p.join(0.1)
    code = p.exitcode
    how = f"was killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exited with code {code}"
    if code == -signal.SIGBUS:  # how Linux ends a process touching shared memory that cannot be backed
        how += (
            f" (shared memory ran out: {SHM_DIR} has {shm_free_bytes() / 2**20:.0f} MiB free now; fastrl cleanup frees "
            "what killed runs left there)"
        )
    return Fault(
        f"{p.name} (pid {p.pid}) {how} without reporting an error; the queues it used may be wedged, "
        "so the run was ended rather than waiting on them",
        worker=p.name,
    )
