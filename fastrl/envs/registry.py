"""From an env id to an executor adapter, through registered env backends.

A backend claims ids and makes adapters (``fastrl.envs.base.EnvAdapter``: reset and step straight into buffer
rows). ``env.backend`` names one; with ``"auto"`` the first that claims an id makes it, in order: ``factory``
('package.module:factory': a gymnasium.Env, wrapped, or an adapter that writes its rows itself, checked against
the contract), ``atari`` (ALE ids), ``minigrid``, then ``gymnasium`` (every other registered id). Another package
adds one with ``register_env_backend`` (docs/extending.md); ``ale_vector`` (``fastrl.envs.ale_vector``, ale-py's
AtariVectorEnv) registers itself that way and is asked only by name."""

from __future__ import annotations

import difflib
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from fastrl.envs.actions import ActionSpec
from fastrl.envs.base import EnvAdapter
from fastrl.envs.gym import EnvOutputError, GymEnv, UnsupportedEnvError
from fastrl.envs.obs_layout import ObsLayout
from fastrl.errors import ConfigError
from fastrl.registry import Registry, RegistryError
from fastrl.schema import EnvConfig

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
    agents: int = 1  # rows per env: a multi-agent env's agents (fastrl.envs.pettingzoo), kept in one executor
    agent_names: tuple[str, ...] = ()  # a multi-agent env's agents, in the order of their rows
    resets_from_seed: bool = False  # its adapter's reset seed alone fixes an episode (engine.reset_ahead may swap)

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


@dataclass(frozen=True)
class EnvBackend:
    """One way of making envs: the ids it claims, and the adapter it makes for one of them.

    ``make_group``: a backend that steps several envs together (a C++ vector env) makes an executor's env group
    at once, adapters whose ``group`` (``fastrl.envs.base.EnvGroup``) the executor hands every member's action in
    one call; such envs advance in lockstep, so only the barrier modes (sync, hts) take them, unless
    ``group_is_one_env``: each group is one env's agents (a PettingZoo game), which step together in any mode.
    ``seeded_when_made``: its envs take their seed once, when made (envpool ignores ``reset(seed)``): ``make_group``
    is then called with ``seeds``, one per env from the env's own stream (``fastrl.seeding.made_env_seed``).
    ``auto = False``: asked only when ``env.backend`` names it, never by ``"auto"``."""

    name: str
    claims: Callable[[str], bool]  # whether an env id is this backend's
    make: Callable[[EnvConfig, int], EnvAdapter]  # (config, the env's global index) -> its adapter
    summary: str = ""
    make_group: Callable[..., list[EnvAdapter]] | None = None  # (config, global indices[, seeds=...])
    group_is_one_env: bool = False  # make_group's groups are one multi-agent env each, never several envs
    seeded_when_made: bool = False  # make_group(config, indices, seeds=...): envs seeded once, when made
    auto: bool = True


def _backend_check(name: str, backend: object) -> str | None:
    if not isinstance(backend, EnvBackend):
        return f"it is {type(backend).__name__} {backend!r}, not a fastrl EnvBackend"
    if backend.name != name or not callable(backend.claims) or not callable(backend.make):
        return f"it needs the name {name!r}, claims(id) and make(config, index); got {backend!r}"
    return None


# asked in order (lower first), the first that claims an id makes it: fastrl's own below 0, a plug-in's at 0 by
# default (an installed package's "fastrl.env_backends" entry point too), gymnasium's last of all (it claims every id)
ENV_BACKENDS: Registry[EnvBackend] = Registry("env backend", check=_backend_check)
LAST = 1e9  # gymnasium's order


