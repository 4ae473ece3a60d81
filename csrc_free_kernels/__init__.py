"""Numba kernels with no C sources, each with a plain-numpy reference beside it.

The kernels are imported on first use (``csrc_free_kernels.gae`` etc. or an attribute of this
package), so a process that needs only ``step_end``'s codes (an executor) never imports numba.
"""

import importlib

_KERNELS = {
    "gae": "gae",
    "gae_reference": "gae",
    "nstep_returns": "returns",
    "nstep_returns_reference": "returns",
    "sample_from_u": "sampling",
    "sample_from_u_reference": "sampling",
    "sample_gaussian": "sampling",
    "sample_gaussian_reference": "sampling",
    "ndtri": "sampling",
    "sample_multi": "sampling",
    "sample_multi_reference": "sampling",
    "vtrace": "vtrace",
    "vtrace_reference": "vtrace",
    "normalize_rewards": "reward_scaling",
    "normalize_rewards_reference": "reward_scaling",
}
__all__ = list(_KERNELS)


def __getattr__(name):
    if name not in _KERNELS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_KERNELS[name]}", __name__), name)
