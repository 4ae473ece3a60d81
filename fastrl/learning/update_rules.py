"""Update rules: what the learner learns from the storage of rollout j, and what θ becomes.

One small strategy per (algorithm, the mode's policy lag), so the learner's barrier is the same
for all. A rule computes and returns; the learner owns the version, the optimizer, the lag check,
the stats row and publishing. A rule is given θ (``model``), the algorithm's config, the device,
the run's seed and the learner's checked optimizer ``step(net, grads) -> gradient norm``; it
names the net that step trains (``trained``: θ, or hts PPO's trainee), and the learner builds the
optimizer over it. Its steps, in the order the mode's schedule calls them (``fastrl.modes``):

- ``learn(storage, j)`` takes what D(θ_j) gives (gradients, PPO epochs), keeps it pending and
  returns its loss terms by stats column;
- ``advance()`` hands over the pending work as an ``Update`` (gradients for the learner to apply,
  or parameters already trained), or None when nothing is pending (θ_1 = θ_0 in hts: there is no
  D(θ_{-1})).

The rules:

- ``Gradient``    the base of the next three: one loss's gradient at the θ that acted, applied by the learner.
- ``A2CSync``     the gradient of D(θ_j) at θ_j gives θ_{j+1} (lag 0).
- ``A2CDelayed``  HTS-RL eq. 6: θ_{j+1} = θ_j − η g_{j−1}; g_j is taken at θ_j (``behaviour``,
                  kept when the model moves on) on D(θ_j) (lag 1).
- ``PPO``         epochs of clipped-surrogate minibatches. Lag 0 (sync): on D(θ_j) from θ_j. Lag 1
                  (hts): the epochs on D(θ_j) start from θ_{j+1}, the parameters the envs act with
                  next, in a ``trainee``; ``advance`` hands over the trainee's parameters (the
                  clipped ratio absorbs the lag). A recurrent model (``model.lstm``) draws its
                  minibatches by env, whole rollouts replayed from their first state.
- ``Impala``      async: one V-trace step per gathered batch of full slots (it corrects the lag).
- ``Collect``     no learning (benchmarks): same barriers and versions.

A non-finite loss raises ``NonFiniteError`` before anything is applied; the learner adds what its
checkpoint keeps.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from csrc_free_kernels.gae import gae
from fastrl.algos.a2c import a2c_loss
from fastrl.algos.impala import impala_loss
from fastrl.algos.ppo import PPOBatch, minibatch_indices, ppo_loss
from fastrl.algos.time_limits import final_values
from fastrl.buffers.control import Stat
from fastrl.config import AlgoConfig
from fastrl.models.distributions import ActionDistribution, distribution_for
from fastrl.models.normalizer import observe_observations, observe_returns, observed_rows
from fastrl.models.recurrent import hidden_size, unroll
from fastrl.errors import NonFiniteError
from fastrl.learning.cohort import Solo

PPO_STREAM = 3  # seeding purpose of the minibatch permutations (see fastrl.seeding)

Step = Callable[[torch.nn.Module, list[torch.Tensor]], float]  # the learner's checked optimizer step
Losses = dict[Stat, float]  # what a rule's learn produced, by stats column


@dataclass(frozen=True)
class Update:
    """A rule's pending work, handed to the learner to apply and count as one update."""

    lag: int | None  # θ's version minus the version of the data learned from; None: measured (async)
    grads: list[torch.Tensor] | None = None  # to apply to θ with the learner's step
    params: dict | None = None  # or θ's new parameters, already trained (hts PPO's trainee)
    norm: float = 0.0  # the gradient norm of that training's last step


