"""PQN (Gallici et al. 2024, "Simplifying Deep Temporal Difference Learning"): Q-learning from many parallel
envs without a replay buffer or a target network. Each rollout's Q(λ) targets, then a few epochs of minibatch
regression of Q(s, a) onto them; LayerNorm in the network keeps the bootstrapped regression stable; actions
are ε-greedy.

Written as a plug-in from another package would be, through the plug-in point alone: its rule, its action
sampler and its network live here, its options beside it (``fastrl.algos.pqn_options``: the config layer reads
them without torch), and ``fastrl.algos.registry`` holds its one registration.
What it inherits without knowing how: executors' uniforms and fixed micro-batches (its runs are
bit-identical across layouts), exact resume, the fault handling, the metrics, export.

- **Acting**: ε-greedy from the executor's own uniform u (one per step, ``csrc_free_kernels.epsilon_greedy``):
  explore iff u < ε, and then action ⌊u/ε · A⌋; ε moves linearly from ``epsilon_start`` to ``epsilon_final``
  over ``epsilon_anneal_frames`` (0: a tenth of ``run.total_frames``, CleanRL's ``exploration_fraction``), by
  the acting weights' version, so actors and learner agree on it without a message. The slot's ``value``
  column holds max_a Q(s, a) of the acting weights.
- **Targets**: G_t = r_t + γ (1 − d_t) [λ G_{t+1} + (1 − λ) max_a Q(s_{t+1}, a)], bootstrapped at row T from
  the learner's current network (and from the final observation of a time-limit truncation), which is
  GAE(λ) over the stored max-Q values plus those values: the project's tested GAE kernel computes it.
- **Learning**: ``algo.epochs`` passes of ``algo.minibatches`` minibatches of (Q(s, a) − G)², drawn as PPO's
  are (``fastrl.algos.minibatches``), every step through the learner's checked optimizer step.

CleanRL's ``pqn_atari_envpool.py`` is the reference its maths was checked against (its targets do not stop
the λ-return at an episode's end; these do, as the paper's code does).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from csrc_free_kernels.epsilon_greedy import MASKED_BELOW, epsilon_greedy, epsilon_greedy_rows_kernel
from fastrl.algos import minibatches
from fastrl.algos.advantages import returns_and_advantages
from fastrl.algos.pqn_options import PQNOptions
from fastrl.algos.schedules import FrameClock
from fastrl.algos.update_rule import Update, UpdateRule, checked_losses, gradients_of
from fastrl.envs.actions import DISCRETE
from fastrl.models.cnn import RELU_GAIN, NatureCNN, conv_stack, flat_size
from fastrl.models.distributions import ActionDistribution
from fastrl.models.mlp import init_orthogonal
from fastrl.models.normalizer import obs_to_float

PQN_STREAM = 7  # seeding purpose of PQN's minibatch permutations (see fastrl.seeding)


def epsilon_at(options: PQNOptions, clock: FrameClock, version: int) -> float:
    """ε of the weights of ``version``: where actors act with them and the learner reports it."""
    anneal = options.epsilon_anneal_frames or max(clock.total_frames // 10, 1)
    return clock.annealed(options.epsilon_start, options.epsilon_final, anneal, version)


# ---------------------------------------------------------------- acting


class EpsilonGreedy(ActionDistribution):
    """The actors' sampler: the head is Q-values; ε-greedy from the row's own uniform, ε by the version."""

    def __init__(self, spec, options: PQNOptions, clock: FrameClock):
        super().__init__(spec)
        self.options, self.clock = options, clock

    def sample_rows(self, head, values, version, rows, u, action, logp, value, stamp):
        epsilon = epsilon_at(self.options, self.clock, version)
        epsilon_greedy_rows_kernel(head, epsilon, version, rows, u, action, logp, value, stamp)

    def sample(self, head, u):
        return epsilon_greedy(head, u, self.options.epsilon_final)

    def greedy(self, head):
        return head.argmax(-1)

    def log_prob_entropy(self, head, actions):
        """Of the final ε-greedy policy (evaluation's): greedy gets 1 − ε + ε/K, every other allowed action ε/K
        (K allowed by the action mask; all A without one), a masked one 0."""
        epsilon = self.options.epsilon_final
        allowed = head > MASKED_BELOW
        allowed = allowed | ~allowed.any(-1, keepdim=True)  # a mask that allows nothing: every action
        spread = epsilon / allowed.sum(-1, keepdim=True).to(head.dtype)
        probs = torch.where(allowed, spread, 0.0).scatter_add(
            -1, head.argmax(-1, keepdim=True), torch.full_like(head[..., :1], 1.0 - epsilon)
        )
        logs = probs.clamp_min(torch.finfo(probs.dtype).tiny).log()  # 0 log 0 = 0 for a masked action
        return logs.gather(-1, actions.unsqueeze(-1)).squeeze(-1), -(probs * logs).sum(-1)


def epsilon_greedy_sampler(spec, options: PQNOptions) -> EpsilonGreedy:
    """The sampler of a run (``spec``): its Discrete actions, its learner's frame clock."""
    action = spec.env_info.action
    if action is None or action.kind != DISCRETE:
        kind = action.kind if action is not None else None
        raise ValueError(f"algo.name = 'pqn' learns Q-values of Discrete actions; this env's actions are {kind!r}")
    return EpsilonGreedy(action, options, FrameClock.of(spec))


# ---------------------------------------------------------------- the network


class QNetwork(nn.Module):
    """Q-values with LayerNorm after every hidden layer: the Nature CNN's convolutions and FC 512 for image
    stacks, ``hidden`` layers for vectors; outputs ``(q [B, A], max_a q [B])``, the policy interface."""

    def __init__(self, obs_shape: Sequence[int], n_actions: int, hidden: Sequence[int] = (256, 256)):
        super().__init__()
        shape = tuple(int(s) for s in obs_shape)
        self.image = len(shape) == 3
        self.body = _image_body(shape) if self.image else _vector_body(shape, hidden)
        width = self.body(torch.zeros((1, *shape))).shape[1]
        self.q = init_orthogonal(nn.Linear(width, n_actions), RELU_GAIN)
        self.bf16 = False

    def set_precision(self, precision: str) -> None:
        """``"fp32"`` or ``"bf16"`` (the body under bfloat16 autocast; Q-values in float32), as the built-in CNNs."""
        if precision not in ("fp32", "bf16"):
            raise ValueError(f"precision must be 'fp32' or 'bf16', got {precision!r}")
        self.bf16 = precision == "bf16"

    def forward(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        x = obs_to_float(obs)  # uint8 frames / 255
        with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            h = self.body(x)
        q = self.q(h.float())
        return q, q.max(-1).values


def _image_body(shape: tuple[int, ...]) -> nn.Sequential:
    features = conv_stack(shape, NatureCNN.CONVS, layer_norm=True)
    flat = flat_size("QNetwork", features, shape)  # a ValueError naming the shape if the convolutions do not fit
    return nn.Sequential(
        *features, nn.Flatten(), init_orthogonal(nn.Linear(flat, 512), RELU_GAIN), nn.LayerNorm(512), nn.ReLU()
    )


def _vector_body(shape: tuple[int, ...], hidden: Sequence[int]) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Flatten()]
    width = int(np.prod(shape))
    for size in hidden:
        layers += [init_orthogonal(nn.Linear(width, int(size)), RELU_GAIN), nn.LayerNorm(int(size)), nn.ReLU()]
        width = int(size)
    return nn.Sequential(*layers)


def q_network(obs_shape: Sequence[int], n_actions: int, hidden: Sequence[int] = (256, 256)) -> QNetwork:
    """``model.name = "fastrl.algos.pqn:q_network"`` (what ``"auto"`` builds for PQN); ``model.kwargs``:
    ``hidden``, the vector body's layer sizes."""
    return QNetwork(obs_shape, n_actions, hidden)


# ---------------------------------------------------------------- learning


class PQN(UpdateRule):
    """Q(λ) targets from the rollout, then epochs of minibatch regression, in place on θ (lag 0: sync)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.lag != 0:
            raise ValueError(f"pqn learns in sync mode (policy lag 0), not at lag {self.lag!r}")
        self.options = self.options if self.options is not None else PQNOptions()
        self.pending = False
        self.norm: float | Tensor = 0.0

    def differentiated(self):
        return [self.model]

    def warm_up(self, storage):
        """A loss and backward on minibatches of the epochs' sizes, and the bootstrap forward (compiling there)."""
        steps = storage["action"].shape[1] - 1
        obs = storage.tensor("obs")[:, :steps].flatten(0, 1)
        actions = storage.tensor("action")[:, :steps].flatten(0, 1)
        count = obs.shape[0]
        for size in sorted({len(part) for part in np.array_split(np.arange(count), self.algo.minibatches)}):
            _td_loss(self.model, obs[:size], actions[:size], torch.zeros(size, device=self.device))[0].backward()
        self.model.zero_grad(set_to_none=True)
        with torch.no_grad():
            self.model(storage.tensor("obs")[:, steps])

    def learn(self, storage, rollout):
        self._observe(self.model, storage)  # a network with running observation statistics moves them once
        obs, actions, targets = self._targets(storage)
        count = actions.shape[0]
        first, total = self.cohort.rows(count)
        seed = [self.seed, PQN_STREAM, rollout]  # never from timing
        plan = minibatches.plan(seed, self.algo.epochs, self.algo.minibatches, total, 1, first, count, self.device)
        sums = torch.zeros(2, dtype=torch.float64, device=self.device)
        zero = torch.zeros((), device=self.device)
        steps = 0
        for index, mine in plan:
            if len(mine) == 0:  # none this time: the other ranks' gradients still need this rank's zeros
                self.norm = self.step(self.model, [torch.zeros_like(p) for p in self.model.parameters()])
                continue
            self.model.zero_grad(set_to_none=True)
            loss, chosen = _td_loss(self.model, obs[mine], actions[mine], targets[mine])
            if not self.deferred_checks:
                checked_losses(rollout, 0.0, float(loss.detach()), 0.0)
            (loss * (len(mine) * self.cohort.ranks / len(index))).backward()
            terms = torch.stack([zero, loss.detach(), zero])
            self.norm = self.step(self.model, gradients_of(self.model), terms)
            sums += torch.stack([loss.detach(), chosen.detach().mean()]).double()
            steps += 1
        self.pending = True
        td_loss, q_mean = (sums / max(steps, 1)).tolist()
        epsilon = epsilon_at(self.options, self.clock, rollout) if self.clock is not None else float("nan")
        return {
            "policy_loss": 0.0,
            "value_loss": td_loss,
            "entropy": 0.0,
            "q_mean": q_mean,
            "epsilon": epsilon,
        }

    @torch.no_grad()
    def _targets(self, storage) -> tuple[Tensor, Tensor, Tensor]:
        """Flat [N*T] observations, actions and Q(λ) targets of the storage."""
        steps = storage["action"].shape[1] - 1
        obs = storage.tensor("obs")
        acted = np.ascontiguousarray(storage["value"][:, :steps], np.float32)  # max Q of the acting weights
        _, bootstrap = self.model(obs[:, steps])
        targets, _ = returns_and_advantages(  # GAE(λ) + V: the Q(λ) targets, time limits bootstrapped
            self.model,
            storage,
            self.algo.gamma,
            self.options.q_lambda,
            values=np.concatenate([acted, bootstrap.float().cpu().numpy()[:, None]], axis=1),
            device=self.device,
        )
        flat = lambda x: x.reshape(-1, *x.shape[2:])  # noqa: E731
        return flat(obs[:, :steps]), flat(storage.tensor("action")[:, :steps]), flat(targets)

    def advance(self):
        if not self.pending:
            return None
        self.pending = False
        return Update(0, params=None, norm=self.norm)


def _td_loss(model: nn.Module, obs: Tensor, actions: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
    """Mean squared error of Q(s, a) against the targets, and the Q(s, a) of the minibatch."""
    q, _ = model(obs)
    chosen = q.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
    return F.mse_loss(chosen, targets), chosen
