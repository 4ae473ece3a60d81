"""The players a trained multi-agent policy is matched against (``fastrl eval --opponent``).

A scripted player is a callable ``player(observation, action_mask, rng) -> action``: ``observation`` is the
agent's observation as the PettingZoo env gives it (a dict for Dict spaces), ``action_mask`` the 0/1 array of
its allowed actions (None where the env has no mask), ``rng`` a ``numpy.random.Generator`` seeded by the match
(so matches replay). ``fastrl eval --opponent package.module:factory`` calls ``factory()`` for one.
Built in: ``random`` (uniform over the allowed actions) and ``connect_four_lookahead`` (wins if it can, blocks
if it must, else random).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import numpy as np

from fastrl.config import ConfigError

Player = Callable[[Any, "np.ndarray | None", np.random.Generator], int]


def random_legal(observation, action_mask: np.ndarray | None, rng: np.random.Generator) -> int:
    """Uniform over the allowed actions (every action of a Discrete space without a mask)."""
    if action_mask is None:
        raise ConfigError("the 'random' opponent needs an action mask or a Discrete action space it is given")
    allowed = np.flatnonzero(action_mask)
    return int(allowed[rng.integers(len(allowed))])


ROWS, COLUMNS = 6, 7


def _wins(board: np.ndarray, row: int, column: int) -> bool:
    """Whether the piece at (row, column) of a [6, 7] 0/1 board completes four in a line."""
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        count = 1
        for sign in (1, -1):
            r, c = row + sign * dr, column + sign * dc
            while 0 <= r < ROWS and 0 <= c < COLUMNS and board[r, c]:
                count += 1
                r, c = r + sign * dr, c + sign * dc
        if count >= 4:
            return True
    return False


def _landing_row(occupied: np.ndarray, column: int) -> int:
    """The row a piece dropped into ``column`` comes to rest in (row 0 is the top)."""
    return int(np.flatnonzero(~occupied[:, column])[-1])


def connect_four_lookahead(observation, action_mask: np.ndarray | None, rng: np.random.Generator) -> int:
    """One-step look-ahead for PettingZoo's connect_four_v3: play a winning move if there is one, else block the
    opponent's winning move, else a uniformly random legal move."""
    planes = np.asarray(observation["observation"]).astype(bool)  # [6, 7, 2]: mine, the opponent's
    mine, theirs = planes[..., 0], planes[..., 1]
    occupied = mine | theirs
    mask = np.asarray(observation["action_mask"] if action_mask is None else action_mask)
    legal = np.flatnonzero(mask)
    for board in (mine, theirs):  # first a win of mine, then a win of theirs to block
        for column in legal:
            row = _landing_row(occupied, int(column))
            trial = board.copy()
            trial[row, column] = True
            if _wins(trial, row, int(column)):
                return int(column)
    return int(legal[rng.integers(len(legal))])


BUILT_IN: dict[str, Player] = {"random": random_legal, "connect_four_lookahead": connect_four_lookahead}


def scripted_player(spec: str) -> Player | None:
    """A built-in player's name or a ``package.module:factory`` -> the player; None for anything else (a
    checkpoint path)."""
    if spec in BUILT_IN:
        return BUILT_IN[spec]
    module_name, colon, attr = spec.partition(":")
    if not colon or not module_name or "/" in module_name:
        return None
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"--opponent {spec!r}: cannot import {module_name!r}: {exc}") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ConfigError(f"--opponent {spec!r}: {module_name!r} has no callable {attr!r}")
    player = factory()
    if not callable(player):
        raise ConfigError(f"--opponent {spec!r}: {attr}() returned {type(player).__name__}, not a callable player")
    return player
