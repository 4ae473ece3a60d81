"""Learner: waits at the rollout barrier, updates the policy, publishes it, releases the envs.

``sync`` (PAAC/A2C): at barrier j, the gradient of D(θ_j) at θ_j gives θ_{j+1}; envs wait.
``hts`` (HTS-RL eq. 6): at barrier j, the gradient g_{j-1} of D(θ_{j-1}) taken at θ_{j-1}
(computed while rollout j ran) is applied to θ_j: θ_{j+1} = θ_j - η g_{j-1}. The envs are
released at once and g_j is computed from the other storage while they fill the next one, so
the policy lag is exactly one and no off-policy correction is needed.

Between barriers the learner's state (θ, version, rollout, pending gradient) is always one a
run can go on from, so whatever stops the run, ``shutdown`` saves it: the last good
parameters. A non-finite loss, gradient or parameter raises ``NonFiniteError`` before the bad
update is published (parameters restored). Checkpoint barriers (periodic, and the last one)
hold the envs until the executors have saved their states: resuming there is exact.
"""
from __future__ import annotations

import copy
import logging
import math
import time
from queue import Empty

import numpy as np
import torch

from fastrl.algos.a2c import a2c_loss, make_optimizer
from fastrl.buffers import RunBuffers
from fastrl.buffers.control import Clock, Flag, Stat
from fastrl.checkpoint import CheckpointStore, load_checkpoint
from fastrl.runtime.actor import build_policy, resolve_device
from fastrl.runtime.channels import Channels, encode_go
from fastrl.runtime.faults import NonFiniteError
from fastrl.runtime.spec import RunSpec, WorkerIds
from fastrl.seeding import model_seed

log = logging.getLogger(__name__)
CHECKPOINT_FORMAT = 1

__all__ = ["Learner", "NonFiniteError"]