class UpdateRule:
    lag: int | None = 0

    def __init__(self, model: torch.nn.Module, algo: AlgoConfig, device: torch.device, step: Step, seed: int,
                 cohort: Solo | None = None, distribution: ActionDistribution | None = None):
        self.model, self.algo, self.device, self.step, self.seed = model, algo, device, step, seed
        self.cohort = cohort or Solo()  # the other ranks' learners, whose data counts as this one's (torchrun)
        self.distribution = distribution or distribution_for(None)  # how the head is read (Discrete by default)

    @property
    def trained(self) -> torch.nn.Module:
        """The net the learner's optimizer steps."""
        return self.model

    def differentiated(self) -> list[torch.nn.Module]:
        """The nets whose backward passes make the gradients of this rule's updates (torchrun's
        all-reduce starts during them: ``Cohort.watch``)."""
        return []

    def warm_up(self, storage: dict[str, np.ndarray]) -> None:
        """One loss and backward on a zero storage of an update's shape, so the first update pays no JIT,
        lazy-init or compile cost."""

    def learn(self, storage: dict[str, np.ndarray], rollout: int) -> Losses:
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

    def _observe(self, net: torch.nn.Module, storage: dict[str, np.ndarray]) -> None:
        """``model.normalize_obs``: the running statistics of ``net`` (the θ published next) move once per
        update, by the rows learned from; the behaviour copy of hts A2C keeps the statistics it acted with."""
        if getattr(net, "obs_normalizer", None) is None:
            return
        obs = storage["obs"][:, : storage["action"].shape[1] - 1]
        count = obs.shape[0] * obs.shape[1]
        rows = obs.reshape(-1, *obs.shape[2:])[observed_rows(count, *self.cohort.rows(count))]
        observe_observations(net, torch.from_numpy(rows).to(self.device), self.cohort.moments)


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
        losses = _checked(rollout, stats.policy_loss, stats.value_loss, stats.entropy)
        loss.backward()
        self.pending_grads = _grads(net)
        return losses

    def _acting(self) -> torch.nn.Module:
        """The parameters the data was collected with."""
        return self.model

    def advance(self):
        grads, self.pending_grads = self.pending_grads, None  # consumed even if applying it fails
        return None if grads is None else Update(self.lag, grads=grads)


class A2CSync(Gradient):
    def _loss(self, net, storage):
        return a2c_loss(net, storage, self.algo, self.device, self.distribution)


class A2CDelayed(A2CSync):
    lag = 1

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.behaviour = copy.deepcopy(self.model)  # holds θ_j while its gradient is taken

    def _acting(self) -> torch.nn.Module:
        return self.behaviour

    def advance(self):
        self.behaviour.load_state_dict(self.model.state_dict())  # θ_j, before it moves on
        return super().advance()

    def state(self) -> dict:
        grads = self.pending_grads
        return {"pending_grads": [g.detach().cpu() for g in grads] if grads is not None else None}

    def load(self, state: dict) -> None:
        grads = state.get("pending_grads")
        self.pending_grads = [g.to(self.device) for g in grads] if grads is not None else None


class Impala(Gradient):
    """One V-trace step per batch at the current θ; the async learner measures the lag."""

    lag = None

    def _loss(self, net, storage):
        return impala_loss(net, storage, self.algo, self.device, self.distribution)


