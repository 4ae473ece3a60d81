"""``fastrl eval RUN --opponent X``: a trained multi-agent policy plays games against an opponent; wins, draws
and losses counted.

The policy takes one seat of each game, in turn (game i: seat ``i % agents``, so it plays first and second
equally often), the opponent every other seat. The opponent is a scripted player (``random``,
``connect_four_lookahead`` or a ``package.module:factory``: ``fastrl.evaluation.opponents``) or another run's
trained policy (a run directory or checkpoint). Game i is reset with the i-th draw of a stream seeded by
``seed``, and every sampled action draws from a second one, so a match replays exactly. A game is won by the
seat whose return is above every other seat's, drawn where it ties the best.

Returns ``{"checkpoint", "env_id", "opponent", "games", "wins", "draws", "losses", "win_rate", "score_rate",
"return_mean", "margin_mean", "by_seat": {agent: {"wins", "draws", "losses"}}, "greedy", "seed"}``; ``score_rate``
counts a draw as half a win; ``return_mean`` is the policy's mean raw return a game (two-player Pong: its points
less the opponent's), ``margin_mean`` its return less the mean of the other seats' (twice that in a zero-sum
two-player game).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fastrl.config import ConfigError
from fastrl.envs.actions import UnsupportedEnvError
from fastrl.envs.base import ACTING
from fastrl.evaluation.opponents import Player, scripted_player
from fastrl.evaluation.play import RESET_SEED_BOUND, _action

MAX_STEPS = 1_000_000  # a game that never ends is a broken env, not a long match


@dataclass
class PolicyPlayer:
    """A trained policy choosing an action from its row, as the actors do."""

    model: Any  # torch.nn.Module
    distribution: Any  # fastrl.models.distributions.ActionDistribution
    greedy: bool

    def act(self, row: np.ndarray, raw, rng: np.random.Generator):
        import torch

        head, _ = self.model(torch.from_numpy(row[None]))
        return _action(self.distribution, head, self.greedy, rng)


@dataclass
class ScriptedPlayer:
    player: Player
    n_actions: int  # a game without an action mask allows every action of its Discrete space

    def act(self, row: np.ndarray, raw, rng: np.random.Generator):
        mask = raw.get("action_mask") if isinstance(raw, dict) else None
        return self.player(raw, np.ones(self.n_actions, np.int8) if mask is None else np.asarray(mask), rng)


def _player_of(spec: str, greedy: bool, trust_code: bool, n_actions: int):
    scripted = scripted_player(spec)
    if scripted is not None:
        return ScriptedPlayer(scripted, n_actions)
    from fastrl.evaluation.trained_policy import load_trained
    from fastrl.models.distributions import distribution_for

    if not Path(spec).exists():
        raise ConfigError(
            f"--opponent {spec!r}: not a built-in player ('random', 'connect_four_lookahead'), a "
            "'package.module:factory' or a run directory / checkpoint that exists"
        )
    trained = load_trained(spec, trust_code=trust_code)
    return PolicyPlayer(trained.model, distribution_for(trained.env_info.action), greedy)


def play_matches(
    target: str | Path,
    opponent: str = "random",
    games: int = 100,
    seed: int = 0,
    greedy: bool = False,
    params: str | int = "auto",
    trust_code: bool = False,
    env_id: str | None = None,
) -> dict:
    """``games`` games of the policy of ``target`` against ``opponent`` (see the module's doc); ``env_id``: in
    that multi-agent game instead of the run's own, where its rows are the run's (a one-player Pong policy in
    two-player Pong, every seat shown the screen from the first player's side)."""
    import torch

    from fastrl.evaluation.trained_policy import load_trained
    from fastrl.models.distributions import distribution_for

    if not isinstance(games, int) or games < 1:
        raise ConfigError(f"games = {games!r}: expected an int >= 1")
    trained = load_trained(target, params, trust_code)
    if env_id is None and trained.env_info.agents < 2:
        raise ConfigError(
            f"{str(target)!r} trained on {trained.config.env.id!r}, a single-agent env: --opponent plays "
            "multi-agent (PettingZoo) runs; play it with fastrl eval TARGET --episodes N, or in a multi-agent "
            "game whose rows are its own with --env GAME --opponent PLAYER"
        )
    game = _game_of(trained, env_id)
    policy = PolicyPlayer(trained.model, distribution_for(trained.env_info.action), greedy)
    rival = _player_of(opponent, greedy, trust_code, trained.env_info.action.head_size)
    reset_stream, action_stream = np.random.SeedSequence(seed).spawn(2)
    reset_rng, rng = np.random.default_rng(reset_stream), np.random.default_rng(action_stream)
    outcomes = {agent: [0, 0, 0] for agent in game.agents}  # the policy's wins, draws, losses in each seat
    margins: list[float] = []
    own: list[float] = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.inference_mode():
            for index in range(games):
                seat = index % game.size
                returns = _play_one(game, policy, rival, seat, int(reset_rng.integers(RESET_SEED_BOUND)), rng)
                others = np.delete(returns, seat)
                best = others.max()
                outcomes[game.agents[seat]][0 if returns[seat] > best else 1 if returns[seat] == best else 2] += 1
                margins.append(float(returns[seat] - others.mean()))
                own.append(float(returns[seat]))
    finally:
        torch.set_num_threads(threads)
        game.close()
    wins, draws, losses = (sum(o[k] for o in outcomes.values()) for k in range(3))
    return {
        "checkpoint": str(trained.path),
        "env_id": game.env_id,
        "opponent": opponent,
        "games": games,
        "wins": wins,
        "draws": draws,
        "losses": losses,
        "win_rate": wins / games,
        "score_rate": (wins + draws / 2) / games,
        "return_mean": float(np.mean(own)),
        "margin_mean": float(np.mean(margins)),
        "by_seat": {agent: dict(zip(("wins", "draws", "losses"), o)) for agent, o in outcomes.items()},
        "greedy": greedy,
        "seed": seed,
    }


def _game_of(trained, env_id: str | None):
    """The run's own game, or the multi-agent game ``env_id`` where its rows are the run's. A one-player
    policy knows only the first player's side: every other seat is shown the screen mirrored to it."""
    import dataclasses

    from fastrl.envs.pettingzoo import make_game
    from fastrl.evaluation.play import _on_env

    if env_id is None:
        return make_game(trained.config.env)
    env = _on_env(trained.config, env_id).env
    if trained.env_info.agents < 2:
        env = dataclasses.replace(env, atari=dataclasses.replace(env.atari, mirror_players=True))
    try:
        game = make_game(env)
    except (UnsupportedEnvError, ImportError) as exc:  # not a PettingZoo id, or one this machine lacks
        raise ConfigError(f"--env {env_id!r} with --opponent: not a multi-agent game fastrl can make ({exc})") from None
    info = trained.env_info
    trained_rows = (tuple(info.obs_shape), np.dtype(info.obs_dtype).name, info.action.head_size)
    rows = (tuple(game.obs_shape), np.dtype(game.obs_dtype).name, game.action_spec.head_size)
    if rows != trained_rows or game.size < 2:
        game.close()
        raise ConfigError(
            f"--env {env_id!r}: its rows (observation {rows[0]} {rows[1]}, {rows[2]} action columns, "
            f"{game.size} agents) are not a multi-agent game of the rows {str(trained.path)!r} trained on "
            f"({trained_rows[0]} {trained_rows[1]}, {trained_rows[2]})"
        )
    return game


def _play_one(game, policy: PolicyPlayer, rival, seat: int, reset_seed: int, rng: np.random.Generator):
    """One game, the policy in ``seat``: every seat's return."""
    rows = np.stack([game.reset_member(m, reset_seed) for m in range(game.size)])
    returns = np.zeros(game.size)
    for _ in range(MAX_STEPS):
        actions = [
            (policy if m == seat else rival).act(rows[m], game.raw[m], rng) if game.live[m] == ACTING else 0
            for m in range(game.size)
        ]
        game.step(actions)
        returns += game.raw_rewards  # the score, unclipped
        if game.over:
            game.unread_reset = [False] * game.size
            return returns
        rows = game.step_obs.copy()
    raise RuntimeError(f"env {game.env_id!r}: a game did not end in {MAX_STEPS} steps")