class Learner:
    def __init__(self, spec: RunSpec, channels: Channels, buffers: RunBuffers, index: int = 0):
        config = spec.config
        engine = config.engine
        self.spec, self.channels, self.buffers = spec, channels, buffers
        self.algo, self.mode = config.algo, spec.mode
        self.device = resolve_device(engine.device)
        torch.manual_seed(model_seed(config.run.seed))
        self.model = build_policy(spec).to(self.device)
        self.optimizer = make_optimizer(self.model, self.algo)
        # hts: the copy that holds θ_{j-1} while its gradient is taken
        self.behaviour = copy.deepcopy(self.model) if self.mode.overlap else self.model
        self.pending_grads: list[torch.Tensor] | None = None
        self.params = buffers.shared_params(index)
        self.control = buffers.control
        self.stats = buffers.control.learner_stats[index]
        self.timing = buffers.control.timing[WorkerIds(engine.executors, engine.actors, engine.learners).learner(index)]
        self.executor_workers = range(engine.executors)  # their worker ids, for the env-state saves
        self.rollout = 0  # the rollout the envs are filling
        self.version = 0  # of self.model; rollout j acts with version j
        self.arrived = 0
        self.frames_per_rollout = spec.envs * spec.steps * spec.env_info.frames_per_step
        self.store = CheckpointStore(spec.checkpoint_dir, config.run.keep_checkpoints)
        self.pending_checkpoint: tuple[int, dict] | None = None  # waiting for the executors' env states
        self.last_checkpoint = (time.monotonic(), 0)  # (time, frames)
        self.finished = False
        self._warm_up()
        if spec.resume is not None:
            self._restore(load_checkpoint(spec.resume.checkpoint))

    def _warm_up(self) -> None:
        """One loss and backward on a (still zero) slot so the first update pays no JIT/lazy-init cost."""
        loss, _ = a2c_loss(self.model, self.buffers.slots.storage(0, 1), self.algo, self.device)
        loss.backward()
        self.model.zero_grad(set_to_none=True)

    def _restore(self, checkpoint: dict) -> None:
        state = checkpoint["resume"]
        self.model.load_state_dict(state["model"])
        if state.get("optimizer") is not None:
            self.optimizer.load_state_dict(state["optimizer"])
        else:
            log.warning("the checkpoint has no optimizer state (saved from the shared weights): the optimizer starts fresh")
        grads = state.get("pending_grads")
        self.pending_grads = [g.to(self.device) for g in grads] if grads is not None else None
        self.version = state["version"]
        self.stats[Stat.UPDATES] = state["updates"]
        self._advance(state["rollout"])
        self.last_checkpoint = (time.monotonic(), int(self.stats[Stat.FRAMES]))
        if "rng" in checkpoint:
            torch.set_rng_state(checkpoint["rng"]["torch"])

    # ------------------------------------------------------------------ loop

    def start(self) -> None:
        """Publish θ and release every env into the first rollout (0, or where a resumed run goes on)."""
        self._publish(go=True)

    def poll(self, timeout: float) -> bool:
        if self.finished:
            return False
        if self.pending_checkpoint is not None:
            return self._complete_checkpoint(timeout)
        started = time.perf_counter()
        try:
            self.arrived += len(self.channels.rollout_done.get_many(block=timeout > 0, timeout=timeout))
        except Empty:
            pass
        self.timing[Clock.WAITING] += time.perf_counter() - started
        if self.arrived < self.spec.envs:
            return False
        self.arrived -= self.spec.envs
        begun = time.perf_counter()
        self._barrier()
        self.timing[Clock.LEARNING] += time.perf_counter() - begun
        return True

    def _barrier(self) -> None:
        j = self.rollout
        storage = self.buffers.slots.storage(self.mode.first_slot(j, self.spec.envs), self.spec.envs)
        self._check_versions(storage, j)
        frames = (j + 1) * self.frames_per_rollout
        last = frames >= self.spec.config.run.total_frames or self.control.is_set(Flag.FINISH)
        save = last or self._checkpoint_due(frames)
        resume_state = None
        if self.algo.name == "none":  # collect only: same barriers and versions, no update
            self.version += 1
            self._advance(j + 1)
            if not last:
                self._publish(go=not save)
        elif self.mode.overlap:
            self.behaviour.load_state_dict(self.model.state_dict())  # θ_j, before it moves on
            grads, self.pending_grads = self.pending_grads, None  # consumed even if it fails
            if grads is not None:
                self._apply(grads, data_version=j - 1)
            else:
                self.version += 1  # θ_1 = θ_0: there is no D(θ_{-1}) to learn from
            self._advance(j + 1)
            if not last:
                self._publish(go=not save)
            self.pending_grads = self._gradients(self.behaviour, storage, j)
            if last:  # use the final rollout too; a resumed run goes on from before this step
                resume_state = self._state(copied=True)
                grads, self.pending_grads = self.pending_grads, None
                self._apply(grads, data_version=j)
        else:
            self._apply(self._gradients(self.model, storage, j), data_version=j)
            self._advance(j + 1)
            if not last:
                self._publish(go=not save)
        if save:
            self._begin_checkpoint("final" if last else "barrier", resume_state)

    def _advance(self, rollout: int) -> None:
        self.rollout = rollout
        self.stats[Stat.FRAMES] = rollout * self.frames_per_rollout
        self.stats[Stat.AGENT_STEPS] = rollout * self.spec.envs * self.spec.steps

    # ------------------------------------------------------------------ learning

    def _check_versions(self, storage: dict[str, np.ndarray], rollout: int) -> None:
        stamps = storage["version"][:, : self.spec.steps]
        if not (stamps == rollout).all():
            raise AssertionError(
                f"rollout {rollout} holds transitions of policy versions {np.unique(stamps).tolist()}; "
                f"{self.mode.name} mode must act with version {rollout} only"
            )

    def _gradients(self, net: torch.nn.Module, storage, rollout: int) -> list[torch.Tensor]:
        net.zero_grad(set_to_none=True)
        loss, stats = a2c_loss(net, storage, self.algo, self.device)
        terms = (stats.policy_loss, stats.value_loss, stats.entropy)
        if not all(map(math.isfinite, terms)):
            raise NonFiniteError(
                f"non-finite loss (policy {terms[0]}, value {terms[1]}, entropy {terms[2]}) on the data of rollout "
                f"{rollout}; no update was made from it: {self._kept()}"
            )
        loss.backward()
        self.stats[Stat.POLICY_LOSS] = stats.policy_loss
        self.stats[Stat.VALUE_LOSS] = stats.value_loss
        self.stats[Stat.ENTROPY] = stats.entropy
        return [p.grad if p.grad is not None else torch.zeros_like(p) for p in net.parameters()]

    def _apply(self, grads: list[torch.Tensor], data_version: int) -> None:
        """One optimizer step with ``grads`` (taken on data of ``data_version``) on θ of ``self.version``."""
        lag = self.version - data_version
        if lag != self.mode.policy_lag:
            raise AssertionError(f"{self.mode.name} mode must learn with policy lag {self.mode.policy_lag}, got {lag}")
        params = list(self.model.parameters())
        for p, g in zip(params, grads):
            p.grad = g
        if self.algo.max_grad_norm > 0:
            norm = float(torch.nn.utils.clip_grad_norm_(params, self.algo.max_grad_norm))
        else:
            norm = float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads])))
        if not math.isfinite(norm):
            raise NonFiniteError(f"non-finite gradient norm ({norm}); the update was not applied: {self._kept()}")
        backup = [p.detach().clone() for p in params]
        try:
            self.optimizer.step()
            finite = all(bool(torch.isfinite(p).all()) for p in params)
        except BaseException:
            _restore(params, backup)  # never leave a half-applied step behind
            raise
        if not finite:
            _restore(params, backup)
            raise NonFiniteError(
                f"non-finite parameters after an optimizer step (lr {self.algo.lr:g}); they were restored and "
                f"never published: {self._kept()}"
            )
        self.stats[Stat.LAG_MEAN] = self.stats[Stat.LAG_MAX] = lag
        self.stats[Stat.GRAD_NORM] = norm
        self.stats[Stat.UPDATES] += 1
        self.version += 1

    def _kept(self) -> str:
        return f"the checkpoint keeps the parameters of version {self.version} ({int(self.stats[Stat.UPDATES])} updates)"

    def _publish(self, go: bool) -> None:
        self.params.publish(self.model, self.version)
        self.stats[Stat.VERSION] = self.version
        if go:
            self._go(self.rollout)

    def _go(self, rollout: int) -> None:
        timeout = self.spec.config.reliability.queue_timeout_s
        for inbox in self.channels.inboxes:
            inbox.put(encode_go(rollout), timeout=timeout)

    # ------------------------------------------------------------------ checkpoints

    def _checkpoint_due(self, frames: int) -> bool:
        run = self.spec.config.run
        at, at_frames = self.last_checkpoint
        if run.checkpoint_interval_frames and frames - at_frames >= run.checkpoint_interval_frames:
            return True
        return time.monotonic() - at >= run.checkpoint_interval_s

    def _state(self, copied: bool = False) -> dict:
        """What a run goes on from: θ, optimizer, the pending hts gradient and the counters."""
        state = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "pending_grads": [g.detach().cpu() for g in self.pending_grads] if self.pending_grads is not None else None,
            "version": self.version,
            "rollout": self.rollout,
            "updates": int(self.stats[Stat.UPDATES]),
            "frames": int(self.stats[Stat.FRAMES]),
        }
        return copy.deepcopy(state) if copied else state

    def _checkpoint(self, kind: str, resume_state: dict | None = None) -> dict:
        state = self._state()
        return {
            "format": CHECKPOINT_FORMAT,
            "kind": kind,
            **{k: state[k] for k in ("model", "optimizer", "version", "rollout", "updates", "frames")},
            "config": self.spec.config.to_dict(),
            "rng": {"torch": torch.get_rng_state()},
            "exact": kind in ("barrier", "final"),
            "env_states": self.store.env_dir(self.rollout).name if kind in ("barrier", "final") else None,
            "resume": resume_state or state,
        }

    def _begin_checkpoint(self, kind: str, resume_state: dict | None) -> None:
        """The envs are parked at this barrier: ask the executors for their env states, write when all are in."""
        self.pending_checkpoint = (self.rollout, self._checkpoint(kind, resume_state))
        self.control.request_env_saves(self.rollout)

    def _complete_checkpoint(self, timeout: float) -> bool:
        rollout, checkpoint = self.pending_checkpoint
        if not self.control.env_saved(self.executor_workers, rollout):
            if timeout > 0:
                time.sleep(min(timeout, 0.002))  # the executors answer within one poll
            return False
        self.store.save(checkpoint, rollout)
        self.pending_checkpoint = None
        self.last_checkpoint = (time.monotonic(), checkpoint["frames"])
        if checkpoint["kind"] == "final":
            self.finished = True
            self.control.set(Flag.SAVED)
            self.control.set(Flag.COMPLETE)
        else:
            self._go(rollout)
        return True

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
        self.finished = True
        self.control.set(Flag.SAVED)

    def close(self) -> None:
        pass


@torch.no_grad()
def _restore(params: list[torch.Tensor], backup: list[torch.Tensor]) -> None:
    for p, b in zip(params, backup):
        p.copy_(b)
