"""From an env id (gymnasium id, ALE id or 'package.module:factory') to an executor adapter."""

from __future__ import annotations

import difflib
import importlib
import inspect
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from fastrl.config import EnvConfig
from fastrl.envs.actions import ActionSpec
from fastrl.envs.base import EnvAdapter
from fastrl.envs.gym import EnvOutputError, GymEnv, UnsupportedEnvError
from fastrl.envs.obs_layout import ObsLayout

DELAY_ENV_ID = "fastrl/DelayEnv-v0"


def register_fastrl_envs() -> None:
    if DELAY_ENV_ID not in gym.registry:
        gym.register(DELAY_ENV_ID, entry_point="fastrl.envs.delay:DelayEnv")


@dataclass(frozen=True)
class EnvInfo:
    obs_shape: tuple[int, ...]
    obs_dtype: str
    n_actions: int  # columns of the policy head: the number of actions for Discrete (``ActionSpec.head_size``)
    frames_per_step: int
    action: ActionSpec | None = None  # None: Discrete(n_actions)
    obs_layout: ObsLayout | None = None  # a Dict observation's parts in the row (fastrl.envs.obs_layout); None: a Box

    def __post_init__(self):
        if self.action is None:
            object.__setattr__(self, "action", ActionSpec.discrete(self.n_actions))


def _is_atari(env_id: str) -> bool:
    """An ALE id that no other gymnasium env claims (``Blackjack-v1`` is toy-text, not the ALE ROM)."""
    from fastrl.envs.atari import is_atari_id

    spec = gym.registry.get(env_id)
    if spec is not None and not str(spec.entry_point).startswith("ale_py"):
        return False
    return is_atari_id(env_id)


def _load_factory(spec: str):
    """``module:factory`` -> the factory; ``module:EnvId`` (an id the module registers) -> a gymnasium.make partial.

    Importing the module in every worker (spawned children import nothing of the parent's
    ``__main__``) is what makes a user's registration visible there.
    """
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UnsupportedEnvError(f"env.id = {spec!r}: cannot import module {module_name!r}: {exc}") from None
    if hasattr(module, attr):
        return getattr(module, attr)
    if attr in gym.registry:
        return lambda **kwargs: gym.make(attr, **kwargs)
    raise UnsupportedEnvError(
        f"env.id = {spec!r}: module {module_name!r} has no attribute {attr!r} and registers no gymnasium id {attr!r}"
    )


def _parameters(factory) -> set[str]:
    try:
        return set(inspect.signature(factory).parameters)
    except (TypeError, ValueError):
        return set()


def make_env(config: EnvConfig, env_index: int = 0) -> EnvAdapter:
    """Build one env adapter; its randomness comes only from the seeds passed to ``reset``.

    A ``module:factory`` that takes an ``env_index`` argument gets the env's global index, so
    envs can differ by index (e.g. gala's straggler benchmark gives one learner's envs slow steps).
    """
    register_fastrl_envs()
    env_id = config.id
    if ":" in env_id:
        factory = _load_factory(env_id)
        kwargs = dict(config.kwargs)
        if "env_index" in _parameters(factory):
            kwargs["env_index"] = env_index
        env = factory(**kwargs)
        if not isinstance(env, gym.Env):
            raise UnsupportedEnvError(
                f"env.id = {env_id!r}: the factory returned {type(env).__name__}, not a gymnasium.Env"
            )
        return GymEnv(env_id, env)
    if _is_atari(env_id):
        from fastrl.envs.atari import AtariEnv

        return AtariEnv(env_id, config.atari, config.kwargs)
    from fastrl.envs.minigrid import is_minigrid_id, make_minigrid

    if is_minigrid_id(env_id):
        return GymEnv(env_id, make_minigrid(env_id, **config.kwargs))
    if env_id not in gym.registry:
        close = difflib.get_close_matches(env_id, list(gym.registry), n=3)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise UnsupportedEnvError(f"env.id = {env_id!r} is not a registered gymnasium env{hint}")
    return GymEnv(env_id, gym.make(env_id, **config.kwargs))


def probe_env(config: EnvConfig) -> EnvInfo:
    """Build one env in the main process to size the buffers and validate the id before workers start."""
    env = make_env(config)
    try:
        try:
            env.probe()  # the full check of a user's env; compiles the Atari frame kernels
        except EnvOutputError as exc:
            raise UnsupportedEnvError(f"env {config.id!r} at start: {exc}") from None
        return EnvInfo(
            tuple(env.obs_shape),
            np.dtype(env.obs_dtype).str,
            env.action_spec.head_size,
            env.frames_per_step,
            env.action_spec,
            env.obs_layout,
        )
    finally:
        env.close()