def register_env_backend(backend: EnvBackend, order: float = 0.0, *, replace: bool = False) -> EnvBackend:
    """Make ``backend`` claim env ids, asked at ``order`` among the others (fastrl's ``factory``, ``atari`` and
    ``minigrid`` at -30, -20, -10; ``gymnasium`` last)."""
    if not isinstance(backend, EnvBackend):
        raise RegistryError(f"register_env_backend takes an EnvBackend, got {type(backend).__name__}")
    ENV_BACKENDS.register(backend.name, backend, order=order, replace=replace)
    return backend


def backends() -> tuple[EnvBackend, ...]:
    return tuple(ENV_BACKENDS.values())


def backend_for(config: EnvConfig) -> EnvBackend:
    """The backend that makes ``config``'s envs: the one ``env.backend`` names, or with ``"auto"`` the first that
    claims ``env.id``; ``UnsupportedEnvError`` for a name nobody registered or a backend that does not take the id."""
    register_fastrl_envs()
    if config.backend == "auto":
        for backend in ENV_BACKENDS.values():
            if backend.auto and backend.claims(config.id):
                return backend
        raise UnsupportedEnvError(f"env.id = {config.id!r}: no env backend claims it")  # gymnasium's claims every id
    named = ENV_BACKENDS.find(config.backend)
    if named is None:
        raise UnsupportedEnvError(
            f"env.backend = {config.backend!r}: no such env backend; registered: 'auto', "
            f"{', '.join(map(repr, ENV_BACKENDS.names()))}"
        )
    if not named.claims(config.id):
        raise UnsupportedEnvError(
            f"env.backend = {config.backend!r} does not take env.id = {config.id!r} ({named.summary})"
        )
    return named


def make_env(config: EnvConfig, env_index: int = 0) -> EnvAdapter:
    """Build one env adapter with ``env.backend``'s backend (``backend_for``); its randomness comes only from the
    seeds passed to ``reset``. ``env_index``: the env's global index (what a factory may take)."""
    return backend_for(config).make(config, env_index)


def make_envs(
    config: EnvConfig, env_indices: list[int], group_size: int, seeds: list[int] | None = None
) -> list[EnvAdapter]:
    """An executor's adapters for the envs of global indices ``env_indices``; a backend that steps envs together
    makes them in groups of ``group_size`` consecutive envs (the executor's double-buffering groups). ``seeds``:
    each env's seed for a backend that seeds envs when it makes them (``EnvBackend.seeded_when_made``)."""
    backend = backend_for(config)
    make_group = backend.make_group
    if make_group is None:
        return [backend.make(config, index) for index in env_indices]
    groups = [slice(start, start + group_size) for start in range(0, len(env_indices), group_size)]
    if backend.seeded_when_made:
        if seeds is None or len(seeds) != len(env_indices):
            raise ValueError(f"env backend {backend.name!r} seeds its envs when made: give one seed per env")
        return [env for g in groups for env in make_group(config, env_indices[g], seeds=seeds[g])]
    return [env for g in groups for env in make_group(config, env_indices[g])]


def _make_from_factory(config: EnvConfig, env_index: int) -> EnvAdapter:
    """``module:factory``: a gymnasium.Env (wrapped) or an adapter that writes its own rows (checked here). A
    factory that takes an ``env_index`` argument gets the env's global index, so envs can differ by index (gala's
    straggler benchmark gives one learner's envs slow steps)."""
    factory = _load_factory(config.id)
    kwargs = dict(config.kwargs)
    if "env_index" in _parameters(factory):
        kwargs["env_index"] = env_index
    env = factory(**kwargs)
    if isinstance(env, gym.Env):
        return GymEnv(config.id, env)
    missing = adapter_contract_gaps(env)
    if missing:
        raise UnsupportedEnvError(
            f"env.id = {config.id!r}: the factory returned {type(env).__name__}, neither a gymnasium.Env nor an env "
            f"adapter: it lacks {', '.join(missing)} (fastrl.envs.base.EnvAdapter; docs/extending.md)"
        )
    return env


