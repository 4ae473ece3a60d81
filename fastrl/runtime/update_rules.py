"""Update rules: what the learner does with the storage of rollout j at its barrier.

One small strategy per (algorithm, mode) so the learner's loop stays the same for all:

- ``A2CSync``     the gradient of D(θ_j) at θ_j gives θ_{j+1}, then the envs go on (lag 0).
- ``A2CDelayed``  HTS-RL eq. 6: θ_{j+1} = θ_j − η g_{j−1} is published at once, g_j is taken at
                  θ_j on D(θ_j) while the envs fill the other storage (lag 1).
- ``PPO``         epochs of clipped-surrogate minibatches. ``sync``: on D(θ_j) from θ_j, then
                  the envs go on (lag 0). ``hts``: the envs are released with the parameters
                  the previous epochs produced, and the epochs on D(θ_j) start from those very
                  parameters θ_{j+1} while the envs fill the other storage; their result is
                  published at the next barrier (lag 1, the clipped ratio absorbs it).
- ``Impala``      async: no barrier; ``learn`` takes one gathered batch of full slots (V-trace
                  corrects the measured lag).
- ``Collect``     no learning (benchmarks): same barriers and versions.

``barrier(storage, j, last, release)`` calls ``release()`` exactly once, when the envs may
start rollout j+1, and returns the resume state to checkpoint when it differs from the
learner's state after the barrier (the final hts barrier), else None.
"""
from __future__ import annotations

import copy
import math
from typing import Callable

import numpy as np
import torch

from csrc_free_kernels.gae import gae
from fastrl.algos.a2c import a2c_loss, forward_storage, make_optimizer
from fastrl.algos.impala import impala_loss
from fastrl.algos.ppo import PPOBatch, minibatch_indices, ppo_loss
from fastrl.buffers.control import Stat
from fastrl.runtime.faults import NonFiniteError

Release = Callable[[], None]
PPO_STREAM = 3  # seeding purpose of the minibatch permutations (see fastrl.seeding)


class UpdateRule:
    def __init__(self, learner) -> None:
        self.learner = learner

    def barrier(self, storage: dict[str, np.ndarray], rollout: int, last: bool, release: Release) -> dict | None:
        raise NotImplementedError

    def state(self) -> dict:
        """Rule state beyond θ and the optimizer that a resumed run needs."""
        return {}

    def load(self, state: dict) -> None:
        pass

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
    def barrier(self, storage, rollout, last, release):
        self.learner.version += 1
        release()
        return None

    def learn(self, storage, batch: int) -> float:
        return 0.0


class Impala(UpdateRule):
    """One IMPALA step per batch; the async learner counts the update and its measured lag."""

    def learn(self, storage, batch: int) -> float:
        learner, net = self.learner, self.learner.model
        net.zero_grad(set_to_none=True)
        loss, stats = impala_loss(net, storage, learner.algo, learner.device)
        terms = (stats.policy_loss, stats.value_loss, stats.entropy)
        self._check_finite(batch, *terms)
        loss.backward()
        self._record(*terms)
        return learner.step(net, [p.grad if p.grad is not None else torch.zeros_like(p) for p in net.parameters()])


class A2CSync(UpdateRule):
    def barrier(self, storage, rollout, last, release):
        self.learner.apply(self._gradients(self.learner.model, storage, rollout), data_version=rollout)
        release()
        return None

    def _gradients(self, net: torch.nn.Module, storage, rollout: int) -> list[torch.Tensor]:
        net.zero_grad(set_to_none=True)
        loss, stats = a2c_loss(net, storage, self.learner.algo, self.learner.device)
        terms = (stats.policy_loss, stats.value_loss, stats.entropy)
        self._check_finite(rollout, *terms)
        loss.backward()
        self._record(*terms)
        return [p.grad if p.grad is not None else torch.zeros_like(p) for p in net.parameters()]


