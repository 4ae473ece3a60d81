"""Action distributions: how a policy head becomes actions, log-probs and entropies.

One object per kind of action space (``fastrl.envs.actions.ActionSpec``), used everywhere a head
is read, so sampling, learning and evaluation cannot disagree:

- the actor's ``sample_rows``: the numba kernel that samples each row from its executor-supplied
  uniform numbers and writes action, logp, value and version into the slots;
- the losses' ``log_prob_entropy``: log pi(a|s) of the stored actions and the entropy, in torch;
- ``fastrl eval``'s ``sample`` and ``greedy`` (argmax; a Gaussian's mean).

``Categorical`` computes exactly what the engine did before there were other kinds (one
log-softmax shared by the log-prob and the entropy; the same sampling kernel), so discrete runs
keep their bits.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from csrc_free_kernels.action_sampling import (
    sample_from_u,
    sample_gaussian,
    sample_gaussian_rows_kernel,
    sample_multi,
    sample_multi_rows_kernel,
    sample_rows_kernel,
)
from fastrl.envs.actions import BOX, DISCRETE, MULTI_DISCRETE, ActionSpec

HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


class ActionDistribution:
    """What every kind provides; ``head`` is the model's first output, ``[..., spec.head_size]``."""

    def __init__(self, spec: ActionSpec):
        self.spec = spec

    def log_prob_entropy(self, head: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(log pi(actions), entropy), each shaped as the head without its last axis."""
        raise NotImplementedError

    def greedy(self, head: torch.Tensor) -> torch.Tensor:
        """The most likely action of each row (a Gaussian's mean, unclipped)."""
        raise NotImplementedError

    def sample_rows(
        self,
        head: np.ndarray,
        values: np.ndarray,
        version: int,
        rows: np.ndarray,
        u: np.ndarray,
        action: np.ndarray,
        logp: np.ndarray,
        value: np.ndarray,
        stamp: np.ndarray,
    ) -> None:
        """The actor's write-back: row ``rows[b]`` of the slot columns from ``head[b]`` and its own ``u``."""
        raise NotImplementedError

    def sample(self, head: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(actions, logp) of a batch of heads with its uniforms (``u`` shaped as the slot's: [B] or [B, D])."""
        raise NotImplementedError


class Categorical(ActionDistribution):
    def log_prob_entropy(self, head, actions):
        log_probs = F.log_softmax(head, dim=-1)
        chosen = log_probs.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
        return chosen, -(log_probs.exp() * log_probs).sum(-1)

    def greedy(self, head):
        return head.argmax(-1)

    def sample_rows(self, head, values, version, rows, u, action, logp, value, stamp):
        sample_rows_kernel(head, values, version, rows, u, action, logp, value, stamp)

    def sample(self, head, u):
        batch = head.shape[0]
        return sample_from_u(head, u, np.empty(batch, np.int64), np.empty(batch, np.float32))


class MultiCategorical(ActionDistribution):
    """Independent categoricals, one per dimension, their logits side by side; log-probs and entropies add."""

    def __init__(self, spec: ActionSpec):
        super().__init__(spec)
        self.nvec = np.asarray(spec.nvec, np.int64)

    def _blocks(self, head):
        return head.split(list(self.spec.nvec), dim=-1)

    def log_prob_entropy(self, head, actions):
        logp, entropy = 0, 0
        for d, block in enumerate(self._blocks(head)):
            chosen, spread = CATEGORICAL.log_prob_entropy(block, actions[..., d])
            logp, entropy = logp + chosen, entropy + spread
        return logp, entropy

    def greedy(self, head):
        return torch.stack([block.argmax(-1) for block in self._blocks(head)], dim=-1)

    def sample_rows(self, head, values, version, rows, u, action, logp, value, stamp):
        sample_multi_rows_kernel(head, self.nvec, values, version, rows, u, action, logp, value, stamp)

    def sample(self, head, u):
        batch = head.shape[0]
        return sample_multi(
            head, self.nvec, u, np.empty((batch, self.spec.dims), np.int64), np.empty(batch, np.float32)
        )


class DiagonalGaussian(ActionDistribution):
    """Independent normals per dimension; the head is D means then D log-stds (the built-in models'
    log-stds are one state-independent parameter vector, ``fastrl.models.heads.GaussianHead``)."""

    def _split(self, head):
        dims = self.spec.dims
        return head[..., :dims], head[..., dims:]

    def log_prob_entropy(self, head, actions):
        mean, log_std = self._split(head)
        z = (actions - mean) / log_std.exp()
        logp = (-0.5 * z.pow(2) - log_std - HALF_LOG_2PI).sum(-1)
        return logp, (log_std + 0.5 + HALF_LOG_2PI).sum(-1)

    def greedy(self, head):
        return self._split(head)[0]

    def sample_rows(self, head, values, version, rows, u, action, logp, value, stamp):
        sample_gaussian_rows_kernel(head, values, version, rows, u, action, logp, value, stamp)

    def sample(self, head, u):
        batch = head.shape[0]
        return sample_gaussian(head, u, np.empty((batch, self.spec.dims), np.float32), np.empty(batch, np.float32))


CATEGORICAL = Categorical(ActionSpec.discrete(1))  # the losses' default: its methods never read the spec


def distribution_for(spec: ActionSpec | None) -> ActionDistribution:
    """The distribution of an action space (None: Discrete, the losses' default)."""
    if spec is None or spec.kind == DISCRETE:
        return Categorical(spec) if spec is not None else CATEGORICAL
    if spec.kind == MULTI_DISCRETE:
        return MultiCategorical(spec)
    if spec.kind == BOX:
        return DiagonalGaussian(spec)
    raise ValueError(f"no action distribution for {spec.kind!r}")