ADAPTER_ATTRIBUTES = ("obs_shape", "obs_dtype", "obs_layout", "action_spec", "n_actions", "frames_per_step")
ADAPTER_METHODS = ("reset", "step", "get_state", "set_state", "probe", "close")


def adapter_contract_gaps(env) -> list[str]:
    """What ``env`` lacks of the ``EnvAdapter`` contract (empty: it is one)."""
    gaps = [f"attribute {name!r}" for name in ADAPTER_ATTRIBUTES if not hasattr(env, name)]
    gaps += [f"method {name}()" for name in ADAPTER_METHODS if not callable(getattr(env, name, None))]
    if not gaps and not isinstance(env.action_spec, ActionSpec):
        gaps.append("an action_spec that is a fastrl.envs.actions.ActionSpec")
    return gaps


def _is_factory_id(env_id: str) -> bool:
    """'package.module:factory', except PettingZoo's own modules ('pettingzoo.classic:connect_four_v3'), which
    the ``pettingzoo`` backend makes (fastrl.envs.pettingzoo)."""
    return ":" in env_id and not env_id.startswith("pettingzoo.")


def _make_atari(config: EnvConfig, env_index: int) -> EnvAdapter:
    from fastrl.envs.atari import AtariEnv

    return AtariEnv(config.id, config.atari, config.kwargs)


def _is_minigrid(env_id: str) -> bool:
    from fastrl.envs.minigrid import is_minigrid_id

    return is_minigrid_id(env_id)


def _make_minigrid(config: EnvConfig, env_index: int) -> EnvAdapter:
    from fastrl.envs.minigrid import make_minigrid

    return GymEnv(config.id, make_minigrid(config.id, **config.kwargs))


def _make_gymnasium(config: EnvConfig, env_index: int) -> EnvAdapter:
    if config.id not in gym.registry:
        close = difflib.get_close_matches(config.id, list(gym.registry), n=3)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise UnsupportedEnvError(f"env.id = {config.id!r} is not a registered gymnasium env{hint}")
    return GymEnv(config.id, gym.make(config.id, **config.kwargs))


GYMNASIUM = "gymnasium"
for _order, _backend in (
    (-30, EnvBackend("factory", _is_factory_id, _make_from_factory, "'package.module:factory' ids")),
    (-20, EnvBackend("atari", _is_atari, _make_atari, "ALE ids, with fastrl's own frame preprocessing")),
    (-10, EnvBackend("minigrid", _is_minigrid, _make_minigrid, "MiniGrid-* ids, their grid as one-hot cells")),
    (LAST, EnvBackend(GYMNASIUM, lambda env_id: True, _make_gymnasium, "every other id: gymnasium.make")),
):
    register_env_backend(_backend, order=_order)


def probe_env(config: EnvConfig, mode: str | None = None) -> EnvInfo:
    """Build one env in the main process to size the buffers and validate the id before workers start.

    With the run's ``mode`` (``engine.mode``) its backend is checked against the run too: one that steps env groups
    together (``EnvBackend.make_group``) keeps their envs in lockstep, which only the barrier modes take, where every
    env steps the same rollout (unless each group is one env's agents, which fill their slots together in any mode);
    and it cannot reset one env of a failed group."""
    backend = backend_for(config)
    if mode is not None and backend.make_group is not None:
        if mode not in ("sync", "hts") and not backend.group_is_one_env:
            raise ConfigError(
                f"env.backend = {backend.name!r} steps each env group together, which needs every env on the same "
                f"rollout: engine.mode = 'sync' or 'hts' (got {mode!r})"
            )
        if config.on_error != "raise":
            raise ConfigError(
                f"env.backend = {backend.name!r} cannot reset one env of a failed group: set env.on_error = 'raise'"
            )
    env = backend.make(config, 0)
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
            int(getattr(env, "agents", 1)),
            tuple(getattr(getattr(env, "group", None), "agents", ())),
            bool(getattr(env, "resets_from_seed", False)),
        )
    finally:
        env.close()