class PPO(UpdateRule):
    def __init__(self, *args, lag: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.lag = lag
        # hts: the trainee runs the epochs while ``model`` keeps the published θ
        self.trainee = copy.deepcopy(self.model) if lag else self.model
        self.pending = False  # the trainee holds epochs not yet handed over
        self.norm = 0.0  # gradient norm of the trainee's last step, counted when it is handed over

    def differentiated(self):
        return [self.trainee]

    @property
    def trained(self) -> torch.nn.Module:
        return self.trainee

    def warm_up(self, storage):
        """A loss and backward on minibatches of the sizes the epochs draw, and the bootstrap forward, so a
        compiled model (``model.compile``) compiles its graphs here, in start-up, not in the first update."""
        steps = storage["action"].shape[1] - 1
        rows = lambda key: torch.from_numpy(storage[key][:, :steps]).to(self.device).flatten(0, 1)  # noqa: E731
        algo = self.algo
        recurrent = hidden_size(self.trainee)
        count = rows("reward").shape[0]
        sizes = {count} if recurrent else {len(part) for part in np.array_split(np.arange(count), algo.minibatches)}
        for size in sorted(sizes):
            zeros = torch.zeros(size, device=self.device)
            batch = PPOBatch(rows("obs")[:size], rows("action")[:size], rows("logp")[:size], zeros, zeros, zeros)
            outputs = None
            if recurrent:
                sequences = Sequences.of(storage, self.device)
                outputs = sequences.replay(self.trainee, np.arange(len(sequences.hidden0)))
            loss, _ = ppo_loss(self.trainee, batch, algo.clip, algo.value_clip, algo.value_coef, algo.entropy_coef,
                               algo.normalize_advantages, distribution=self.distribution, outputs=outputs)
            loss.backward()
        self.trainee.zero_grad(set_to_none=True)
        if not recurrent:
            with torch.no_grad():
                self.trainee(torch.from_numpy(storage["obs"][:, steps]).to(self.device))  # _flatten's bootstrap

    def learn(self, storage, rollout):
        self._observe(self.trainee, storage)
        # sync: from θ_j; hts: from θ_{j+1}, what the envs act with next
        losses, self.norm = self._epochs(storage, rollout)
        self.pending = True
        return losses

    def advance(self):
        if not self.pending:
            return None  # θ_1 = θ_0, as in A2C's delayed gradient
        self.pending = False
        return Update(self.lag, params=self.trainee.state_dict() if self.lag else None, norm=self.norm)

    def _epochs(self, storage, rollout: int) -> tuple[Losses, float]:
        """``algo.epochs`` passes of minibatch steps on the trainee; its mean loss terms and last gradient norm."""
        algo, net = self.algo, self.trainee
        data = self._flatten(storage)
        sequences = Sequences.of(storage, self.device) if hidden_size(net) else None
        value_scale = observe_returns(net, data.returns, self.cohort.moments)  # algo.normalize_returns (1.0 without)
        count = data.actions.shape[0]
        first, total = self.cohort.rows(count)  # minibatches are drawn over every rank's rows
        advantages = self.cohort.gather(data.advantages)
        rng = np.random.default_rng([self.seed, PPO_STREAM, rollout])  # never from timing
        length = storage["action"].shape[1] - 1 if sequences is not None else 1  # rows drawn together: an env's
        totals, norm, steps = np.zeros(5), 0.0, 0
        for _ in range(algo.epochs):
            for index in _whole(minibatch_indices(total // length, algo.minibatches, rng), length):
                mine = index[(index >= first) & (index < first + count)] - first  # the rows this rank holds
                if len(mine) == 0:  # none this time: the other ranks' gradients still need this rank's zeros
                    norm = self.step(net, [torch.zeros_like(p) for p in net.parameters()])
                    continue
                batch = self._minibatch(data, mine, advantages[torch.from_numpy(index).to(self.device)])
                net.zero_grad(set_to_none=True)
                outputs = None if sequences is None else sequences.replay(net, mine[::length] // length)
                loss, stats = ppo_loss(net, batch, algo.clip, algo.value_clip, algo.value_coef, algo.entropy_coef,
                                       False, value_scale, self.distribution, outputs)
                _checked(rollout, stats.policy_loss, stats.value_loss, stats.entropy)
                # weighted by this rank's share of the minibatch: the ranks' mean gradient is the whole minibatch's
                (loss * (len(mine) * self.cohort.ranks / len(index))).backward()
                norm = self.step(net, _grads(net))
                totals += (stats.policy_loss, stats.value_loss, stats.entropy, stats.clip_fraction, stats.approx_kl)
                steps += 1
        columns = (Stat.POLICY_LOSS, Stat.VALUE_LOSS, Stat.ENTROPY, Stat.CLIP_FRACTION, Stat.APPROX_KL)
        return dict(zip(columns, totals / max(steps, 1))), norm

    def _minibatch(self, data: PPOBatch, mine: np.ndarray, advantages: torch.Tensor) -> PPOBatch:
        """This rank's rows ``mine`` of a minibatch whose every rank's advantages are ``advantages``: those
        normalised by the whole minibatch's mean and std (``algo.normalize_advantages``)."""
        index = torch.from_numpy(mine).to(self.device)
        batch = PPOBatch(*(getattr(data, f)[index] for f in PPOBatch.__dataclass_fields__))
        if self.algo.normalize_advantages and advantages.numel() > 1:
            batch.advantages = (batch.advantages - advantages.mean()) / (advantages.std() + 1e-8)
        return batch

    @torch.no_grad()
    def _flatten(self, storage) -> PPOBatch:
        """Advantages by GAE, as flat [N*T] rows, from the values the actors wrote while acting (CleanRL and
        stable-baselines3 take them so; forwarding every row again took a fifth of the Pong learner's time)
        and the trainee's values of what the rollout ends on: row T and the final observations of truncations."""
        algo, device = self.algo, self.device
        steps = storage["action"].shape[1] - 1
        obs = torch.from_numpy(storage["obs"]).to(device)
        acted = storage["value"][:, :steps]
        after = None
        if hidden_size(self.trainee):  # the state at row T and after each truncation: the whole rollout replayed
            _, values, after = unroll(self.trainee, obs, torch.from_numpy(storage["hidden"][:, 0]).to(device),
                                      torch.from_numpy(storage["done"]).to(device))
            bootstrap = values[:, steps]
        else:
            _, bootstrap = self.trainee(obs[:, steps])
        advantages = gae(storage["reward"][:, :steps], storage["done"][:, :steps],
                         np.concatenate([acted, bootstrap.float().cpu().numpy()[:, None]], axis=1),
                         algo.gamma, algo.gae_lambda,
                         final_values=final_values(self.trainee, storage, device, after))  # time limits
        advantages = torch.from_numpy(advantages).to(device)
        values = torch.from_numpy(np.ascontiguousarray(acted, dtype=np.float32)).to(device)
        flat = lambda x: x.reshape(-1, *x.shape[2:])  # noqa: E731
        return PPOBatch(
            obs=flat(obs[:, :steps]),
            actions=flat(torch.from_numpy(storage["action"][:, :steps]).to(device)),
            old_logp=flat(torch.from_numpy(storage["logp"][:, :steps]).to(device)),
            old_values=flat(values),
            advantages=flat(advantages),
            returns=flat(advantages + values),
        )

    def state(self) -> dict:
        return {"trainee": self.trainee.state_dict() if self.lag and self.pending else None}

    def load(self, state: dict) -> None:
        if not self.lag:
            return
        trainee = state.get("trainee")
        self.pending = trainee is not None
        self.trainee.load_state_dict(trainee if trainee is not None else self.model.state_dict())


@dataclass(frozen=True)
class Sequences:
    """A recurrent model's view of a storage for PPO: each env's T rows, the state it began the rollout
    with, and how each step ended (where the state resets)."""

    obs: torch.Tensor  # [N, T, ...]
    hidden0: torch.Tensor  # [N, 2H]
    done: torch.Tensor  # [N, T]

    @classmethod
    def of(cls, storage: dict[str, np.ndarray], device: torch.device) -> "Sequences":
        steps = storage["action"].shape[1] - 1
        take = lambda key: torch.from_numpy(storage[key][:, :steps]).to(device)  # noqa: E731
        return cls(take("obs"), torch.from_numpy(storage["hidden"][:, 0]).to(device), take("done"))

    def replay(self, net: torch.nn.Module, envs: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """(head, value) of these envs' rows, env-major: the order of ``_whole``'s row indices."""
        index = torch.from_numpy(np.asarray(envs, np.int64)).to(self.hidden0.device)
        head, value, _ = unroll(net, self.obs[index], self.hidden0[index], self.done[index])
        return head.flatten(0, 1), value.flatten(0, 1)


def _whole(groups: list[np.ndarray], length: int) -> list[np.ndarray]:
    """Minibatches of groups (envs) as row indices of the env-major flat rows: all ``length`` rows of each."""
    if length == 1:
        return groups
    return [(group[:, None] * length + np.arange(length)).ravel() for group in groups]


def make_rule(algorithm: str, lag: int | None, *given, distribution: ActionDistribution | None = None) -> UpdateRule:
    """The rule of ``algo.name`` for a mode of policy ``lag``; ``given``: what every rule takes (see
    ``UpdateRule``), ``distribution`` the action space's. Which mode takes which algorithm is
    ``fastrl.modes``' to say (the config checked it)."""
    if algorithm == "none":
        return Collect(*given, distribution=distribution)
    if algorithm == "impala":
        return Impala(*given, distribution=distribution)
    if algorithm == "ppo":
        return PPO(*given, lag=lag, distribution=distribution)
    rule = A2CDelayed if lag == 1 else A2CSync
    return rule(*given, distribution=distribution)


def _checked(rollout: int, policy_loss: float, value_loss: float, entropy: float) -> Losses:
    if not all(map(math.isfinite, (policy_loss, value_loss, entropy))):
        raise NonFiniteError(
            f"non-finite loss (policy {policy_loss}, value {value_loss}, entropy {entropy}) on the data of "
            f"rollout {rollout}; no update was made from it"
        )
    return {Stat.POLICY_LOSS: policy_loss, Stat.VALUE_LOSS: value_loss, Stat.ENTROPY: entropy}


def _grads(net: torch.nn.Module) -> list[torch.Tensor]:
    return [p.grad if p.grad is not None else torch.zeros_like(p) for p in net.parameters()]
