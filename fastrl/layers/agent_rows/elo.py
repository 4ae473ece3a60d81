"""Elo ratings: the expected score of one player against another, and the ratings between named policies
(``multiagent.policies``), from the games they play against each other.

Every agent of a game reports its episode when the game ends (``(row, return, length)`` on the episodes queue,
row e being game e // k's agent e mod k). Once all k agents of a game are in, each pair of agents played by
different policies is one rated encounter: the higher return wins (score 1), equal returns draw (1/2), and both
policies move by ``elo_k`` x (score - expected), as the self-play pool's ratings do
(``fastrl.layers.selfplay.pool``). Agents of the same policy are not rated against each other.

Like every other metric of the main process (``return_mean``, ``policy_returns``), the ratings follow the order
in which games arrive, which depends on timing; the parameters the run trains never read them.
"""

from __future__ import annotations

INITIAL_RATING = 1200.0


def expected_score(rating: float, against: float) -> float:
    """Elo: the expected score (win 1, draw 1/2) of a player rated ``rating`` against one rated ``against``."""
    return 1.0 / (1.0 + 10.0 ** ((against - rating) / 400.0))


class PolicyRatings:
    def __init__(self, policy_of_row: list[str], agents: int, elo_k: float):
        self.policy_of_row, self.agents, self.elo_k = policy_of_row, agents, elo_k
        self.ratings = {name: INITIAL_RATING for name in dict.fromkeys(policy_of_row)}
        self.games = 0  # games with at least one rated pair
        self._pending: dict[int, dict[int, float]] = {}  # game -> agent -> return, until every agent is in

    def add(self, row: int, episode_return: float) -> None:
        game, agent = divmod(row, self.agents)
        returns = self._pending.setdefault(game, {})
        if agent in returns:  # a game whose other agents never reported (an env reset alone): start afresh
            returns.clear()
        returns[agent] = episode_return
        if len(returns) == self.agents:
            self._rate(game, returns)
            del self._pending[game]

    def _rate(self, game: int, returns: dict[int, float]) -> None:
        first_row = game * self.agents
        rated = False
        for a in range(self.agents):
            for b in range(a + 1, self.agents):
                one, other = self.policy_of_row[first_row + a], self.policy_of_row[first_row + b]
                if one == other:
                    continue
                score = 1.0 if returns[a] > returns[b] else 0.0 if returns[a] < returns[b] else 0.5
                change = self.elo_k * (score - expected_score(self.ratings[one], self.ratings[other]))
                self.ratings[one] += change
                self.ratings[other] -= change
                rated = True
        self.games += rated
