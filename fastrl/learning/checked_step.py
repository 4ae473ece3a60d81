"""The learner's optimizer step and its NaN/inf checks: a non-finite loss, gradient or parameter never reaches θ.

Two ways to check (``reliability.finite_checks``), the same arithmetic:

- **step** (the CPU's): every optimizer step checks its gradient norm before it is applied and the
  parameters after (a bad step is undone at once); the rule checks each minibatch's losses. Reading a
  number off the device is free on a CPU.
- **update** (CUDA's): reading a number off a GPU waits for everything queued before it, and PPO's
  epochs would wait a dozen times per minibatch. So inside an update (``deferring``) nothing is read:
  each step records on the device its minibatch's loss terms, its gradient norm, whether the
  parameters it made are finite and how far it moved them, and at the end one read checks the
  records in order. The first bad step names the failure as ``step`` would have (a loss, a gradient
  norm, the parameters), and the update is undone whole: θ (with its normaliser statistics) and the
  optimizer state are put back as they were before it. The checkpoint keeps the θ of the last good
  update, as with ``step``; only the detection is later (and no step of the bad update survives, where
  ``step`` keeps the minibatch steps before the bad one).

The norms the metrics show (gradient norm, ‖θ after − θ before‖ of the last step and the largest) are
read when the update ends.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import torch

from fastrl.algos.update_rule import checked_losses
from fastrl.buffers.control import Stat
from fastrl.errors import NonFiniteError

Reduce = Callable[[list[torch.Tensor]], None]  # the gradients shared with other learners before the step


class CheckedStep:
    """``step(net, grads)``: clip and apply ``grads`` to ``net`` with the optimizer, checked; returns the
    gradient norm (a float, or while deferring a tensor on the device)."""

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        max_grad_norm: float,
        stats: np.ndarray,
        reduce: Reduce,
        schedule_lr: Callable[[], float],
        deferred: bool,
    ):
        self.optimizer, self.max_grad_norm, self.stats = optimizer, max_grad_norm, stats
        self.reduce, self.schedule_lr, self.deferred = reduce, schedule_lr, deferred
        self.deferring = False  # inside an update whose checks wait for its end
        self._records: list[torch.Tensor] = []  # per deferred step: (loss terms, norm, params bad, distance)
        self._lr = 0.0

    def __call__(
        self, net: torch.nn.Module, grads: list[torch.Tensor], losses: torch.Tensor | None = None
    ) -> float | torch.Tensor:
        """``losses``: the minibatch's (policy, value, entropy) loss terms, checked with the step when it defers
        (a rule that checks every step has checked them already)."""
        params = list(net.parameters())
        for p, g in zip(params, grads):
            p.grad = g
        self.reduce(grads)
        if self.max_grad_norm > 0:
            norm = torch.nn.utils.clip_grad_norm_(params, self.max_grad_norm)
        else:
            norm = torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))
        if self.deferring:
            return self._deferred_step(params, norm, losses)
        norm = float(norm)
        if not math.isfinite(norm):
            raise NonFiniteError(f"non-finite gradient norm ({norm}); the update was not applied")
        backup = [p.detach().clone() for p in params]
        self._lr = self.schedule_lr()
        try:
            self.optimizer.step()
            distance = float(_distance(params, backup))
            # θ before was finite, so a finite distance from it means θ is (an inf or NaN anywhere makes the
            # distance one): the element-wise look, a pass over θ, only when it is not (it may have overflowed)
            finite = math.isfinite(distance) or all(bool(torch.isfinite(p).all()) for p in params)
        except BaseException:
            _restore(params, backup)  # never leave a half-applied step behind
            raise
        if not finite:
            _restore(params, backup)
            raise NonFiniteError(self._non_finite_params("they were restored and never published"))
        self._record_update_norm(distance)
        return norm

    def _deferred_step(
        self, params: list[torch.Tensor], norm: torch.Tensor, losses: torch.Tensor | None
    ) -> torch.Tensor:
        backup = [p.detach().clone() for p in params]
        self._lr = self.schedule_lr()
        self.optimizer.step()
        with torch.no_grad():
            terms = losses.detach().double() if losses is not None else torch.zeros(3, dtype=torch.float64)
            params_bad = torch.stack([~torch.isfinite(p).all() for p in params]).any()
            after = torch.stack([norm.double(), params_bad.double(), _distance(params, backup).double()])
            self._records.append(torch.cat([terms.to(after.device), after]))
        return norm

    @contextmanager
    def update(self, net: torch.nn.Module, rollout: int) -> Iterator[None]:
        """The optimizer steps of rollout ``rollout``'s update on ``net``; with deferred checks, checked once at
        its end, and undone whole if any failed (or if the block raised)."""
        if not self.deferred:
            yield
            return
        saved = (copy.deepcopy(net.state_dict()), copy.deepcopy(self.optimizer.state_dict()))
        self.deferring, self._records = True, []
        try:
            yield
            self.deferring = False
            records = torch.stack(self._records).tolist() if self._records else []  # the update's one read
            for *losses, norm, params_bad, distance in records:
                self._check(rollout, losses, norm, params_bad)
                self._record_update_norm(distance)
        except BaseException:
            net.load_state_dict(saved[0])
            self.optimizer.load_state_dict(saved[1])
            raise
        finally:
            self.deferring = False

    def _check(self, rollout: int, losses: list[float], norm: float, params_bad: float) -> None:
        """One deferred step's record, as the step would have checked it at once."""
        checked_losses(rollout, *losses)
        if not math.isfinite(norm):
            raise NonFiniteError(f"non-finite gradient norm ({norm}); the update was rolled back")
        if params_bad:
            raise NonFiniteError(self._non_finite_params("the update was rolled back and never published"))

    def _non_finite_params(self, what: str) -> str:
        return f"non-finite parameters after an optimizer step (lr {self._lr:g}); {what}"

    def _record_update_norm(self, distance: float) -> None:
        """‖θ after − θ before‖ of a step: what gala's consensus bound is made of."""
        self.stats[Stat.UPDATE_NORM] = distance
        self.stats[Stat.MAX_UPDATE_NORM] = max(self.stats[Stat.MAX_UPDATE_NORM], distance)


@torch.no_grad()
def _distance(params: list[torch.Tensor], before: list[torch.Tensor]) -> torch.Tensor:
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p - b) for p, b in zip(params, before)]))


@torch.no_grad()
def _restore(params: list[torch.Tensor], backup: list[torch.Tensor]) -> None:
    for p, b in zip(params, backup):
        p.copy_(b)
