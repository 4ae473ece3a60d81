"""The self-play pool's checks, run once before anything starts (``plan_selfplay``, a plan hook: ``fastrl.layers``):
its settings fit the mode and the env; and the shared memory it needs (the pool's weight slots, the opponent
tables)."""

from __future__ import annotations

import torch

from fastrl.config import Config, ConfigError
from fastrl.envs import EnvInfo
from fastrl.layer import LayerNeeds
from fastrl.layers.selfplay.pool import OPPONENTS, POOL, pool_slots
from fastrl.modes import mode_of


def plan_selfplay(config: Config, info: EnvInfo, policy: torch.nn.Module, resuming: bool) -> tuple[Config, LayerNeeds]:
    """Every check of the pool; the pool slots and opponent tables the run needs (none without a pool)."""
    check_selfplay(config)
    if config.selfplay.opponents != POOL:
        return config, LayerNeeds()
    check_pool_env(config, info)
    check_scripted(config, info)
    games = config.engine.envs // info.agents
    return config, LayerNeeds(
        pool_slots(config.selfplay, mode_of(config).run_ahead), ((OPPONENTS, (2, games), "int64"),)
    )


def check_pool_env(config: Config, info: EnvInfo) -> None:
    """The pool plays the other seats of a multi-agent env, drawn at the barrier of one learner."""
    engine = config.engine
    if info.agents == 1:
        raise ConfigError(
            f"selfplay.opponents = 'pool' needs a multi-agent env (PettingZoo); env {config.env.id!r} has one agent"
        )
    if engine.mode not in ("sync", "hts") or engine.learners > 1:
        raise ConfigError(
            f"selfplay.opponents = 'pool' draws each env's opponent for a rollout at a barrier, as the rollout's "
            f"weights are published: engine.mode = 'sync' or 'hts' with one learner (got engine.mode = "
            f"{engine.mode!r}, engine.learners = {engine.learners})"
        )


def check_scripted(config, info) -> None:
    """``selfplay.scripted`` builds for the env's rows (each actor builds its own once the run starts)."""
    from fastrl.models.scripted import build_scripted

    if config.selfplay.scripted_share > 0:
        try:
            build_scripted(config.selfplay.scripted, info)
        except ValueError as exc:
            raise ConfigError(f"selfplay.scripted = {config.selfplay.scripted!r}: {exc}") from None


def check_selfplay(config: Config) -> None:
    """The pool's fixed players: each needs the pool, a scripted one needs its share and its share a player."""
    selfplay = config.selfplay
    shares = {"selfplay.random_share": selfplay.random_share, "selfplay.scripted_share": selfplay.scripted_share}
    for key, share in shares.items():
        if share > 0 and selfplay.opponents != POOL:
            raise ConfigError(
                f"{key} = {share} plays a share of the games against a fixed player instead of a pool snapshot: "
                f"set selfplay.opponents = 'pool' (now {selfplay.opponents!r})"
            )
    if selfplay.random_share + selfplay.scripted_share > 1.0:
        raise ConfigError(
            f"selfplay.random_share + selfplay.scripted_share = {selfplay.random_share + selfplay.scripted_share:g}: "
            "they share one draw per game, so together at most 1"
        )
    if bool(selfplay.scripted) != (selfplay.scripted_share > 0):
        raise ConfigError(
            f"selfplay.scripted = {selfplay.scripted!r} and selfplay.scripted_share = {selfplay.scripted_share}: set "
            "both (a player and the share of the games it plays) or neither"
        )
