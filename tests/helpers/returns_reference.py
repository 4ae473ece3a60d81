"""Returns and advantages of a storage by the plain recursion, in float64: what ``returns_and_advantages``
(``fastrl.algos.advantages``) is checked against."""

import numpy as np

from csrc_free_kernels.step_end import CONTINUES, TERMINATED, TRUNCATED


def returns_and_advantages_reference(
    rewards: np.ndarray, dones: np.ndarray, values: np.ndarray, final: np.ndarray, gamma: float, lam: float | None
) -> tuple[np.ndarray, np.ndarray]:
    """``rewards``, ``dones`` [N, T], ``values`` [N, T + 1] (row T the bootstrap), ``final`` [N, T]: V of the final
    observation where a time limit cut the episode. ``lam`` None: n-step returns, advantages = returns − V; else
    GAE(λ) advantages, returns = advantages + V."""
    n, horizon = rewards.shape
    returns, advantages = np.zeros((n, horizon)), np.zeros((n, horizon))
    for env in range(n):
        g, a = float(values[env, horizon]), 0.0  # row T bootstraps what still runs at the rollout's end
        for t in reversed(range(horizon)):
            code, r, v = dones[env, t], float(rewards[env, t]), float(values[env, t])
            if code == CONTINUES:
                g = r + gamma * g
                a = r + gamma * float(values[env, t + 1]) - v + gamma * (lam or 0.0) * a
            elif code == TRUNCATED:  # a time limit: the episode's final observation still has a future
                g = r + gamma * float(final[env, t])
                a = g - v
            else:
                assert code == TERMINATED
                g, a = r, r - v
            returns[env, t] = g if lam is None else a + v
            advantages[env, t] = g - v if lam is None else a
    return returns, advantages
