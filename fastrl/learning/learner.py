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

``gala``: each learner owns a contiguous share of the envs and its own storage rows; after
its local step it gossips (``fastrl.learning.gossip``: the ring's mix before publishing, or
allreduce's gradient average before the step). Its checkpoints go to
``checkpoints/learner-<i>/`` at once (never exact: the learners are at different rollouts).
"""

from __future__ import annotations

import copy
import logging
import time
from contextlib import contextmanager
from queue import Empty
from typing import TYPE_CHECKING

import numpy as np
import torch

from fastrl.algos import make_rule
from fastrl.algos.optimizers import make_optimizer
from fastrl.algos.registry import load_algorithm, metric_keys
from fastrl.algos.update_rule import Update
from fastrl.buffers import RunBuffers
from fastrl.buffers.control import Clock, Done, Flag, Stat
from fastrl.buffers.device_storage import Uploads
from fastrl.config import resolved_int
from fastrl.devices import configure_cuda, process_device
from fastrl.errors import DiskFullError, NonFiniteError
from fastrl.learning import agent_steps_per_update, frames_per_update, schedules
from fastrl.learning.checked_step import CheckedStep
from fastrl.learning.gossip import Gossip, PeerFinished
from fastrl.learning.named_policies import NamedPolicies, policy_map
from fastrl.learning.reward_normalization import reward_scaler
from fastrl.learning.selfplay import SelfPlayPool
from fastrl.models.compiling import compile_mode_for, compile_policy
from fastrl.models.distributions import distribution_for
from fastrl.models.policy import build_policy
from fastrl.partition import owner_of
from fastrl.ranks.cohort import join_cohort, leave_group
from fastrl.runs.checkpoint import CheckpointStore, build_checkpoint, load_checkpoint
from fastrl.sampling.channels import Channels, decode_rollout_done, encode_go
from fastrl.seeding import model_seed
from fastrl.spec import RunSpec, WorkerIds

if TYPE_CHECKING:
    from fastrl.modes.base import Schedule

log = logging.getLogger(__name__)

__all__ = ["Learner", "NonFiniteError"]

# the losses every rule reports, and PPO's diagnostics: their stats columns (an algorithm's own: metric_keys)
LOSS_COLUMNS = {
    "policy_loss": Stat.POLICY_LOSS,
    "value_loss": Stat.VALUE_LOSS,
    "entropy": Stat.ENTROPY,
    "clip_fraction": Stat.CLIP_FRACTION,
    "approx_kl": Stat.APPROX_KL,
}


class Learner:
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
        self.stats[Stat.CLIP] = self.algo.clip
        executors = resolved_int(engine.executors, "engine.executors")
        worker = WorkerIds(executors, resolved_int(engine.actors, "engine.actors"), engine.learners).learner(index)
        self.timing = buffers.control.timing[worker]
        self.owned = spec.learner_envs(index)  # every env, or this gala learner's share
        owners = owner_of(spec.envs, executors, spec.env_unit)
        self.executors = sorted({int(owners[e]) for e in self.owned})  # whose envs this learner starts
        self.rollout = 0  # the rollout the envs are filling
        self.version = 0  # of self.model; rollout j acts with version j
        self.released = -1  # the newest rollout whose "go" was sent
        self.arrived = [0, 0]  # envs done, by rollout parity (with run-ahead, j+1's may come before j's)
        self.steps_per_update = agent_steps_per_update(spec, index)
        self.frames_per_update = frames_per_update(spec, index)
        self.share = spec.learners * spec.rank_count  # gala, ranks: the frames are split in equal shares
        self.total_frames = config.run.total_frames
        self.frame_budget = self.total_frames // self.share
        directory = f"{spec.checkpoint_dir}/learner-{index}" if spec.gala else spec.checkpoint_dir
        self.store = CheckpointStore(directory, config.run.keep_checkpoints)
        self.pending_checkpoint: tuple[int, dict] | None = None  # waiting for the executors' env states
        self.last_checkpoint = (time.monotonic(), 0)  # (time, frames)
        self.finished = False
        self.saved_first = False  # the current state, written as soon as a signal asked for the stop
        self.finishing = self.time_due = False  # agreed at the last barrier, by every rank (see _agree)
        self.cohort = join_cohort(spec, self.device)  # the other ranks' learners (torchrun), or Solo
        self.rewards = reward_scaler(self.algo, len(self.owned), self.cohort)  # algo.normalize_rewards, or None
        self.rule, self.optimizer, self.step = self._trainer(self.model, self.stats)
        self.metric_columns = metric_keys(load_algorithm(self.algo.name))  # its own metrics' stats columns
        self.uploads = Uploads(self.device)  # each update's storage reaches the device once
        self.gossip = Gossip(spec, buffers, index, self.model, worker) if spec.gala else None
        pool = config.selfplay.opponents == "pool"
        self.selfplay = SelfPlayPool(spec, buffers, self.stats) if pool else None  # the opponents' snapshots
        named = policy_map(config, spec.env_info.agent_names)  # multiagent.policies: the other policies' learners
        self.policies = (
            None
            if named is None
            else NamedPolicies(
                config, spec.envs, named, buffers, self.model, self._other_policy, resuming=spec.resume is not None
            )
        )
        self.rule.warm_up(self.uploads.of(self._zero_storage(self._rows_learned(self.policies))))
        if spec.resume is not None:
            self._restore(load_checkpoint(spec.resume.checkpoint))
        # room for the state a full disk would leave unsaved; x3: the optimizer's moments come with the first step
        self.store.reserve_for(self._checkpoint("stop"), grow=3.0)
        # θ published before the worker reports ready, not in start(): a learner killed the moment it is ready
        # (kill -9 as soon as pids.json appears) must leave weights the main process can save as its checkpoint
        self.publish()

    def _trainer(self, model: torch.nn.Module, stats: np.ndarray):
        """``model``'s update rule, optimizer and checked step, their stats into ``stats``."""
        config = self.spec.config
        step: CheckedStep  # made once the optimizer exists; the rule calls it through the lambda below
        rule = make_rule(
            self.algo,
            self.mode.policy_lag,
            model,
            self.algo,
            self.device,
            lambda *args: step(*args),  # the checked step, made once the optimizer exists
            config.run.seed,
            self.cohort,
            distribution=distribution_for(self.spec.env_info.action),
        )
        rule.clock = schedules.FrameClock.of(self.spec, self.index)  # a rule's own schedules move as the learner's do
        optimizer = make_optimizer(rule.trained, self.algo)  # θ, or the net the rule trains for it
        checks = config.reliability.finite_checks
        step = CheckedStep(
            optimizer,
            self.algo.max_grad_norm,
            stats,
            self._reduce_gradients,
            lambda: self._schedule_lr(optimizer, stats),
            deferred=checks == "update" or (checks == "auto" and self.device.type == "cuda"),
        )
        rule.deferred_checks = step.deferred
        for net in rule.differentiated():
            self.cohort.watch(net)
        return rule, optimizer, step

    def _other_policy(self, stats: np.ndarray, rows: int):
        """A learning policy of ``multiagent.policies`` other than the run's, learning from ``rows`` rows: its
        model, built and compiled as θ (its initial parameters the next draws of the learner's torch stream), its
        rule, optimizer and step."""
        config = self.spec.config
        model = compile_policy(
            build_policy(self.spec.env_info, config).to(self.device), compile_mode_for(config, self.device, "learner")
        )
        rule, optimizer, step = self._trainer(model, stats)
        rule.warm_up(self.uploads.of(self._zero_storage(rows)))
        return model, rule, optimizer, step

    def _rows_learned(self, policies: NamedPolicies | None) -> int:
        """The rows of an update's storage θ's rule learns from: the learner's envs, or the run's policy's rows."""
        return len(self.owned) if policies is None else len(policies.run_rows)

    def _zero_storage(self, rows: int) -> dict[str, np.ndarray]:
        """Zeros shaped as the storage an update learns from (the slots themselves may be filling already), so
        the warm-up sees the update's shapes: a compiled model (``model.compile``) compiles its graphs then."""
        count = self.mode.slots_per_update(rows, self.algo.batch_slots)
        return {
            name: np.zeros((count, *field.shape[1:]), field.dtype)
            for name, field in self.buffers.slots.storage(0, 1).items()
        }

    def _restore(self, checkpoint: dict) -> None:
        state = checkpoint["resume"]
        self.model.load_state_dict(state["model"])
        if state.get("optimizer") is not None:
            self.optimizer.load_state_dict(state["optimizer"])
        else:
            log.warning(
                "the checkpoint has no optimizer state (saved from the shared weights): the optimizer starts fresh"
            )
        self.rule.load(state)
        if self.rewards is not None:
            self.rewards.load(state.get("reward_scaling"))
        if self.selfplay is not None:
            self.selfplay.load(state["selfplay"])
        if self.policies is not None:
            self.policies.load(state["policies"])
        self.version = state["version"]
        self.stats[Stat.UPDATES] = state["updates"]
        self.move_to(state["rollout"])
        self.last_checkpoint = (time.monotonic(), int(self.stats[Stat.FRAMES]))
        if "rng" in checkpoint:
            torch.set_rng_state(checkpoint["rng"]["torch"])

    @property
    def barrier_schedule(self) -> Schedule:
        """The barrier mode's schedule (a queued mode's ``AsyncLearner`` has none, and never asks)."""
        schedule = self.mode.schedule
        assert schedule is not None, f"mode {self.mode.name!r} has no barrier schedule"
        return schedule

    # ------------------------------------------------------------------ loop

    def start(self) -> None:
        """Release every env into the first rollout (0, or where a resumed run goes on); θ is published already."""
        if self.gossip is not None:
            engine = self.spec.config.engine
            ids = WorkerIds(
                resolved_int(engine.executors, "engine.executors"),
                resolved_int(engine.actors, "engine.actors"),
                self.spec.learners,
            )
            learners = [ids.learner(i) for i in range(self.spec.learners)]
            self.gossip.wait_for_peers(lambda: bool(self.control.ready[learners].all()))
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
        except PeerFinished:  # an allreduce peer ended the run before this update: end here too, without it
            last, save, resume_state = True, True, None
        if save:
            self._begin_checkpoint("final" if last else "barrier", resume_state)

    # ------------------------------------------------------------------ the steps a schedule orders

    def learn(self, storage: dict[str, np.ndarray], rollout: int, env_ids: np.ndarray | None = None) -> None:
        """The rule takes what D(θ_rollout) gives and keeps it pending; its loss terms go to the stats row.
        ``env_ids``: the env of each slot (async batches; default: the learner's envs in order)."""
        if self.selfplay is not None:  # the games that ended, rated from the raw rewards
            self.selfplay.observe(storage, rollout)
        if self.rewards is not None:  # a scaled copy: the slots keep the raw rewards
            storage = self.rewards.scaled(storage, env_ids)
        self._schedule_loss_weights()
        if self.policies is not None:  # multiagent.policies: the others on their rows, θ on its own
            self.policies.learn(storage, rollout, self.uploads, self.rule.entropy_coef, self.rule.clip)
            storage = self.policies.run_policy_rows(storage)
        with self.step.update(self.rule.trained, rollout):  # checked as it goes, or at its end (on a GPU)
            losses = self.rule.learn(self.uploads.of(storage), rollout)
        for key, value in losses.items():
            self.stats[self._column(key)] = value
        if self.rewards is not None:
            self.rewards.commit()

    def _column(self, key: str) -> int:
        """The stats column of a loss term or of a metric the algorithm registered, by its name."""
        try:
            return LOSS_COLUMNS[key] if key in LOSS_COLUMNS else self.metric_columns[key]
        except KeyError:
            raise RuntimeError(
                f"algorithm {self.algo.name!r}'s rule reported the metric {key!r}, which its registration does not "
                f"name (metrics = {tuple(self.metric_columns)})"
            ) from None

    def advance(self) -> None:
        """θ moves on by the rule's pending update, or stays (nothing pending); the version counts up."""
        update = self.rule.advance()
        if update is None:
            self.version += 1
        else:
            self.apply(update)
        if self.policies is not None:  # multiagent.policies: the others move on with θ
            self.policies.advance()

    def apply(self, update: Update) -> None:
        """One counted update: ``update``'s gradients stepped into θ, or its trained parameters loaded."""
        self._check_lag(update.lag)
        norm = self.step(self.model, update.grads) if update.grads is not None else update.norm
        if update.params is not None:
            self.model.load_state_dict(update.params)
        self.stats[Stat.LAG_MEAN] = self.stats[Stat.LAG_MAX] = update.lag or 0
        self.stats[Stat.GRAD_NORM] = float(norm)  # read off the device once per update
        self.stats[Stat.RANKS_S] = self.cohort.seconds
        self.stats[Stat.UPDATES] += 1
        self.version += 1

    def move_to(self, rollout: int) -> None:
        self.rollout = rollout
        self.stats[Stat.FRAMES] = rollout * self.frames_per_update
        self.stats[Stat.AGENT_STEPS] = rollout * self.steps_per_update

    def publish(self) -> None:
        """θ into the weight slot of the rollout that acts with it (version v is rollout v's); with a self-play
        pool, that rollout's opponents drawn first."""
        if self.selfplay is not None:
            self.selfplay.prepare(self.version, self.model)
        if self.policies is not None:
            self.policies.publish(self.version)
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

    def publish_next(self, j: int, last: bool, save: bool) -> None:
        """After barrier j's update: publish the new θ and, unless a checkpoint holds them, release the envs."""
        if self.gossip is not None:
            self.gossip.mix(self.model, self.version)
        if not last:
            self.publish()
            if not save:
                self.release(self.barrier_schedule.release_target(self, j))
        if self.gossip is not None:
            self.gossip.measure(self.model, final=last)

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

    def _reduce_gradients(self, grads: list[torch.Tensor]) -> None:
        """Before each optimizer step: gala's allreduce mixing, and every rank's mean gradient (torchrun)."""
        if self.gossip is not None:
            self.gossip.reduce_gradients(grads, self.version + 1)
        self.cohort.reduce_gradients(grads)  # every rank steps the same mean gradient (torchrun)

    def _schedule_lr(self, optimizer: torch.optim.Optimizer, stats: np.ndarray) -> float:
        """``algo.lr_schedule``, by frames learned so far (never time): the learning rate of the next step."""
        lr = schedules.learning_rate(self.algo, float(self.stats[Stat.FRAMES]), self.total_frames, self.share)
        for group in optimizer.param_groups:
            group["lr"] = lr
        stats[Stat.LR] = lr
        return lr

    def _schedule_loss_weights(self) -> None:
        """``algo.entropy_schedule`` and ``algo.clip_schedule``, by frames learned so far: the bonus and the
        clip range of the rule's next loss."""
        frames = float(self.stats[Stat.FRAMES])
        self.rule.entropy_coef = schedules.entropy_coef(self.algo, frames, self.total_frames, self.share)
        self.rule.clip = schedules.clip_range(self.algo, frames, self.total_frames, self.share)
        self.stats[Stat.ENTROPY_COEF] = self.rule.entropy_coef
        self.stats[Stat.CLIP] = self.rule.clip

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

    # ------------------------------------------------------------------ checkpoints

    def _agree(self) -> None:
        """Whether to finish (Ctrl-C, the target, the time limit) and whether a checkpoint is due by the
        clock: read once per barrier and agreed by every rank (any rank's wish), so every rank parks,
        saves and finishes at the same barrier. With one rank: what this one sees."""
        at, _ = self.last_checkpoint
        due = time.monotonic() - at >= self.spec.config.run.checkpoint_interval_s
        self.finishing, self.time_due = self.cohort.agree(self.control.is_set(Flag.FINISH), due)

    def _checkpoint_due(self, frames: int) -> bool:
        interval = self.spec.config.run.checkpoint_interval_frames
        return bool(interval and frames - self.last_checkpoint[1] >= interval) or self.time_due

    def state(self, copied: bool = False) -> dict:
        """What a run goes on from: θ, optimizer, the rule's pending work (hts) and the counters."""
        state = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            **self.rule.state(),
            "version": self.version,
            "rollout": self.rollout,
            "updates": int(self.stats[Stat.UPDATES]),
            "frames": int(self.stats[Stat.FRAMES]),
        }
        if self.rewards is not None:
            state["reward_scaling"] = self.rewards.state()
        if self.selfplay is not None:
            state["selfplay"] = self.selfplay.state()
        if self.policies is not None:
            state["policies"] = self.policies.state()
        return copy.deepcopy(state) if copied else state

    def _checkpoint(self, kind: str, resume_state: dict | None = None, exact: bool = False) -> dict:
        """``exact``: the executors save their env states beside it, in the folder it names."""
        state = self.state()
        return build_checkpoint(
            kind,
            state,
            self.spec.config.to_dict(),
            resume_state or _resumable(state),
            rng={"torch": torch.get_rng_state()},
            exact=exact,
            env_states=self.store.env_dir(self.rollout).name if exact else None,
        )

    def _begin_checkpoint(self, kind: str, resume_state: dict | None) -> None:
        """The envs are parked at this barrier: ask the executors for their env states, write when all are in."""
        exact = not self.spec.gala  # gala's learners are at different rollouts: no env-state barrier
        self.pending_checkpoint = (self.rollout, self._checkpoint(kind, resume_state, exact))
        self.last_checkpoint = (time.monotonic(), self.pending_checkpoint[1]["frames"])  # run-ahead plans on it now
        self.time_due = False
        if not exact:  # write now
            self._complete_checkpoint(0)
            return
        self.control.request_env_saves(self.rollout)

    def _complete_checkpoint(self, timeout: float) -> bool:
        assert self.pending_checkpoint is not None, "a checkpoint completes only once begun"
        rollout, checkpoint = self.pending_checkpoint
        executors = resolved_int(self.spec.config.engine.executors, "engine.executors")
        if not self.spec.gala and not self.control.env_saved(range(executors), rollout):
            if timeout > 0:
                time.sleep(min(timeout, 0.002))  # the executors answer within one poll
            return False
        self.store.save(checkpoint, rollout)
        self.pending_checkpoint = None
        if checkpoint["kind"] == "final":
            self._finish()
            self.control.mark_learner(self.index, Done.COMPLETE)
        elif self.store.used_reserve:  # the disk is full: the run stops here, this state saved
            raise DiskFullError(
                f"the disk holding {self.store.directory} is full: checkpoint {self.store.path(rollout).name} went "
                "into the space fastrl reserved for it, and the run stopped there; free space, then resume"
            )
        else:
            self.release(self.barrier_schedule.release_target(self, rollout - 1))
        return True

    def _save_first(self) -> None:
        """A signal asked for the stop: write the current state now, as a scheduler's SIGKILL may come before the
        barrier (its grace is 10-30 s); the exact checkpoint at the barrier then replaces it as ``latest.pt``."""
        self.saved_first = True
        if self.rollout not in self.store.rollouts():
            self.store.save(self._checkpoint("stop"), self.rollout)
            log.info("stop asked by a signal: the current state (rollout %d) is saved", self.rollout)

    def shutdown(self) -> None:
        """The run is stopping (or this process failed): save the last good state unless already saved."""
        if self.finished:
            return
        if self.pending_checkpoint is not None:  # the executors never finished saving: not exact
            rollout, checkpoint = self.pending_checkpoint
            checkpoint.update(kind="stop", exact=False, env_states=None)
        else:
            rollout, checkpoint = self.rollout, self._checkpoint("stop")
        if rollout in self.store.rollouts():  # a barrier checkpoint of this very state, and an exact one
            self.store.point_latest_at(rollout)
        else:
            self.store.save(checkpoint, rollout)
        self._finish()

    def _finish(self) -> None:
        self.finished = True
        if self.gossip is not None:
            self.gossip.finish()
        self.control.mark_learner(self.index, Done.SAVED)

    def close(self) -> None:
        leave_group()


def _resumable(state: dict) -> dict:
    """Between run-ahead barriers θ is a version ahead of the rollout in flight and already holds
    every gradient taken: a resumed run acts with it from that rollout (nothing pending)."""
    return {**state, "version": state["rollout"]} if state["version"] > state["rollout"] else state
