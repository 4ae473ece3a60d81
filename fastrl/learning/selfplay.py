"""Self-play against a pool of the policy's past selves (``selfplay.opponents = "pool"``; docs/multi-agent.md).

In every multi-agent env one seat learns, env g's agent ``g mod k`` (so each seat equally often), and the other
seats are ``OPPONENT`` rows (``fastrl.envs.base``): the executors mark them, the actors forward them with the
snapshot this env plays against in the rollout (``Actor._act_opponents``), and no loss reads them. The learner
keeps the pool:

- a **snapshot** of θ every ``selfplay.snapshot_every`` updates (θ_0 first), written into a pool slot of the
  shared segment (the oldest leaves once ``selfplay.pool_size`` are kept);
- at the barrier before rollout j, each env's **opponent** for that rollout, drawn from the run seed's stream
  (``uniform``, ``latest`` or by ``rating``) and written into ``opponents[j % 2]``, which the actors read;
- **Elo ratings**: the learning seat's games that ended in rollout j, read from the storage (the sign of its
  return in the game), rate it against the snapshot it played; a snapshot starts at the learner's rating when
  it is taken.
- a **uniformly random player** (``selfplay.random_share`` of the games, drawn per env and rollout): the pool's
  last slot, all zeros, whose network gives every action the same logit, so the actors' masked sampling plays
  each legal action alike. Rated as the snapshots are; the learner's score against it is in the metrics.

Everything is decided at the barrier from the seed and the storages, never from timing, so a self-play run is
bit-identical across layouts; the pool's weights, the ratings and the stream are in the checkpoint, so it resumes
exactly. Only ``sync`` (one learner) takes it: its barrier is the one moment no env is stepping.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
import torch

from csrc_free_kernels.step_end import CONTINUES
from fastrl.buffers import RunBuffers
from fastrl.buffers.control import Stat
from fastrl.partition import learning_rows
from fastrl.spec import RunSpec

SELFPLAY_STREAM = 8  # seeding purpose of the opponents' draws (see fastrl.seeding)
INITIAL_RATING = 1200.0
RECENT_GAMES = 200  # the score in the metrics: over the learning seat's last games against the pool


@dataclass
class Snapshot:
    version: int  # the learner's version it was taken at
    slot: int  # its row of the shared pool
    rating: float


def expected_score(rating: float, against: float) -> float:
    """Elo: the expected score (win 1, draw 1/2) of a player rated ``rating`` against one rated ``against``."""
    return 1.0 / (1.0 + 10.0 ** ((against - rating) / 400.0))


def pool_slots(options) -> int:
    """The shared segment's pool slots: ``pool_size`` snapshots, and the random player's where it plays."""
    return options.pool_size + (options.random_share > 0)


class SelfPlayPool:
    def __init__(self, spec: RunSpec, buffers: RunBuffers, stats: np.ndarray):
        self.options = spec.config.selfplay
        self.agents = spec.env_unit
        self.rows = learning_rows(spec.envs, self.agents)
        self.slots = [buffers.pool_params(k) for k in range(self.options.pool_size)]
        self.table = buffers.opponents
        self.stats = stats
        self.entries: list[Snapshot] = []
        # the uniformly random player: zero parameters give every action the same logit (every legal one, masked)
        self.random = Snapshot(-1, self.options.pool_size, INITIAL_RATING) if self.options.random_share else None
        if self.random is not None:
            random_slot = buffers.pool_params(self.random.slot)
            random_slot.write_flat(torch.zeros_like(random_slot.flat), 0)
        self.against_random: deque[float] = deque(maxlen=RECENT_GAMES)
        self.rating = INITIAL_RATING
        self.rng = np.random.default_rng([spec.config.run.seed, SELFPLAY_STREAM])
        self.returns = np.zeros(len(self.rows))  # the learning seat's return so far in each env's game
        self.recent: deque[float] = deque(maxlen=RECENT_GAMES)
        self.games = 0
        self.prepared = -1  # the version whose opponents are drawn (a resumed run does not draw them again)

    # ------------------------------------------------------------------ at the barrier

    def prepare(self, version: int, model: torch.nn.Module) -> None:
        """Before rollout ``version`` acts with θ_version: take a snapshot if one is due, draw each env's opponent."""
        if version == self.prepared:
            return
        if version % self.options.snapshot_every == 0 or not self.entries:
            self._snapshot(version, model)
        slots = np.array([self.entries[i].slot for i in self._draw()])
        if self.random is not None:  # drawn after the snapshots: a run without it draws as before
            slots[self.rng.random(len(slots)) < self.options.random_share] = self.random.slot
        self.table[version % 2] = slots
        self.prepared = version
        self.stats[Stat.POOL_SIZE] = len(self.entries)

    def observe(self, storage, rollout: int) -> None:
        """Rate the learning seat's games that ended in ``rollout`` against the snapshots they were played with."""
        steps = storage["reward"].shape[1] - 1
        rewards = storage["reward"][self.rows, :steps]
        ends = storage["done"][self.rows, :steps] != CONTINUES
        by_slot = {entry.slot: entry for entry in (*self.entries, *([self.random] if self.random else []))}
        opponents = self.table[rollout % 2]
        for g in range(len(self.rows)):
            for t in range(steps):
                self.returns[g] += rewards[g, t]
                if ends[g, t]:
                    self._rate(by_slot[int(opponents[g])], float(np.sign(self.returns[g]) + 1) / 2)
                    self.returns[g] = 0.0
        self.stats[Stat.ELO] = self.rating
        self.stats[Stat.POOL_SCORE] = float(np.mean(self.recent)) if self.recent else float("nan")
        self.stats[Stat.POOL_GAMES] = self.games
        self.stats[Stat.RANDOM_SCORE] = float(np.mean(self.against_random)) if self.against_random else float("nan")

    def _snapshot(self, version: int, model: torch.nn.Module) -> None:
        if len(self.entries) < len(self.slots):
            slot = len(self.entries)
        else:
            slot = self.entries.pop(0).slot  # the oldest leaves; no rollout is acting with it (sync's barrier)
        self.slots[slot].publish(model, version)
        self.entries.append(Snapshot(version, slot, self.rating))

    def _draw(self) -> np.ndarray:
        """Each env's snapshot (an index into the pool's entries) for the next rollout."""
        n, games = len(self.entries), len(self.rows)
        sampling = self.options.sampling
        if sampling == "latest":
            return np.full(games, n - 1)
        if sampling == "uniform":
            return self.rng.integers(n, size=games)
        expected = np.array([expected_score(self.rating, entry.rating) for entry in self.entries])
        weights = (1.0 - expected) ** 2 + 1e-6  # prioritised fictitious self-play's "hard" weighting
        return self.rng.choice(n, size=games, p=weights / weights.sum())

    def _rate(self, opponent: Snapshot, score: float) -> None:
        change = self.options.elo_k * (score - expected_score(self.rating, opponent.rating))
        self.rating += change
        opponent.rating -= change
        self.recent.append(score)
        if opponent is self.random:
            self.against_random.append(score)
        self.games += 1

    # ------------------------------------------------------------------ checkpoints

    def state(self) -> dict:
        return {
            "entries": [(e.version, e.slot, e.rating) for e in self.entries],
            "weights": {e.slot: self.slots[e.slot].flat.clone() for e in self.entries},
            "rating": self.rating,
            "rng": self.rng.bit_generator.state,
            "returns": torch.from_numpy(self.returns.copy()),  # tensors: checkpoints hold no numpy objects
            "recent": list(self.recent),
            "games": self.games,
            "random": None if self.random is None else (self.random.rating, list(self.against_random)),
            "table": torch.from_numpy(self.table.copy()),
            "prepared": self.prepared,
        }

    def load(self, state: dict) -> None:
        self.entries = [Snapshot(int(v), int(s), float(r)) for v, s, r in state["entries"]]
        for entry in self.entries:
            self.slots[entry.slot].write_flat(state["weights"][entry.slot], entry.version)
        self.rating = float(state["rating"])
        self.rng.bit_generator.state = state["rng"]
        self.returns[:] = state["returns"].numpy()
        self.recent.extend(state["recent"])
        self.games = int(state["games"])
        if self.random is not None and state.get("random") is not None:
            rating, scores = state["random"]
            self.random.rating = float(rating)
            self.against_random.extend(scores)
        self.table[:] = state["table"].numpy()
        self.prepared = int(state["prepared"])
        self.stats[Stat.POOL_SIZE] = len(self.entries)
        self.stats[Stat.ELO] = self.rating
