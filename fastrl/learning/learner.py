"""Learner: waits at the rollout barrier, updates the policy, publishes it, releases the envs.

The order of a barrier's steps is the mode's (``fastrl.modes``: sync learns and moves on at once;
hts runs the envs ahead with the delayed gradient; gala's hts overlaps learning with the next
rollout); what a barrier learns from the storage (A2C, delayed A2C, PPO, nothing) is an update
rule's (``fastrl.algos``). This module keeps what every mode and rule shares, and
is the ``BarrierSteps`` the schedules order: the barrier, the version, the checked optimizer step,
the lag assertion, the stats, publishing, checkpoints.

Between barriers the learner's state (θ, version, rollout, the rule's pending work) is always one a
run can go on from, so whatever stops the run, ``shutdown`` saves it: the last good
parameters. A non-finite loss, gradient or parameter raises ``NonFiniteError`` before the bad
update is published (parameters restored). Checkpoint barriers (periodic, and the last one)
hold the envs until the executors have saved their states: resuming there is exact.

Layers take part in the barrier through learner extensions (``fastrl.learning.extensions``), called at fixed
points of the loop; this module names none of them. The trainers' assembly and schedules are
``fastrl.learning.trainer_assembly``'s, the checkpoints ``fastrl.learning.checkpointing``'s.

``gala``: each learner owns a contiguous share of the envs and its own storage rows. Its checkpoints go to
``checkpoints/learner-<i>/`` at once (never exact: the learners are at different rollouts).
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from queue import Empty
from typing import TYPE_CHECKING

import numpy as np
import torch

from fastrl.algos.registry import is_built_in
from fastrl.algos.update_rule import Losses, Update
from fastrl.buffers import RunBuffers
from fastrl.buffers.control import Clock, Flag, Stat, write_lag
from fastrl.buffers.device_storage import Uploads
from fastrl.config import resolved_int
from fastrl.devices import configure_cuda, process_device
from fastrl.errors import NonFiniteError
from fastrl.learning.checkpointing import Checkpointing
from fastrl.learning.extensions import PeerFinished, extensions_for
from fastrl.learning.rule_contract import check_rule_contract
from fastrl.learning.trainer_assembly import TrainerAssembly
from fastrl.models.compiling import compile_mode_for, compile_policy
from fastrl.models.policy import build_policy
from fastrl.partition import owner_of
from fastrl.ranks.cohort import join_cohort, leave_group
from fastrl.runs.checkpoint import CheckpointStore, load_checkpoint
from fastrl.sampling.channels import Channels, decode_rollout_done, encode_go
from fastrl.seeding import model_seed
from fastrl.spec import RunSpec

if TYPE_CHECKING:
    from fastrl.modes.base import Schedule

log = logging.getLogger(__name__)

__all__ = ["Learner", "NonFiniteError"]

# the losses every rule reports: the core's columns (an algorithm's own metrics have theirs by name: metric_column)
LOSS_COLUMNS = {"policy_loss": Stat.POLICY_LOSS, "value_loss": Stat.VALUE_LOSS, "entropy": Stat.ENTROPY}


class Learner(TrainerAssembly, Checkpointing):
    def __init__(self, spec: RunSpec, channels: Channels, buffers: RunBuffers, index: int = 0):
        config = spec.config
        engine = config.engine
        self.spec, self.channels, self.buffers = spec, channels, buffers
        self.algo, self.mode = config.algo, spec.mode
        self.device = process_device(engine.device, spec.local_rank)
        configure_cuda(config, self.device)  # before the first CUDA call: TF32 and cuDNN as configured
        torch.manual_seed(model_seed(config.run.seed))
        # compiled before the update rule copies it (hts's trainee, A2C's behaviour): the copies compile too
        self.model = compile_policy(
            build_policy(spec.env_info, spec.config).to(self.device),
            compile_mode_for(config, self.device, "learner"),
        )
        self.index = index
        self.weights = [buffers.shared_params(index, slot=k) for k in range(self.mode.weight_slots)]
        self.rescue = buffers.rescue_params(index)  # one slot: its copy, whole while the slot is being written
        self.control = buffers.control
        self.stats = buffers.control.learner_stats[index]
        self.stats[Stat.LR] = self.algo.lr
        self.stats[Stat.ENTROPY_COEF] = self.algo.entropy_coef
        executors = resolved_int(engine.executors, "engine.executors")
        self.worker = spec.worker_ids.learner(index)
        self.timing = buffers.control.timing[self.worker]
        self.owned = spec.learner_envs(index)  # every env, or this gala learner's share
        owners = owner_of(spec.envs, executors, spec.env_unit)
        self.executors = sorted({int(owners[e]) for e in self.owned})  # whose envs this learner starts
        self.rollout = 0  # the rollout the envs are filling
        self.version = 0  # of self.model; rollout j acts with version j
        self.released = -1  # the newest rollout whose "go" was sent
        self.arrived = [0, 0]  # envs done, by rollout parity (with run-ahead, j+1's may come before j's)
        self.steps_per_update = spec.agent_steps_per_update(index)
        self.frames_per_update = spec.frames_per_update(index)
        self.share = spec.learners * spec.rank_count  # gala, ranks: the frames are split in equal shares
        self.total_frames = config.run.total_frames
        self.frame_budget = self.total_frames // self.share
        directory = f"{spec.checkpoint_dir}/learner-{index}" if spec.independent else spec.checkpoint_dir
        self.store = CheckpointStore(directory, config.run.keep_checkpoints)
        self.pending_checkpoint: tuple[int, dict] | None = None  # waiting for the executors' env states
        self.last_checkpoint = (time.monotonic(), 0)  # (time, frames)
        self.finished = False
        self.saved_first = False  # the current state, written as soon as a signal asked for the stop
        self.finishing = self.time_due = False  # agreed at the last barrier, by every rank (see _agree)
        self.cohort = join_cohort(spec, self.device)  # the other ranks' learners (torchrun), or Solo
        self.rule, self.optimizer, self.step = self._trainer(self.model, self.stats)
        self.uploads = Uploads(self.device)  # each update's storage reaches the device once
        # the layers' parts in the barrier (fastrl.learning.extensions)
        self.extensions = extensions_for(self)
        rows = len(self.owned)
        for extension in self.extensions:
            rows = extension.rows_learned(rows)
        zeros = self.uploads.of(self._zero_storage(rows))
        self.rule.warm_up(zeros)
        if not is_built_in(self.algo.name):  # its contract held before anything starts, not at its first update
            check_rule_contract(self.rule, zeros, self._column, self.algo.name)
        self._report(self.rule.scheduled_metrics())  # what its own schedules start at, shown before an update
        if spec.resume is not None:
            self._restore(load_checkpoint(spec.resume.checkpoint))
        # room for the state a full disk would leave unsaved; x3: the optimizer's moments come with the first step
        self.store.reserve_for(self._checkpoint("stop"), grow=3.0)
        # θ published before the worker reports ready, not in start(): a learner killed the moment it is ready
        # (kill -9 as soon as pids.json appears) must leave weights the main process can save as its checkpoint
        self.publish()

    @property
    def barrier_schedule(self) -> Schedule:
        """The barrier mode's schedule (a queued mode's ``AsyncLearner`` has none, and never asks)."""
        schedule = self.mode.schedule
        assert schedule is not None, f"mode {self.mode.name!r} has no barrier schedule"
        return schedule

    # ------------------------------------------------------------------ loop

    def start(self) -> None:
        """Release every env into the first rollout (0, or where a resumed run goes on); θ is published already."""
        for extension in self.extensions:
            extension.start()
        self.released = self.rollout - 1  # a resumed run's envs begin at its rollout
        self.release(self.rollout)
        with self._naming_what_is_kept():  # a resumed hts run may apply its pending gradient here
            self.barrier_schedule.start(self, self.rollout)

    def poll(self, timeout: float) -> bool:
        if self.finished:
            return False
        if self.pending_checkpoint is not None:
            return self._complete_checkpoint(timeout)
        if not self.saved_first and self.control.is_set(Flag.SIGNALLED):
            self._save_first()
        started = time.perf_counter()
        try:
            for message in self.channels.rollout_done[self.index].get_many(block=timeout > 0, timeout=timeout):
                self.arrived[decode_rollout_done(message)[1]] += 1
        except Empty:
            pass
        self.timing[Clock.WAITING] += time.perf_counter() - started
        parity = self.rollout & 1
        if self.arrived[parity] < len(self.owned):
            return False
        self.arrived[parity] -= len(self.owned)
        begun = time.perf_counter()
        with self._naming_what_is_kept():
            self._barrier()
        self.timing[Clock.LEARNING] += time.perf_counter() - begun
        return True

    def _barrier(self) -> None:
        j = self.rollout
        first = self.spec.slot_map.storage_slot(j) + self.owned.start
        storage = self.buffers.slots.storage(first, len(self.owned))
        self._check_versions(storage, j)
        frames = (j + 1) * self.frames_per_update
        self._agree()
        parked = self.released == j  # no env has begun rollout j+1: their states can be saved here
        last = parked and (frames >= self.frame_budget or self.finishing)
        save = parked and (last or self._checkpoint_due(frames))
        try:
            resume_state = self.barrier_schedule.update(self, storage, j, last, save)
        except PeerFinished:  # an extension's peer ended the run before this update: end here too, without it
            last, save, resume_state = True, True, None
        if save:
            self._begin_checkpoint("final" if last else "barrier", resume_state)

    # ------------------------------------------------------------------ the steps a schedule orders

    def learn(self, storage: dict[str, np.ndarray], rollout: int, env_ids: np.ndarray | None = None) -> None:
        """The rule takes what D(θ_rollout) gives and keeps it pending; its loss terms go to the stats row.
        ``env_ids``: the env of each slot (async batches; default: the learner's envs in order). The extensions see
        the storage first, in their order: each may read it, or hand on a copy or some of its rows."""
        self._schedule_loss_weights()
        self._report(self.rule.scheduled_metrics())
        for extension in self.extensions:
            storage = extension.before_learning(storage, rollout, env_ids)
        with self.step.update(self.rule.trained, rollout):  # checked as it goes, or at its end (on a GPU)
            losses = self.rule.learn(self.uploads.of(storage), rollout)
        self._report(losses)
        for extension in self.extensions:
            extension.learned()

    def _report(self, figures: Losses) -> None:
        """A rule's loss terms and metrics, by name, into their columns of the stats row (the metrics lines')."""
        for key, value in figures.items():
            self.stats[self._column(key)] = value

    def _column(self, key: str) -> int:
        """The stats column of a loss term or of a metric the algorithm registered, by its name."""
        columns = self.control.metric_columns  # the registration's metrics, as the run's plan placed them
        try:
            return LOSS_COLUMNS[key] if key in LOSS_COLUMNS else columns[key]
        except KeyError:
            raise RuntimeError(
                f"algorithm {self.algo.name!r}'s rule reported the metric {key!r}, which its registration does not "
                f"name (metrics = {tuple(columns)})"
            ) from None

    def advance(self) -> None:
        """θ moves on by the rule's pending update, or stays (nothing pending); the version counts up."""
        update = self.rule.advance()
        if update is None:
            self.version += 1
        else:
            self.apply(update)
        for extension in self.extensions:
            extension.advanced()

    def apply(self, update: Update) -> None:
        """One counted update: ``update``'s gradients stepped into θ, or its trained parameters loaded."""
        self._check_lag(update.lag)
        norm = self.step(self.model, update.grads) if update.grads is not None else update.norm
        if update.params is not None:
            self.model.load_state_dict(update.params)
        lag = update.lag or 0  # a barrier mode's fixed lag: its mean and its max
        write_lag(self.stats, lag, lag)
        self.stats[Stat.GRAD_NORM] = float(norm)  # read off the device once per update
        self.stats[Stat.RANKS_S] = self.cohort.seconds
        self.stats[Stat.UPDATES] += 1
        self.version += 1

    def move_to(self, rollout: int) -> None:
        self.rollout = rollout
        self.stats[Stat.FRAMES] = rollout * self.frames_per_update
        self.stats[Stat.AGENT_STEPS] = rollout * self.steps_per_update

    def publish(self) -> None:
        """θ into the weight slot of the rollout that acts with it (version v is rollout v's), after the extensions'
        ``publishing`` (a self-play pool draws that rollout's opponents)."""
        for extension in self.extensions:
            extension.publishing(self.model, self.version)
        published = self.weights[self.version % len(self.weights)]
        published.publish(self.model, self.version)
        if self.rescue is not None:  # after the slot, from it: a memcpy, no second device-to-host copy
            self.rescue.write_flat(published.flat, self.version)
        self.stats[Stat.VERSION] = self.version

    def release(self, newest: int) -> None:
        """Send "go" for every rollout up to ``newest`` not yet released."""
        timeout = self.spec.config.reliability.queue_timeout_s
        for rollout in range(self.released + 1, newest + 1):
            message = encode_go(rollout, self.index, self.spec.learners)
            for executor in self.executors:
                self.channels.inboxes[executor].put(message, timeout=timeout)
        self.released = max(self.released, newest)

    def release_after(self, j: int) -> None:
        """Barrier ``j`` is done: release the rollouts the mode's schedule lets go next."""
        self.release(self.barrier_schedule.release_target(self, j))

    def publish_next(self, j: int, last: bool, save: bool) -> None:
        """After barrier j's update: publish the new θ and, unless a checkpoint holds them, release the envs."""
        for extension in self.extensions:
            extension.updated(self.model, self.version)
        if not last:
            self.publish()
            if not save:
                self.release_after(j)
        for extension in self.extensions:
            extension.published(self.model, last)

    def parks_at(self, j: int) -> bool:
        frames = (j + 1) * self.frames_per_update
        return frames >= self.frame_budget or self.finishing or self._checkpoint_due(frames)

    # ------------------------------------------------------------------ checks and the optimizer step

    def _check_versions(self, storage: dict[str, np.ndarray], rollout: int) -> None:
        stamps = storage["version"][:, : self.spec.steps]
        if not (stamps == rollout).all():
            raise AssertionError(
                f"rollout {rollout} holds transitions of policy versions {np.unique(stamps).tolist()}; "
                f"{self.mode.name} mode must act with version {rollout} only"
            )

    def _check_lag(self, lag: int | None) -> None:
        """The update about to be counted learns from data ``lag`` versions older than θ."""
        if self.mode.policy_lag is not None and lag != self.mode.policy_lag:
            raise AssertionError(f"{self.mode.name} mode must learn with policy lag {self.mode.policy_lag}, got {lag}")

    @contextmanager
    def _naming_what_is_kept(self):
        """The rule or the step says what was not finite; the learner, which owns the version, adds what
        the checkpoint keeps instead."""
        try:
            yield
        except NonFiniteError as exc:
            kept = (
                f"the checkpoint keeps the parameters of version {self.version} "
                f"({int(self.stats[Stat.UPDATES])} updates)"
            )
            raise NonFiniteError(f"{exc}: {kept}").with_traceback(exc.__traceback__) from None

    def close(self) -> None:
        leave_group()
