"""What every learning algorithm's update rule shares: the protocol the learner drives, the
``Update`` it hands back, the gradient-at-the-acting-θ pattern (A2C, IMPALA), the forward of a
whole storage, and the checked loss terms.

A rule computes and returns; the learner (``fastrl.learning.learner``) owns the version, the
optimizer, the lag check, the stats row and publishing. A rule is given θ (``model``), the
algorithm's config, the device, the run's seed and the learner's checked optimizer
``step(net, grads) -> gradient norm``; it names the net that step trains (``trained``: θ, or hts
PPO's trainee), and the learner builds the optimizer over it. Its steps, in the order the mode's
schedule calls them (``fastrl.modes``):

- ``learn(storage, j)`` takes what D(θ_j) gives (gradients, PPO epochs), keeps it pending and
  returns its loss terms and its own metrics by name;
- ``advance()`` hands over the pending work as an ``Update`` (gradients for the learner to apply,
  or parameters already trained), or None when nothing is pending (θ_1 = θ_0 in hts: there is no
  D(θ_{-1})).

A non-finite loss raises ``NonFiniteError`` before anything is applied.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from fastrl.algos.sharding import Solo
from fastrl.buffers.device_storage import DeviceStorage
from fastrl.errors import NonFiniteError
from fastrl.models.distributions import ActionDistribution, distribution_for
from fastrl.models.normalizer import observe_observations, observed_rows
from fastrl.models.recurrent import hidden_size, unroll
from fastrl.schema import AlgoConfig

# the learner's checked optimizer step (fastrl.learning.checked_step): (net, gradients, and optionally the
# minibatch's policy/value/entropy loss terms) -> the gradient norm, a tensor while its checks wait for the update's end
Step = Callable[..., "float | torch.Tensor"]
# a rule's learn, by name: "policy_loss", "value_loss", "entropy", and the metrics its registration declares
Losses = dict[str, float]


@dataclass(frozen=True)
class Update:
    """A rule's pending work, handed to the learner to apply and count as one update."""

    lag: int | None  # θ's version minus the version of the data learned from; None: measured (async)
    grads: list[torch.Tensor] | None = None  # to apply to θ with the learner's step
    params: dict | None = None  # or θ's new parameters, already trained (hts PPO's trainee)
    norm: float = 0.0  # the gradient norm of that training's last step


class UpdateRule:
    def __init__(
        self,
        model: torch.nn.Module,
        algo: AlgoConfig,
        device: torch.device,
        step: Step,
        seed: int,
        cohort: Solo | None = None,
        distribution: ActionDistribution | None = None,
        lag: int | None = 0,
        options: Any = None,
    ):
        """``lag``: the policy lag of the mode's data (0: sync, 1: hts, None: async's, measured); ``options``: the
        algorithm's own hyper-parameters (its registration's options dataclass, from ``[algo.options]``)."""
        self.model, self.algo, self.device, self.step, self.seed = model, algo, device, step, seed
        self.lag, self.options = lag, options
        self.clock: Any = None  # the learner's FrameClock (fastrl.algos.schedules), for schedules of a rule's own
        self.cohort = cohort or Solo()  # the other ranks' learners, whose data counts as this one's (torchrun)
        self.distribution = distribution or distribution_for(None)  # how the head is read (Discrete by default)
        # the learner sets the bonus by algo.entropy_schedule before each learn; a rule whose loss clips a probability
        # ratio (PPO) sets its range in ``schedule`` (named policies learn with the run's rule's)
        self.entropy_coef = algo.entropy_coef
        self.clip = 0.0
        # set by the learner (reliability.finite_checks): True, the rule reads no loss off the device inside
        # an update; the learner checks the losses it returns, once (fastrl.learning.checked_step)
        self.deferred_checks = False

    @property
    def trained(self) -> torch.nn.Module:
        """The net the learner's optimizer steps."""
        return self.model

    def differentiated(self) -> list[torch.nn.Module]:
        """The nets whose backward passes make the gradients of this rule's updates (torchrun's
        all-reduce starts during them: ``Cohort.watch``)."""
        return []

    def schedule(self, frames: float, total_frames: int, share: int) -> None:
        """Before each learn, by the frames learned so far (never time; ``share``: the learners the run's frames
        are split between): the rule moves its own hyper-parameters that follow a schedule (PPO's clip range)."""

    def scheduled_metrics(self) -> Losses:
        """What ``schedule`` set, as it stands, by the names of its registration's ``metrics`` (PPO: its clip range,
        ``clip``): the learner writes these into their columns when it starts and after each ``schedule``."""
        return {}

    def warm_up(self, storage: DeviceStorage) -> None:
        """One loss and backward on a zero storage of an update's shape, so the first update pays no JIT,
        lazy-init or compile cost."""

    def learn(self, storage: DeviceStorage, rollout: int) -> Losses:
        """Take what the data of ``rollout`` gives and keep it pending for ``advance``."""
        return {}

    def advance(self) -> Update | None:
        """The pending work, no longer pending; None when there is none (θ stays as it is)."""
        return None

    def state(self) -> dict:
        """Rule state beyond θ and the optimizer that a resumed run needs."""
        return {}

    def load(self, state: dict) -> None:
        pass

    def _observe(self, net: torch.nn.Module, storage: DeviceStorage) -> None:
        """``model.normalize_obs``: the running statistics of ``net`` (the θ published next) move once per
        update, by the rows learned from; the behaviour copy of hts A2C keeps the statistics it acted with."""
        if getattr(net, "obs_normalizer", None) is None:
            return
        obs = storage.tensor("obs")[:, : storage["action"].shape[1] - 1]  # on the device: no copy on the host
        count = obs.shape[0] * obs.shape[1]
        rows = obs.reshape(-1, *obs.shape[2:])[observed_rows(count, *self.cohort.rows(count))]
        observe_observations(net, rows, self.cohort.moments)


