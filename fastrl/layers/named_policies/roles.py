"""The named policies' row roles (``fastrl.sampling.row_roles``, ``multiagent.policies``): each agent's policy plays
its rows for the whole run, every policy but the run's from its players' slot; a frozen policy's rows are read by no
loss."""

from __future__ import annotations

import numpy as np
import torch

from fastrl.layers.named_policies.policies import policy_map


class NamedRoles:
    def __init__(self, spec, buffers, device: torch.device | None):
        named = policy_map(spec.config, spec.env_info.agent_names)
        assert named is not None, "named policies' roles apply only where multiagent.policies maps agents"
        self.frozen = named.frozen_rows(spec.envs)
        # each row's slot per rollout parity (hts publishes every other learning policy once for each)
        self.row_slots = [named.row_slots(spec.envs, parity) for parity in (0, 1)]

    def unlearned_rows(self) -> np.ndarray:
        return self.frozen

    def slots(self, envs: np.ndarray, rows: np.ndarray, version: int) -> np.ndarray:
        return self.row_slots[version % 2][envs]

    def model(self, slot: int) -> torch.nn.Module | None:
        return None
