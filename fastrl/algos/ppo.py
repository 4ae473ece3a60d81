"""PPO (Schulman et al. 2017): the clipped-surrogate loss and the rule that runs its epochs.

The storage's behaviour log-probs (written by the actor with the policy that acted) are the
``old`` policy of the ratio, so the same loss serves ``sync`` (ratio starts at 1) and ``hts``
(the learner starts one version ahead; the clipped ratio corrects for that lag).

Its own hyper-parameters are ``PPOOptions`` (``fastrl.algos.ppo_options``: the config's ``[algo.options]``, kept
apart only because the config imports no torch): the clip range and its schedule, the value clip, the KL target,
GAE's lambda, advantage normalisation. What it shares: the learning rate, discount and loss weights of ``[algo]``,
the minibatch plan (``algo.epochs``, ``algo.minibatches``: ``fastrl.algos.minibatches``, PQN's too), the returns
(``fastrl.algos.advantages``) and the rule protocol the learner drives (``fastrl.algos.update_rule``).

The rule: GAE advantages from the values the actors wrote and the trainee's bootstrap values,
then ``algo.epochs`` passes of ``algo.minibatches`` minibatches drawn from (run seed, rollout).
Lag 0 (sync): on D(θ_j) from θ_j. Lag 1 (hts): the epochs on D(θ_j) start from θ_{j+1}, the
parameters the envs act with next, in a ``trainee``; ``advance`` hands over the trainee's
parameters. A recurrent model (``model.lstm``) draws its minibatches by env, whole rollouts
replayed from their first state. Under torchrun the minibatches are drawn over every rank's rows
(``fastrl.ranks.cohort``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from fastrl.algos import minibatches, schedules
from fastrl.algos.advantages import returns_and_advantages
from fastrl.algos.minibatches import minibatch_indices  # noqa: F401 - PPO's, where its tests look for it
from fastrl.algos.ppo_options import PPOOptions
from fastrl.algos.update_rule import (
    Losses,
    Update,
    UpdateRule,
    checked_losses,
    gradients_of,
    live_weights,
    normalized,
    weighted_mean,
)
from fastrl.models.compiling import compiled_copy
from fastrl.models.distributions import CATEGORICAL, ActionDistribution
from fastrl.models.normalizer import observe_returns
from fastrl.models.recurrent import hidden_size, unroll

PPO_STREAM = 3  # seeding purpose of the minibatch permutations (see fastrl.seeding)
PPO_COLUMNS = ("policy_loss", "value_loss", "entropy", "clip_fraction", "approx_kl")  # the means it reports


@dataclass
class PPOBatch:
    """Flat [B, ...] tensors of one minibatch."""

    obs: torch.Tensor
    actions: torch.Tensor
    old_logp: torch.Tensor
    old_values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    # a multi-agent env's rows (the slots' live field): 1 where the agent acted (the policy terms), and where it
    # was present (the value term); None: every row counts
    acting: torch.Tensor | None = None
    present: torch.Tensor | None = None


@dataclass
class PPOStats:
    """A minibatch's loss terms and diagnostics: 0-dim tensors on the loss's device (read them with ``float``,
    or sum them on the device and read once: what the learner does on a GPU)."""

    policy_loss: torch.Tensor
    value_loss: torch.Tensor
    entropy: torch.Tensor
    clip_fraction: torch.Tensor
    approx_kl: torch.Tensor

    def stacked(self) -> torch.Tensor:
        """The five as one float64 vector, in the order of ``PPO_COLUMNS``."""
        terms = (self.policy_loss, self.value_loss, self.entropy, self.clip_fraction, self.approx_kl)
        return torch.stack(terms).double()


def ppo_loss(
    model: torch.nn.Module,
    batch: PPOBatch,
    clip: float,
    value_clip: float,
    value_coef: float,
    entropy_coef: float,
    normalize_advantages: bool = True,
    value_scale: float = 1.0,
    distribution: ActionDistribution = CATEGORICAL,
    outputs: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, PPOStats]:
    """Clipped surrogate + (optionally clipped) value loss - entropy bonus; ``value_clip`` 0 disables it.

    ``value_scale``: the running std of the returns when the model normalises them; value errors
    and the value clip range are measured in units of it (1: in returns). ``distribution`` reads the head
    (``fastrl.models.distributions``: logits, MultiDiscrete, Gaussian). ``outputs``: the batch's (head, value)
    rows already computed (a recurrent model replays whole sequences: ``fastrl.models.recurrent.unroll``)."""
    logits, values = model(batch.obs) if outputs is None else outputs
    logp, entropies = distribution.log_prob_entropy(logits, batch.actions)
    advantages = batch.advantages
    if normalize_advantages and advantages.numel() > 1:
        advantages = normalized(advantages, advantages, batch.acting)
    log_ratio = logp - batch.old_logp
    ratio = log_ratio.exp()
    surrogate = torch.min(ratio * advantages, ratio.clamp(1 - clip, 1 + clip) * advantages)
    acting = batch.acting
    policy_loss = -weighted_mean(surrogate, acting)
    value_error = ((values - batch.returns) / value_scale).pow(2)
    if value_clip > 0:
        reach = value_clip * value_scale
        clipped = batch.old_values + (values - batch.old_values).clamp(-reach, reach)
        value_error = torch.max(value_error, ((clipped - batch.returns) / value_scale).pow(2))
    value_loss = 0.5 * weighted_mean(value_error, batch.present)
    entropy = weighted_mean(entropies, acting)
    loss = policy_loss + value_coef * value_loss - entropy_coef * entropy
    with torch.no_grad():
        stats = PPOStats(
            policy_loss.detach(),
            value_loss.detach(),
            entropy.detach(),
            weighted_mean(((ratio - 1).abs() > clip).float(), acting),
            weighted_mean((ratio - 1) - log_ratio, acting),
        )
    return loss, stats


class PPO(UpdateRule):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.lag is None:
            raise ValueError("ppo runs in a barrier mode (sync: lag 0, hts: lag 1), not with a measured lag")
        self.options: PPOOptions = self.options if self.options is not None else PPOOptions()
        self.clip = self.options.clip  # until the first schedule (options.clip_schedule) moves it
        # hts: the trainee runs the epochs while ``model`` keeps the published θ
        self.trainee = compiled_copy(self.model) if self.lag else self.model
        self.pending = False  # the trainee holds epochs not yet handed over
        self.norm = 0.0  # gradient norm of the trainee's last step, counted when it is handed over

    def differentiated(self):
        return [self.trainee]

    @property
    def trained(self) -> torch.nn.Module:
        return self.trainee

    def schedule(self, frames, total_frames, share):
        """``options.clip_schedule``: the clip range of the next update's epochs, by frames learned."""
        self.clip = schedules.clip_range(self.options, frames, total_frames, share)

    def scheduled_metrics(self):
        """The clip range of the next update (``clip`` in the metrics): ``options.clip`` until the first schedule."""
        return {"clip": self.clip}

    def warm_up(self, storage):
        """A loss and backward on minibatches of the sizes the epochs draw, and the bootstrap forward, so a
        compiled model (``model.compile``) compiles its graphs here, in start-up, not in the first update."""
        steps = storage["action"].shape[1] - 1
        rows = lambda key: storage.tensor(key)[:, :steps].flatten(0, 1)  # noqa: E731
        algo, options = self.algo, self.options
        recurrent = hidden_size(self.trainee)
        count = rows("reward").shape[0]
        sizes = {count} if recurrent else {len(part) for part in np.array_split(np.arange(count), algo.minibatches)}
        for size in sorted(sizes):
            zeros = torch.zeros(size, device=self.device)
            batch = PPOBatch(rows("obs")[:size], rows("action")[:size], rows("logp")[:size], zeros, zeros, zeros)
            outputs = None
            if recurrent:
                sequences = Sequences.of(storage)
                outputs = sequences.replay(self.trainee, torch.arange(len(sequences.hidden0), device=self.device))
            loss, _ = ppo_loss(
                self.trainee,
                batch,
                options.clip,
                options.value_clip,
                algo.value_coef,
                algo.entropy_coef,
                options.normalize_advantages,
                distribution=self.distribution,
                outputs=outputs,
            )
            loss.backward()
        self.trainee.zero_grad(set_to_none=True)
        if not recurrent:
            with torch.no_grad():
                self.trainee(storage.tensor("obs")[:, steps])  # _flatten's bootstrap

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

    def _epochs(self, storage, rollout: int) -> tuple[Losses, float | torch.Tensor]:
        """``algo.epochs`` passes of minibatch steps on the trainee; its mean loss terms and last gradient norm.
        Nothing in the loop reads a number off the device unless the learner checks every step
        (``reliability.finite_checks``): the minibatches' rows are chosen up front and uploaded in one copy,
        the loss terms summed where they are computed."""
        algo, net = self.algo, self.trainee
        data = self._flatten(storage)
        sequences = Sequences.of(storage) if hidden_size(net) else None
        value_scale = observe_returns(net, data.returns, self.cohort.moments)  # algo.normalize_returns (1.0 without)
        count = data.actions.shape[0]
        first, total = self.cohort.rows(count)  # minibatches are drawn over every rank's rows
        advantages = self.cohort.gather(data.advantages)
        acting = None if data.acting is None else self.cohort.gather(data.acting)
        length = storage["action"].shape[1] - 1 if sequences is not None else 1  # rows drawn together: an env's
        seed = [self.seed, PPO_STREAM, rollout]  # never from timing
        plan = minibatches.plan(seed, algo.epochs, algo.minibatches, total // length, length, first, count, self.device)
        sums = torch.zeros(len(PPO_COLUMNS), dtype=torch.float64, device=self.device)
        norm: float | torch.Tensor = 0.0
        steps = measured = 0
        for index, mine in plan:
            if len(mine) == 0:  # none this time: the other ranks' gradients still need this rank's zeros
                if self._past_target_kl(None, 0):
                    break
                norm = self.step(net, [torch.zeros_like(p) for p in net.parameters()])
                continue
            batch = self._minibatch(data, mine, advantages[index], None if acting is None else acting[index])
            net.zero_grad(set_to_none=True)
            outputs = None if sequences is None else sequences.replay(net, mine[::length] // length)
            loss, stats = ppo_loss(
                net,
                batch,
                self.clip,
                self.options.value_clip,
                algo.value_coef,
                self.entropy_coef,
                False,
                value_scale,
                self.distribution,
                outputs,
            )
            if not self.deferred_checks:
                checked_losses(rollout, float(stats.policy_loss), float(stats.value_loss), float(stats.entropy))
            terms = stats.stacked()
            sums += terms
            measured += 1
            if self._past_target_kl(stats.approx_kl, len(mine)):
                break
            # weighted by this rank's share of the minibatch: the ranks' mean gradient is the whole minibatch's
            (loss * (len(mine) * self.cohort.ranks / len(index))).backward()
            norm = self.step(net, gradients_of(net), terms[:3])  # the terms too: checked there when deferred
            steps += 1
        losses = dict(zip(PPO_COLUMNS, (sums / max(measured, 1)).tolist()))
        losses["epochs_done"] = steps / algo.minibatches
        return losses, norm

    def _past_target_kl(self, approx_kl: torch.Tensor | None, rows: int) -> bool:
        """``options.target_kl``: whether this minibatch's KL from the acting policy, over every rank's rows (each
        rank's mean weighted by its rows, so all ranks decide alike), is past 1.5 x the target. Reads a number off
        the device, so only when the key is set."""
        if not self.options.target_kl:
            return False
        mine = torch.zeros(2, dtype=torch.float64, device=self.device)
        if approx_kl is not None:
            mine[0] = approx_kl.double() * rows
            mine[1] = rows
        kl, count = self.cohort.gather(mine.unsqueeze(0)).sum(0).tolist()
        return kl / max(count, 1.0) > 1.5 * self.options.target_kl

    def _minibatch(
        self, data: PPOBatch, mine: torch.Tensor, advantages: torch.Tensor, acting: torch.Tensor | None
    ) -> PPOBatch:
        """This rank's rows ``mine`` of a minibatch whose every rank's advantages are ``advantages``: those
        normalised by the whole minibatch's mean and std (``options.normalize_advantages``; over the rows whose agent
        acted, ``acting``, in a multi-agent env)."""
        fields = (getattr(data, f) for f in PPOBatch.__dataclass_fields__)
        batch = PPOBatch(*(None if field is None else field[mine] for field in fields))
        if self.options.normalize_advantages and advantages.numel() > 1:
            batch.advantages = normalized(batch.advantages, advantages, acting)
        return batch

    @torch.no_grad()
    def _flatten(self, storage) -> PPOBatch:
        """Advantages by GAE, as flat [N*T] rows, from the values the actors wrote while acting (CleanRL and
        stable-baselines3 take them so; forwarding every row again took a fifth of the Pong learner's time)
        and the trainee's values of what the rollout ends on: row T and the final observations of truncations."""
        algo, device = self.algo, self.device
        steps = storage["action"].shape[1] - 1
        obs = storage.tensor("obs")
        acted = storage["value"][:, :steps]
        after = None
        if hidden_size(self.trainee):  # the state at row T and after each truncation: the whole rollout replayed
            _, values, after = unroll(self.trainee, obs, storage.tensor("hidden")[:, 0], storage.tensor("done"))
            bootstrap = values[:, steps]
        else:
            _, bootstrap = self.trainee(obs[:, steps])
        returns, advantages = returns_and_advantages(
            self.trainee,
            storage,
            algo.gamma,
            self.options.gae_lambda,
            values=np.concatenate([acted, bootstrap.float().cpu().numpy()[:, None]], axis=1),
            after=after,  # time limits: a recurrent trainee values final observations with the state after them
            device=device,
        )
        values = storage.tensor("value")[:, :steps].float()
        flat = lambda x: x.reshape(-1, *x.shape[2:])  # noqa: E731
        acting, present = live_weights(storage, steps)
        return PPOBatch(
            obs=flat(obs[:, :steps]),
            actions=flat(storage.tensor("action")[:, :steps]),
            old_logp=flat(storage.tensor("logp")[:, :steps]),
            old_values=flat(values),
            advantages=flat(advantages),
            returns=flat(returns),
            acting=None if acting is None else flat(acting),
            present=None if present is None else flat(present),
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
    def of(cls, storage) -> Sequences:
        steps = storage["action"].shape[1] - 1
        return cls(storage.tensor("obs")[:, :steps], storage.tensor("hidden")[:, 0], storage.tensor("done")[:, :steps])

    def replay(self, net: torch.nn.Module, envs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(head, value) of these envs' rows, env-major: the order of ``minibatches.whole``'s row indices."""
        head, value, _ = unroll(net, self.obs[envs], self.hidden0[envs], self.done[envs])
        return head.flatten(0, 1), value.flatten(0, 1)
