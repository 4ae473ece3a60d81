"""The self-play pool's row roles (``fastrl.sampling.row_roles``, ``selfplay.opponents = "pool"``): in every env one
seat learns and the others are played by the snapshot the learner drew for that env and rollout (its
``selfplay_opponents`` array, per rollout parity), the random player's zero slot or the scripted player, which each
actor builds itself; no loss reads the other seats."""

from __future__ import annotations

import numpy as np
import torch

from fastrl.layers.selfplay.pool import OPPONENTS, scripted_slot
from fastrl.models.scripted import build_scripted
from fastrl.partition import opponent_rows


class PoolRoles:
    def __init__(self, spec, buffers, device: torch.device | None):
        options = spec.config.selfplay
        self.agents = spec.env_unit
        self.opponent = opponent_rows(spec.envs, self.agents)
        self.table = buffers.layer_array(OPPONENTS)  # [2, games]: each env's pool slot in each parity's rollouts
        self.scripted_slot, self.scripted = -1, None
        if device is not None and options.scripted_share > 0:  # built where it plays: the actors
            self.scripted_slot = scripted_slot(options, spec.mode.run_ahead)
            self.scripted = build_scripted(options.scripted, spec.env_info).to(device)

    def unlearned_rows(self) -> np.ndarray:
        return self.opponent

    def slots(self, envs: np.ndarray, rows: np.ndarray, version: int) -> np.ndarray:
        played = self.opponent[envs]
        slots = np.full(len(envs), -1, np.int64)
        slots[played] = self.table[version % 2][envs[played] // self.agents]
        return slots

    def model(self, slot: int) -> torch.nn.Module | None:
        return self.scripted if slot == self.scripted_slot else None