class Collect(UpdateRule):
    """No learning: versions still count, so the barriers and stamps are those of a learning run."""


class Gradient(UpdateRule):
    """The gradient of one loss on the storage at the parameters that acted, kept for the learner to apply."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.pending_grads: list[torch.Tensor] | None = None

    def _loss(self, net: torch.nn.Module, storage):
        raise NotImplementedError

    def differentiated(self):
        return [self._acting()]

    def warm_up(self, storage):
        self._loss(self.model, storage)[0].backward()
        self.model.zero_grad(set_to_none=True)

    def learn(self, storage, rollout):
        self._observe(self.model, storage)
        net = self._acting()
        net.zero_grad(set_to_none=True)
        loss, stats = self._loss(net, storage)
        losses = checked_losses(rollout, stats.policy_loss, stats.value_loss, stats.entropy)
        loss.backward()
        self.pending_grads = gradients_of(net)
        return {**losses, **stats.metrics}

    def _acting(self) -> torch.nn.Module:
        """The parameters the data was collected with."""
        return self.model

    def advance(self):
        grads, self.pending_grads = self.pending_grads, None  # consumed even if applying it fails
        return None if grads is None else Update(self.lag, grads=grads)


@dataclass
class LossStats:
    policy_loss: float
    value_loss: float
    entropy: float
    metrics: dict[str, float] = field(default_factory=dict)  # an algorithm's own, as its registration names them


def forward_storage(
    model: torch.nn.Module, obs: torch.Tensor, storage: DeviceStorage
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Forward all N*(T+1) observations at once -> heads [N, T+1, H], values [N, T+1], and for a recurrent
    model the states after each row [N, T+1, 2H] (replayed from the storage's first states; else None)."""
    n, t1 = obs.shape[:2]
    if hidden_size(model):
        return unroll(model, obs, storage.tensor("hidden")[:, 0], storage.tensor("done"))
    logits, values = model(obs.reshape(n * t1, *obs.shape[2:]))
    return logits.reshape(n, t1, -1), values.reshape(n, t1), None


def checked_losses(rollout: int, policy_loss: float, value_loss: float, entropy: float) -> Losses:
    if not all(map(math.isfinite, (policy_loss, value_loss, entropy))):
        raise NonFiniteError(
            f"non-finite loss (policy {policy_loss}, value {value_loss}, entropy {entropy}) on the data of "
            f"rollout {rollout}; no update was made from it"
        )
    return {"policy_loss": policy_loss, "value_loss": value_loss, "entropy": entropy}


def weighted_mean(values: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """The mean of ``values``, or over the rows ``weights`` (0/1) keep: a multi-agent env's acting or present rows."""
    if weights is None:
        return values.mean()
    return (values * weights).sum() / weights.sum().clamp(min=1.0)


def normalized(values: torch.Tensor, over: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """``values`` less the mean of ``over``, over its std (the rows ``weights`` keep, where given)."""
    mean = weighted_mean(over, weights)
    if weights is None:
        return (values - mean) / (over.std() + 1e-8)
    variance = weighted_mean((over - mean).pow(2), weights) * _bessel(weights)
    return (values - mean) / (variance.sqrt() + 1e-8)


def _bessel(weights: torch.Tensor) -> torch.Tensor:
    count = weights.sum()
    return count / (count - 1).clamp(min=1.0)


def live_weights(storage, steps: int) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """From a multi-agent run's ``live`` field (``fastrl.envs.base``), [N, T] float weights of the rows whose agent
    acted (the policy's terms) and of those where it was present (the value's); (None, None) without the field."""
    if "live" not in storage:
        return None, None
    from fastrl.envs.base import ACTING, WAITING

    live = storage.tensor("live")[:, :steps]
    return (live == ACTING).float(), (live >= WAITING).float()


def gradients_of(net: torch.nn.Module) -> list[torch.Tensor]:
    return [p.grad if p.grad is not None else torch.zeros_like(p) for p in net.parameters()]
