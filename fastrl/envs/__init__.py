"""Environments: adapters that write observations straight into shared trajectory rows."""

from fastrl.envs import ale_vector, crafter, envpool_vector, pettingzoo  # noqa: E402,F401  register themselves, as a package's backend would
from fastrl.envs.base import EnvAdapter
from fastrl.envs.registry import (
    DELAY_ENV_ID,
    EnvBackend,
    EnvInfo,
    make_env,
    probe_env,
    register_env_backend,
    register_fastrl_envs,
)

__all__ = [
    "DELAY_ENV_ID",
    "EnvAdapter",
    "EnvBackend",
    "EnvInfo",
    "make_env",
    "probe_env",
    "register_env_backend",
    "register_fastrl_envs",
]
