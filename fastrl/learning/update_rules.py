"""Update rules: what the learner learns from the storage of rollout j, and how θ moves on.

One small strategy per (algorithm, mode) so the learner's barrier stays the same for all. A
rule has two steps, and the learner orders them by mode (``fastrl.modes``):

- ``learn(storage, j)`` takes what D(θ_j) gives (gradients, PPO epochs) and keeps it pending;
- ``advance()`` makes the next θ from what is pending, or θ unchanged when nothing is (θ_1 = θ_0
  in hts: there is no D(θ_{-1})), and counts the version.

The rules:

- ``A2CSync``     the gradient of D(θ_j) at θ_j gives θ_{j+1} (lag 0).
- ``A2CDelayed``  HTS-RL eq. 6: θ_{j+1} = θ_j − η g_{j−1}; g_j is taken at θ_j (``behaviour``,
                  kept when the model moves on) on D(θ_j) (lag 1).
- ``PPO``         epochs of clipped-surrogate minibatches. ``sync``: on D(θ_j) from θ_j (lag 0).
                  ``hts``: the epochs on D(θ_j) start from θ_{j+1}, the parameters the envs act
                  with next, in a ``trainee``; ``advance`` publishes the trainee (lag 1, the
                  clipped ratio absorbs it).
- ``Impala``      async: no barrier; ``learn_batch`` takes one gathered batch of full slots (V-trace
                  corrects the measured lag).
- ``Collect``     no learning (benchmarks): same barriers and versions.
"""
from __future__ import annotations

import copy
import math

import numpy as np
import torch

from csrc_free_kernels.gae import gae
from fastrl.algos.a2c import a2c_loss, make_optimizer
from fastrl.algos.impala import impala_loss
from fastrl.algos.ppo import PPOBatch, minibatch_indices, ppo_loss
from fastrl.algos.time_limits import final_values
from fastrl.buffers.control import Stat
from fastrl.models.normalizer import observe_observations, observe_returns, observed_rows
from fastrl.process.faults import NonFiniteError

PPO_STREAM = 3  # seeding purpose of the minibatch permutations (see fastrl.seeding)


class UpdateRule:
    def __init__(self, learner) -> None:
        self.learner = learner

    def learn(self, storage: dict[str, np.ndarray], rollout: int) -> None:
        """Take what the data of ``rollout`` gives and keep it pending for ``advance``."""

    def advance(self) -> None:
        """θ moves on by what is pending (unchanged when nothing is); the version counts up."""
        self.learner.version += 1

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
        rows = obs.reshape(-1, *obs.shape[2:])[observed_rows(obs.shape[0] * obs.shape[1])]
        observe_observations(net, torch.from_numpy(rows).to(self.learner.device))

    def _record(self, policy_loss: float, value_loss: float, entropy: float) -> None:
        stats = self.learner.stats
        stats[Stat.POLICY_LOSS], stats[Stat.VALUE_LOSS], stats[Stat.ENTROPY] = policy_loss, value_loss, entropy

    def _check_finite(self, rollout: int, policy_loss: float, value_loss: float, entropy: float) -> None:
        if not all(map(math.isfinite, (policy_loss, value_loss, entropy))):
            raise NonFiniteError(
                f"non-finite loss (policy {policy_loss}, value {value_loss}, entropy {entropy}) on the data of "
                f"rollout {rollout}; no update was made from it: {self.learner.kept()}"
            )


class Collect(UpdateRule):
    """No learning: versions still count, so the barriers and stamps are those of a learning run."""

    def learn_batch(self, storage, batch: int) -> float:
        return 0.0


class Impala(UpdateRule):
    """One IMPALA step per batch; the async learner counts the update and its measured lag."""

    def learn_batch(self, storage, batch: int) -> float:
        learner, net = self.learner, self.learner.model
        self._observe(net, storage)
        net.zero_grad(set_to_none=True)
        loss, stats = impala_loss(net, storage, learner.algo, learner.device)
        terms = (stats.policy_loss, stats.value_loss, stats.entropy)
        self._check_finite(batch, *terms)
        loss.backward()
        self._record(*terms)
        return learner.step(net, [p.grad if p.grad is not None else torch.zeros_like(p) for p in net.parameters()])


class A2CSync(UpdateRule):
    lag = 0  # the pending gradient was taken on the data of the version it is applied to

    def __init__(self, learner) -> None:
        super().__init__(learner)
        self.pending_grads: list[torch.Tensor] | None = None

    def learn(self, storage, rollout):
        self._observe(self.learner.model, storage)
        self.pending_grads = self._gradients(self._acting(), storage, rollout)

    def _acting(self) -> torch.nn.Module:
        """The parameters the data was collected with."""
        return self.learner.model

    def advance(self):
        learner = self.learner
        grads, self.pending_grads = self.pending_grads, None  # consumed even if it fails
        if grads is None:
            learner.version += 1
        else:
            learner.apply(grads, data_version=learner.version - self.lag)

    def _gradients(self, net: torch.nn.Module, storage, rollout: int) -> list[torch.Tensor]:
        net.zero_grad(set_to_none=True)
        loss, stats = a2c_loss(net, storage, self.learner.algo, self.learner.device)
        terms = (stats.policy_loss, stats.value_loss, stats.entropy)
        self._check_finite(rollout, *terms)
        loss.backward()
        self._record(*terms)
        return [p.grad if p.grad is not None else torch.zeros_like(p) for p in net.parameters()]


