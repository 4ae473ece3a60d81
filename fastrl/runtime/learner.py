"""Learner: waits at the rollout barrier, updates the policy, publishes it, releases the envs.

``sync`` (PAAC/A2C): at barrier j, the gradient of D(θ_j) at θ_j gives θ_{j+1}; envs wait.
``hts`` (HTS-RL eq. 6): at barrier j, the gradient g_{j-1} of D(θ_{j-1}) taken at θ_{j-1}
(computed while rollout j ran) is applied to θ_j: θ_{j+1} = θ_j - η g_{j-1}. The envs are
released at once and g_j is computed from the other storage while they fill the next one, so
the policy lag is exactly one and no off-policy correction is needed.
"""
from __future__ import annotations

import copy
import logging
import math
import time
from pathlib import Path
from queue import Empty

import numpy as np
import torch

from fastrl.algos.a2c import a2c_loss, make_optimizer
from fastrl.buffers import RunBuffers
from fastrl.buffers.control import Clock, Flag, Stat
from fastrl.checkpoint import save_checkpoint
from fastrl.runtime.actor import build_policy, resolve_device
from fastrl.runtime.channels import Channels, encode_go
from fastrl.runtime.spec import RunSpec, WorkerIds
from fastrl.seeding import model_seed

log = logging.getLogger(__name__)


class NonFiniteError(FloatingPointError):
    pass


class Learner:
    def __init__(self, spec: RunSpec, channels: Channels, buffers: RunBuffers, index: int = 0):
        config = spec.config
        self.spec, self.channels, self.buffers = spec, channels, buffers
        self.algo, self.mode = config.algo, spec.mode
        self.device = resolve_device(config.engine.device)
        torch.manual_seed(model_seed(config.run.seed))
        self.model = build_policy(spec).to(self.device)
        self.optimizer = make_optimizer(self.model, self.algo)
        # hts: the copy that holds θ_{j-1} while its gradient is taken
        self.behaviour = copy.deepcopy(self.model) if self.mode.overlap else self.model
        self.pending_grads: list[torch.Tensor] | None = None
        self.params = buffers.shared_params(index)
        self.control = buffers.control
        self.stats = buffers.control.learner_stats[index]
        self.timing = buffers.control.timing[WorkerIds(config.engine.executors, config.engine.actors, config.engine.learners).learner(index)]
        self.rollout = 0  # the rollout the envs are filling
        self.version = 0  # of self.model; rollout j acts with version j
        self.arrived = 0
        self.frames_per_rollout = spec.envs * spec.steps * spec.env_info.frames_per_step
        self.checkpoint_dir = Path(spec.run_dir) / "checkpoints"
        self.finished = False
        self._warm_up()

    def _warm_up(self) -> None:
        """One loss and backward on a (still zero) slot so the first update pays no JIT/lazy-init cost."""
        loss, _ = a2c_loss(self.model, self.buffers.slots.storage(0, 1), self.algo, self.device)
        loss.backward()
        self.model.zero_grad(set_to_none=True)

    # ------------------------------------------------------------------ loop

    def start(self) -> None:
        """Publish θ_0 and release every env into rollout 0."""
        self.params.publish(self.model, 0)
        self.stats[Stat.VERSION] = 0
        self._go(0)

    def poll(self, timeout: float) -> bool:
        if self.finished:
            return False
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
        if self.algo.name == "none":  # collect only: same barriers and versions, no update
            self.version += 1
            if not last:
                self._publish_and_go(self.version)
        elif self.mode.overlap:
            self.behaviour.load_state_dict(self.model.state_dict())  # θ_j, before it moves on
            if self.pending_grads is not None:
                self._apply(self.pending_grads, data_version=j - 1)
            else:
                self.version += 1  # θ_1 = θ_0: there is no D(θ_{-1}) to learn from
            if not last:
                self._publish_and_go(self.version)
            self.pending_grads = self._gradients(self.behaviour, storage)
            if last:  # use the final rollout too
                self._apply(self.pending_grads, data_version=j)
        else:
            self._apply(self._gradients(self.model, storage), data_version=j)
            if not last:
                self._publish_and_go(self.version)
        self.stats[Stat.FRAMES] = frames
        self.stats[Stat.AGENT_STEPS] = frames // self.spec.env_info.frames_per_step
        self.rollout = j + 1
        if last:
            self._finish()

    # ------------------------------------------------------------------ pieces

    def _check_versions(self, storage: dict[str, np.ndarray], rollout: int) -> None:
        stamps = storage["version"][:, : self.spec.steps]
        if not (stamps == rollout).all():
            raise AssertionError(
                f"rollout {rollout} holds transitions of policy versions {np.unique(stamps).tolist()}; "
                f"{self.mode.name} mode must act with version {rollout} only"
            )

    def _gradients(self, net: torch.nn.Module, storage) -> list[torch.Tensor]:
        net.zero_grad(set_to_none=True)
        loss, stats = a2c_loss(net, storage, self.algo, self.device)
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
            raise NonFiniteError(f"non-finite gradient norm at update {int(self.stats[Stat.UPDATES])}; the update was not applied")
        self.optimizer.step()
        self.stats[Stat.LAG_MEAN] = self.stats[Stat.LAG_MAX] = lag
        self.stats[Stat.GRAD_NORM] = norm
        self.stats[Stat.UPDATES] += 1
        self.version += 1

    def _publish_and_go(self, version: int) -> None:
        self.params.publish(self.model, version)
        self.stats[Stat.VERSION] = version
        self._go(version)

    def _go(self, rollout: int) -> None:
        timeout = self.spec.config.reliability.queue_timeout_s
        for inbox in self.channels.inboxes:
            inbox.put(encode_go(rollout), timeout=timeout)

    def _finish(self) -> None:
        self.save_checkpoint()
        self.finished = True
        self.control.set(Flag.COMPLETE)

    def checkpoint_state(self) -> dict:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "version": self.version,
            "updates": int(self.stats[Stat.UPDATES]),
            "frames": int(self.stats[Stat.FRAMES]),
            "rollout": self.rollout,
            "config": self.spec.config.to_dict(),
        }

    def save_checkpoint(self) -> Path:
        return save_checkpoint(self.checkpoint_dir, self.checkpoint_state())

    def close(self) -> None:
        pass
