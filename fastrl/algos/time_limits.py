"""Time limits are not terminations (Pardo et al. 2018): V of each truncated episode's final observation.

An episode cut by a time limit (gymnasium's ``truncated``, the Atari frame cap) did not reach a
terminal state, so its return bootstraps, r_t + γ V(final observation), as a rollout cut at
row T bootstraps from V(obs_T). The reset writes the next episode's first observation over the
final one, so the executor keeps the final observation of a truncated step in the slot's
``final_obs`` row (``fastrl.buffers.slots``) and the learner values it here, with the same
parameters that value row T. A rule asks for its returns and advantages with these values in
(``fastrl.algos.advantages.returns_and_advantages``); V-trace (IMPALA) takes them directly.

Why the observation and not its value (an actor forward before the reset, written as a
per-step ``trunc_value``): that would save the observation memory but add a request/answer
round to the executor/actor protocol and to sync's lockstep counting, and it would give the
behaviour parameters' value, which is not what the learner bootstraps row T with in hts PPO
(the trainee, a version ahead) or IMPALA (the learner's current θ). Here every mode and
algorithm bootstraps both kinds of cut alike, determinism needs nothing new (the rows and their
order come from the data), and the cost is one obs-sized field in /dev/shm (counted by the
size check like every field) plus a forward of the few truncated rows, none when a storage has
no truncation.
"""

from __future__ import annotations

import numpy as np
import torch

from csrc_free_kernels.step_end import TRUNCATED


@torch.no_grad()
def final_values(
    model: torch.nn.Module, storage: dict[str, np.ndarray], device: torch.device, after: torch.Tensor | None = None
) -> np.ndarray:
    """float32 [N, T]: V(final_obs) at the TRUNCATED steps of a ``[N, T + 1, ...]`` storage, 0 elsewhere.
    ``after``: a recurrent model's states after each row (``fastrl.models.recurrent.unroll``); the final
    observation of step t is read with the state after row t, as the episode would have gone on."""
    steps = storage["action"].shape[1] - 1
    dones = storage["done"][:, :steps]
    values = np.zeros(dones.shape, np.float32)
    where = np.nonzero(dones == TRUNCATED)
    if where[0].size:
        obs = torch.from_numpy(storage["final_obs"][where]).to(device)  # the few truncated rows, copied
        rows = tuple(torch.from_numpy(w).to(device) for w in where)
        _, value = model(obs) if after is None else model(obs, after[rows].detach())[:2]
        values[where] = value.float().cpu().numpy().reshape(-1)
    return values