class A2CDelayed(A2CSync):
    lag = 1

    def __init__(self, learner) -> None:
        super().__init__(learner)
        self.behaviour = copy.deepcopy(learner.model)  # holds θ_j while its gradient is taken

    def _acting(self) -> torch.nn.Module:
        return self.behaviour

    def advance(self):
        self.behaviour.load_state_dict(self.learner.model.state_dict())  # θ_j, before it moves on
        super().advance()

    def state(self) -> dict:
        grads = self.pending_grads
        return {"pending_grads": [g.detach().cpu() for g in grads] if grads is not None else None}

    def load(self, state: dict) -> None:
        grads = state.get("pending_grads")
        self.pending_grads = [g.to(self.learner.device) for g in grads] if grads is not None else None


class PPO(UpdateRule):
    def __init__(self, learner, overlap: bool) -> None:
        super().__init__(learner)
        self.overlap = overlap
        # hts: the trainee runs the epochs while ``learner.model`` keeps the published θ
        self.trainee = copy.deepcopy(learner.model) if overlap else learner.model
        learner.optimizer = make_optimizer(self.trainee, learner.algo)
        self.pending = False  # the trainee holds epochs not yet published
        self.norm = 0.0  # gradient norm of the trainee's last step, logged when it is published

    def learn(self, storage, rollout):
        self._observe(self.trainee, storage)
        self.norm = self._epochs(storage, rollout)  # sync: from θ_j; hts: from θ_{j+1}, what the envs act with next
        self.pending = True

    def advance(self):
        learner = self.learner
        if not self.pending:
            learner.version += 1  # θ_1 = θ_0, as in A2C's delayed gradient
            return
        data_version = learner.version - 1 if self.overlap else learner.version
        learner.check_lag(data_version)
        if self.overlap:
            learner.model.load_state_dict(self.trainee.state_dict())
        self.pending = False
        learner.count_update(data_version, self.norm)

    def _epochs(self, storage, rollout: int) -> float:
        """``algo.epochs`` passes of minibatch steps on the trainee; returns the last gradient norm."""
        learner, algo, net = self.learner, self.learner.algo, self.trainee
        data = self._flatten(storage)
        value_scale = observe_returns(net, data.returns)  # algo.normalize_returns (1.0 without)
        count = data.actions.shape[0]
        rng = np.random.default_rng([learner.spec.config.run.seed, PPO_STREAM, rollout])  # never from timing
        totals, drift, norm, steps = np.zeros(3), np.zeros(2), 0.0, 0
        for _ in range(algo.epochs):
            for index in minibatch_indices(count, algo.minibatches, rng):
                index = torch.from_numpy(index).to(learner.device)
                batch = PPOBatch(*(getattr(data, f)[index] for f in PPOBatch.__dataclass_fields__))
                net.zero_grad(set_to_none=True)
                loss, stats = ppo_loss(net, batch, algo.clip, algo.value_clip, algo.value_coef, algo.entropy_coef,
                                       algo.normalize_advantages, value_scale)
                terms = (stats.policy_loss, stats.value_loss, stats.entropy)
                self._check_finite(rollout, *terms)
                loss.backward()
                norm = learner.step(net, [p.grad if p.grad is not None else torch.zeros_like(p) for p in net.parameters()])
                totals += terms
                drift += (stats.clip_fraction, stats.approx_kl)
                steps += 1
        self._record(*(totals / steps))
        learner.stats[Stat.CLIP_FRACTION], learner.stats[Stat.APPROX_KL] = drift / steps
        return norm

    @torch.no_grad()
    def _flatten(self, storage) -> PPOBatch:
        """Advantages by GAE, as flat [N*T] rows, from the values the actors wrote while acting (CleanRL and
        stable-baselines3 take them so; forwarding every row again took a fifth of the Pong learner's time)
        and the trainee's values of what the rollout ends on: row T and the final observations of truncations."""
        learner, algo = self.learner, self.learner.algo
        steps = storage["action"].shape[1] - 1
        obs = torch.from_numpy(storage["obs"]).to(learner.device)
        acted = storage["value"][:, :steps]
        _, bootstrap = self.trainee(obs[:, steps])
        advantages = gae(storage["reward"][:, :steps], storage["done"][:, :steps],
                         np.concatenate([acted, bootstrap.float().cpu().numpy()[:, None]], axis=1),
                         algo.gamma, algo.gae_lambda,
                         final_values=final_values(self.trainee, storage, learner.device))  # time limits
        advantages = torch.from_numpy(advantages).to(learner.device)
        values = torch.from_numpy(np.ascontiguousarray(acted, dtype=np.float32)).to(learner.device)
        flat = lambda x: x.reshape(-1, *x.shape[2:])  # noqa: E731
        return PPOBatch(
            obs=flat(obs[:, :steps]),
            actions=flat(torch.from_numpy(storage["action"][:, :steps]).to(learner.device)),
            old_logp=flat(torch.from_numpy(storage["logp"][:, :steps]).to(learner.device)),
            old_values=flat(values),
            advantages=flat(advantages),
            returns=flat(advantages + values),
        )

    def state(self) -> dict:
        return {"trainee": self.trainee.state_dict() if self.overlap and self.pending else None}

    def load(self, state: dict) -> None:
        if not self.overlap:
            return
        trainee = state.get("trainee")
        self.pending = trainee is not None
        self.trainee.load_state_dict(trainee if trainee is not None else self.learner.model.state_dict())


def make_rule(learner) -> UpdateRule:
    """The rule of ``algo.name`` for the mode's policy lag (which mode takes which algorithm: ``fastrl.modes``)."""
    name, overlap = learner.algo.name, learner.mode.policy_lag == 1
    if name == "none":
        return Collect(learner)
    if name == "impala":
        return Impala(learner)
    if name == "ppo":
        return PPO(learner, overlap)
    return A2CDelayed(learner) if overlap else A2CSync(learner)
