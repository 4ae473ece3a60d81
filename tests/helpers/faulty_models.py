"""A policy that hangs on purpose in the learner: model ids "tests.helpers.faulty_models:<factory>"."""
import time

import torch

from fastrl.models.mlp import MLPPolicy


class HangsInLearner(MLPPolicy):
    """Hangs at its ``at``-th forward with gradients on: only the learner takes gradients (the actor
    runs under inference mode), and its warm-up is the first such forward."""

    def __init__(self, at: int, **kwargs):
        super().__init__(**kwargs)
        self.at, self.grad_forwards = at, 0

    def forward(self, obs):
        if torch.is_grad_enabled():
            self.grad_forwards += 1
            if self.grad_forwards == self.at:
                time.sleep(3600)
        return super().forward(obs)


def hangs_in_learner(obs_shape, n_actions, at: int = 5):
    return HangsInLearner(at, obs_shape=obs_shape, n_actions=n_actions)