class A2CDelayed(A2CSync):
    def __init__(self, learner) -> None:
        super().__init__(learner)
        self.behaviour = copy.deepcopy(learner.model)  # holds θ_j while its gradient is taken
        self.pending_grads: list[torch.Tensor] | None = None

    def barrier(self, storage, rollout, last, release):
        learner = self.learner
        self.behaviour.load_state_dict(learner.model.state_dict())  # θ_j, before it moves on
        grads, self.pending_grads = self.pending_grads, None  # consumed even if it fails
        if grads is not None:
            learner.apply(grads, data_version=rollout - 1)
        else:
            learner.version += 1  # θ_1 = θ_0: there is no D(θ_{-1}) to learn from
        release()
        self.pending_grads = self._gradients(self.behaviour, storage, rollout)
        if not last:
            return None
        resume_state = learner.state(copied=True)  # a resumed run goes on from before the last step
        grads, self.pending_grads = self.pending_grads, None
        learner.apply(grads, data_version=rollout)
        return resume_state

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

    def barrier(self, storage, rollout, last, release):
        if not self.overlap:
            self.learner.check_lag(rollout)
            norm = self._epochs(storage, rollout)
            self.learner.count_update(rollout, norm)
            release()
            return None
        if self.pending:
            self._publish_trainee(data_version=rollout - 1)
        else:
            self.learner.version += 1  # θ_1 = θ_0, as in A2C's delayed gradient
        release()
        self.norm = self._epochs(storage, rollout)  # from θ_{j+1}, the parameters just released
        self.pending = True
        if not last:
            return None
        resume_state = self.learner.state(copied=True)
        self._publish_trainee(data_version=rollout)
        return resume_state

    def _publish_trainee(self, data_version: int) -> None:
        self.learner.check_lag(data_version)
        self.learner.model.load_state_dict(self.trainee.state_dict())
        self.pending = False
        self.learner.count_update(data_version, self.norm)

    def _epochs(self, storage, rollout: int) -> float:
        """``algo.epochs`` passes of minibatch steps on the trainee; returns the last gradient norm."""
        learner, algo, net = self.learner, self.learner.algo, self.trainee
        data = self._flatten(storage)
        count = data.actions.shape[0]
        rng = np.random.default_rng([learner.spec.config.run.seed, PPO_STREAM, rollout])  # never from timing
        totals, norm, steps = np.zeros(3), 0.0, 0
        for _ in range(algo.epochs):
            for index in minibatch_indices(count, algo.minibatches, rng):
                index = torch.from_numpy(index).to(learner.device)
                batch = PPOBatch(*(getattr(data, f)[index] for f in PPOBatch.__dataclass_fields__))
                net.zero_grad(set_to_none=True)
                loss, stats = ppo_loss(net, batch, algo.clip, algo.value_clip, algo.value_coef, algo.entropy_coef,
                                       algo.normalize_advantages)
                terms = (stats.policy_loss, stats.value_loss, stats.entropy)
                self._check_finite(rollout, *terms)
                loss.backward()
                norm = learner.step(net, [p.grad if p.grad is not None else torch.zeros_like(p) for p in net.parameters()])
                totals += terms
                steps += 1
        self._record(*(totals / steps))
        return norm

    @torch.no_grad()
    def _flatten(self, storage) -> PPOBatch:
        """Advantages by GAE from the trainee's own values (bootstrap included), as flat [N*T] rows."""
        learner, algo = self.learner, self.learner.algo
        steps = storage["action"].shape[1] - 1
        obs = torch.from_numpy(storage["obs"]).to(learner.device)
        _, values = forward_storage(self.trainee, obs)
        advantages = gae(storage["reward"][:, :steps], storage["done"][:, :steps],
                         values.float().cpu().numpy(), algo.gamma, algo.gae_lambda)
        advantages = torch.from_numpy(advantages).to(learner.device)
        values = values[:, :steps]
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
    name, overlap = learner.algo.name, learner.mode.overlap
    if name == "none":
        return Collect(learner)
    if name == "impala":
        return Impala(learner)
    if name == "ppo":
        return PPO(learner, overlap)
    return A2CDelayed(learner) if overlap else A2CSync(learner)
