"""How a step ended: the codes of the trajectory slots' ``done`` field, read by every return kernel.

A time limit is not a terminal state (Pardo et al. 2018, "Time Limits in Reinforcement
Learning"): the state the limit cut off still has a future, so the return of a truncated step
bootstraps from the value of the episode's final observation, which the reset replaced in the
next row. Both kinds of end stop the trace there (the next row belongs to a new episode); only a
termination also ends the return. One uint8 field carries both flags, so keeping them apart
costs the executor no extra write per step, and code that only asks "did the episode end here"
(``done != 0``) needs no change.
"""

import numpy as np

CONTINUES = 0  # the episode goes on: the return continues with the next row
TERMINATED = 1  # a real end (game over; a lost life under episodic life): the return ends with r_t
TRUNCATED = 2  # a time limit: r_t + gamma * V(final observation of the episode); the next row is a reset


def final_values_for(dones: np.ndarray, final_values) -> np.ndarray:
    """``final_values`` as float32 [N, T] (V of the final observation where ``dones`` is TRUNCATED, read
    nowhere else), or zeros when there is no truncation. Truncations without final values are an error:
    bootstrapping them from 0 would be the very bug these codes exist to avoid."""
    if final_values is None:
        if (dones == TRUNCATED).any():
            raise ValueError("dones mark truncated steps (code 2) but no final_values were given to bootstrap them")
        return np.zeros(dones.shape, np.float32)
    final_values = np.asarray(final_values, dtype=np.float32)
    if final_values.shape != dones.shape:
        raise ValueError(f"final_values {final_values.shape} must have the shape of dones {dones.shape}")
    return final_values


def reference_flags(dones, final_values) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the numpy references: (continues, truncated, final values zeroed where not truncated), float64 [N, T]."""
    dones = np.asarray(dones)
    truncated = dones == TRUNCATED
    final_values = np.where(truncated, np.asarray(final_values_for(dones, final_values), np.float64), 0.0)
    return (dones == CONTINUES).astype(np.float64), truncated.astype(np.float64), final_values
