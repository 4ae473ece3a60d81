"""A learner that records what each barrier learned from and acted with, and a linear policy whose
gradient a test can derive by hand (model id ``tests.helpers.recording:linear_policy``)."""
import copy

import torch

from fastrl.learning.learner import Learner


class LinearPolicy(torch.nn.Module):
    def __init__(self, obs_shape, n_actions):
        super().__init__()
        self.pi = torch.nn.Linear(obs_shape[0], n_actions)
        self.v = torch.nn.Linear(obs_shape[0], 1)

    def forward(self, obs):
        x = obs.float()
        return self.pi(x), self.v(x).squeeze(-1)


def linear_policy(obs_shape, n_actions):
    return LinearPolicy(obs_shape, n_actions)


class RecordingLearner(Learner):
    """Keeps a copy of each rollout's data and of the published parameters it acted with, at each barrier.

    The envs run ahead, so at barrier j the learner's model is already θ_{j+1}: θ_j is read back
    from the weight slot rollout j's actors used, which also checks that slot was not overwritten."""

    records: list = []

    def _barrier(self):
        storage = self.buffers.slots.storage(self.spec.slot_map.storage_slot(self.rollout), self.spec.envs)
        acted = copy.deepcopy(self.model)
        weights = self.weights[self.rollout % len(self.weights)]
        assert weights.snapshot_into(acted) == self.rollout
        params = {k: v.detach().double().numpy().copy() for k, v in acted.state_dict().items()}
        RecordingLearner.records.append(({k: v.copy() for k, v in storage.items()}, params))
        super()._barrier()
