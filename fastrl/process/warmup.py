"""Compile the numba kernels in the main process before any worker starts.

The kernels are ``cache=True``: compiled once, their machine code lands in ``__pycache__`` and
every later process loads it in milliseconds. Compiling here, with the argument types the
workers use (strided views included: numba compiles per layout), means workers never compile
(seconds each) or race each other writing the cache, so start-up stays short.
"""

from __future__ import annotations

import numpy as np

from fastrl.layer import warm_up_layers


def compile_kernels() -> None:
    from csrc_free_kernels.action_sampling import (
        sample_from_u,
        sample_gaussian,
        sample_gaussian_rows_kernel,
        sample_multi,
        sample_multi_rows_kernel,
        sample_rows_kernel,
    )
    from csrc_free_kernels.gae import gae
    from csrc_free_kernels.returns import nstep_returns
    from csrc_free_kernels.vtrace import vtrace

    # the learner: [N, T] views of [N, T + 1] storages, bootstrap a column of a [N, T + 1] array;
    # with N = 1 (its own warm-up on one slot) numpy sees those views as contiguous
    for n in (2, 1):
        rows = np.zeros((n, 3), np.float32)
        dones = np.zeros((n, 3), np.uint8)[:, :2]
        ends = np.zeros((n, 2), np.float32)  # fastrl.algos.time_limits.final_values: a fresh contiguous array
        nstep_returns(rows[:, :2], dones, rows[:, 2], 0.99, final_values=ends)
        gae(rows[:, :2], dones, rows, 0.99, 0.95, final_values=ends)  # ppo: values of all T + 1 rows, contiguous
        vtrace(
            rows[:, :2], np.zeros((n, 2), np.float32), rows[:, :2], dones, rows, 0.99, 1.0, 1.0, 1.0, final_values=ends
        )  # impala
    # the actor: contiguous logits and values, sorted rows, the trajectory's 1-D columns
    sample_rows_kernel(
        np.zeros((1, 2), np.float32),
        np.zeros(1, np.float32),
        0,
        np.zeros(1, np.int64),
        np.zeros(1),
        np.zeros(1, np.int64),
        np.zeros(1, np.float32),
        np.zeros(1, np.float32),
        np.zeros(1, np.int64),
    )
    sample_from_u(np.zeros((1, 2), np.float32), np.zeros(1), np.empty(1, np.int64), np.empty(1, np.float32))  # evaluate
    # MultiDiscrete and Box actions: the slots' action and u columns are [rows, D]
    value_columns = (np.zeros(1, np.float32), np.zeros(1, np.float32), np.zeros(1, np.int64))
    sample_multi_rows_kernel(
        np.zeros((1, 2), np.float32),
        np.ones(2, np.int64),
        np.zeros(1, np.float32),
        0,
        np.zeros(1, np.int64),
        np.full((1, 2), 0.5),
        np.zeros((1, 2), np.int64),
        *value_columns,
    )
    sample_gaussian_rows_kernel(
        np.zeros((1, 2), np.float32),
        np.zeros(1, np.float32),
        0,
        np.zeros(1, np.int64),
        np.full((1, 1), 0.5),
        np.zeros((1, 1), np.float32),
        *value_columns,
    )
    sample_multi(
        np.zeros((1, 2), np.float32), [1, 1], np.full((1, 2), 0.5), np.empty((1, 2), np.int64), np.empty(1, np.float32)
    )
    sample_gaussian(
        np.zeros((1, 2), np.float32), np.full((1, 1), 0.5), np.empty((1, 1), np.float32), np.empty(1, np.float32)
    )
    warm_up_layers()  # the layers' own kernels
