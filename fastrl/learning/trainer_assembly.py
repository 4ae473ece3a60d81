"""A learner's trainers: the update rule, optimizer and checked step it builds for θ (and for any other policy an
extension learns beside it), the schedules that set their learning rate and loss weights by frames learned, and
the gradients' reduction before each step.

``TrainerAssembly`` is the part of ``fastrl.learning.learner.Learner`` that builds and schedules them; it reads
the learner's configuration and counters (the attributes declared below) and owns nothing of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from fastrl.algos import make_rule, schedules
from fastrl.algos.optimizers import make_optimizer
from fastrl.buffers.control import Stat
from fastrl.learning.checked_step import CheckedStep
from fastrl.models.compiling import compile_mode_for, compile_policy
from fastrl.models.distributions import distribution_for
from fastrl.models.policy import build_policy

if TYPE_CHECKING:
    from fastrl.algos.update_rule import UpdateRule
    from fastrl.buffers import RunBuffers
    from fastrl.config import AlgoConfig
    from fastrl.learning.extensions import LearnerExtension
    from fastrl.modes import ModeSpec
    from fastrl.spec import RunSpec


class TrainerAssembly:
    spec: RunSpec
    buffers: RunBuffers
    algo: AlgoConfig
    mode: ModeSpec
    device: torch.device
    cohort: Any
    index: int
    owned: range
    stats: np.ndarray
    total_frames: int
    share: int
    rule: UpdateRule
    uploads: Any
    extensions: list[LearnerExtension]
    version: int

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

    def other_policy(self, stats: np.ndarray, rows: int):
        """Another policy learned beside θ from ``rows`` rows (a learner extension's, e.g. named policies): its
        model, built and compiled as θ (its initial parameters the next draws of the learner's torch stream), its
        rule, optimizer and step."""
        config = self.spec.config
        model = compile_policy(
            build_policy(self.spec.env_info, config).to(self.device), compile_mode_for(config, self.device, "learner")
        )
        rule, optimizer, step = self._trainer(model, stats)
        rule.warm_up(self.uploads.of(self._zero_storage(rows)))
        return model, rule, optimizer, step

    def _zero_storage(self, rows: int) -> dict[str, np.ndarray]:
        """Zeros shaped as the storage an update learns from (the slots themselves may be filling already), so
        the warm-up sees the update's shapes: a compiled model (``model.compile``) compiles its graphs then."""
        count = self.mode.slots_per_update(rows, self.algo.batch_slots)
        return {
            name: np.zeros((count, *field.shape[1:]), field.dtype)
            for name, field in self.buffers.slots.storage(0, 1).items()
        }

    def _reduce_gradients(self, grads: list[torch.Tensor]) -> None:
        """Before each optimizer step: the extensions' (gala's allreduce mixing), and every rank's mean gradient
        (torchrun)."""
        for extension in self.extensions:
            extension.reduce_gradients(grads, self.version + 1)
        self.cohort.reduce_gradients(grads)  # every rank steps the same mean gradient (torchrun)

    def _schedule_lr(self, optimizer: torch.optim.Optimizer, stats: np.ndarray) -> float:
        """``algo.lr_schedule``, by frames learned so far (never time): the learning rate of the next step."""
        lr = schedules.learning_rate(self.algo, float(self.stats[Stat.FRAMES]), self.total_frames, self.share)
        for group in optimizer.param_groups:
            group["lr"] = lr
        stats[Stat.LR] = lr
        return lr

    def _schedule_loss_weights(self) -> None:
        """``algo.entropy_schedule`` and the rule's own schedules, by frames learned so far: the bonus and what
        else the rule's next loss weighs by (what the rule scheduled is reported as its ``scheduled_metrics``)."""
        frames = float(self.stats[Stat.FRAMES])
        self.rule.entropy_coef = schedules.entropy_coef(self.algo, frames, self.total_frames, self.share)
        self.rule.schedule(frames, self.total_frames, self.share)
        self.stats[Stat.ENTROPY_COEF] = self.rule.entropy_coef
