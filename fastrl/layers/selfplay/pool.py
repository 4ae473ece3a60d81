"""Self-play against a pool of the policy's past selves (``selfplay.opponents = "pool"``; docs/multi-agent.md).

In every multi-agent env one seat learns, env g's agent ``g mod k`` (so each seat equally often), and the other
seats are ``UNLEARNED`` rows (``fastrl.envs.base``): the executors mark them, the actors forward them with the
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
- a **scripted player** (``selfplay.scripted``, ``selfplay.scripted_share`` of the games, from the same draw as the
  random player's: a run without it draws as before): a network without parameters (``fastrl.models.scripted``)
  that the actors build themselves and forward for the slot past the shared ones. Rated likewise.

Everything is decided at the barrier from the seed and the storages, never from timing, so a self-play run is
bit-identical across layouts; the pool's weights, the ratings and the stream are in the checkpoint, so it resumes
exactly. ``sync`` and ``hts`` (one learner) take it. In ``hts`` the envs run ahead: at barrier j the learner draws
rollout j+2's opponents while rollout j+1 plays the ones drawn a barrier before, so a snapshot that leaves the pool
may still be playing. Its slot is not written until that rollout is over: the pool has one slot more than it
keeps snapshots (a new snapshot takes the spare, the one that left becomes the spare), and a rollout's games are
rated against the snapshots it was drawn, kept by version until no rollout names them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
import torch

from csrc_free_kernels.step_end import CONTINUES
from fastrl.buffers import RunBuffers
from fastrl.layers.agent_rows.elo import INITIAL_RATING, expected_score
from fastrl.layers.selfplay import SELFPLAY_STATS
from fastrl.learning.extensions import LearnerExtension, Storage
from fastrl.partition import learning_rows
from fastrl.spec import RunSpec

SELFPLAY_STREAM = 8  # seeding purpose of the opponents' draws (see fastrl.seeding)
RANDOM_VERSION = -1  # the random player's "version" in the drawn tables (-2: nothing drawn yet)
SCRIPTED_VERSION = -3  # the scripted player's
POOL = "pool"  # selfplay.opponents: the pool of past selves plays the other seats
OPPONENTS = "selfplay_opponents"  # its shared array: [2, games], each env's pool slot per rollout parity
SHARED = "shared"  # selfplay.opponents: every seat is the learning policy (parameter sharing)
RECENT_GAMES = 200  # the score in the metrics: over the learning seat's last games against the pool


@dataclass
class Snapshot:
    version: int  # the learner's version it was taken at
    slot: int  # its row of the shared pool
    rating: float


def pool_slots(options, run_ahead: bool) -> int:
    """The shared segment's pool slots: ``pool_size`` snapshots, a spare where the envs run ahead (``hts``: a
    snapshot that left the pool may still be playing), and the random player's where it plays."""
    return options.pool_size + run_ahead + (options.random_share > 0)


def scripted_slot(options, run_ahead: bool) -> int:
    """The scripted player's slot in the opponents' tables: the first past the shared segment's (it has no
    parameters there; each actor builds the player itself)."""
    return pool_slots(options, run_ahead)


class SelfPlayPool(LearnerExtension):
    """The learner's side of the pool (see the module's doc), as a learner extension: games rated from each
    storage's raw rewards, opponents drawn before each rollout's θ is published, the pool in the checkpoint."""

    key = "selfplay"

    def __init__(self, spec: RunSpec, buffers: RunBuffers, stats: np.ndarray):
        self.options = spec.config.selfplay
        self.agents = spec.env_unit
        self.rows = learning_rows(spec.envs, self.agents)
        spare = int(spec.mode.run_ahead)  # hts: a slot that no rollout in flight plays, for the next snapshot
        self.slots = [buffers.player_params(k) for k in range(self.options.pool_size + spare)]
        self.spare = self.options.pool_size if spare else None
        self.table = buffers.layer_array(OPPONENTS)
        self.stats = stats
        self.column = {name: buffers.control.stat_column(name) for name in SELFPLAY_STATS}
        self.entries: list[Snapshot] = []
        # each rollout parity's opponents by snapshot version (-1: the random player): its games are rated against
        # them, also after they left the pool (hts); ``retired``: the ones that left and a rollout still names
        self.drawn = np.full((2, len(self.rows)), RANDOM_VERSION - 1, np.int64)
        self.retired: dict[int, Snapshot] = {}
        # the uniformly random player: zero parameters give every action the same logit (every legal one, masked)
        slot = len(self.slots)
        self.random = Snapshot(RANDOM_VERSION, slot, INITIAL_RATING) if self.options.random_share else None
        if self.random is not None:
            random_slot = buffers.player_params(self.random.slot)
            random_slot.write_flat(torch.zeros_like(random_slot.flat), 0)
        self.against_random: deque[float] = deque(maxlen=RECENT_GAMES)
        self.scripted = (
            Snapshot(SCRIPTED_VERSION, scripted_slot(self.options, spec.mode.run_ahead), INITIAL_RATING)
            if self.options.scripted_share
            else None
        )
        self.against_scripted: deque[float] = deque(maxlen=RECENT_GAMES)
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
        drawn = [self.entries[i] for i in self._draw()]
        slots = np.array([entry.slot for entry in drawn])
        versions = np.array([entry.version for entry in drawn])
        if self.random is not None or self.scripted is not None:  # after the snapshots: without, as before
            fixed = self.rng.random(len(slots))  # one draw per game: [0, random_share) random, then scripted
            for player, low, high in self._fixed_shares():
                chosen = (fixed >= low) & (fixed < high)
                slots[chosen], versions[chosen] = player.slot, player.version
        self.table[version % 2] = slots
        self.drawn[version % 2] = versions
        self._forget_retired()
        self.prepared = version
        self.stats[self.column["pool_size"]] = len(self.entries)

    def observe(self, storage, rollout: int) -> None:
        """Rate the learning seat's games that ended in ``rollout`` against the snapshots they were played with."""
        steps = storage["reward"].shape[1] - 1
        rewards = storage["reward"][self.rows, :steps]
        ends = storage["done"][self.rows, :steps] != CONTINUES
        by_version = self._by_version()
        opponents = self.drawn[rollout % 2]
        for g in range(len(self.rows)):
            for t in range(steps):
                self.returns[g] += rewards[g, t]
                if ends[g, t]:
                    self._rate(by_version[int(opponents[g])], float(np.sign(self.returns[g]) + 1) / 2)
                    self.returns[g] = 0.0
        self.stats[self.column["elo"]] = self.rating
        self.stats[self.column["pool_score"]] = float(np.mean(self.recent)) if self.recent else float("nan")
        self.stats[self.column["pool_games"]] = self.games
        self.stats[self.column["random_score"]] = (
            float(np.mean(self.against_random)) if self.against_random else float("nan")
        )
        self.stats[self.column["scripted_score"]] = (
            float(np.mean(self.against_scripted)) if self.against_scripted else float("nan")
        )

    def _fixed_shares(self) -> list[tuple[Snapshot, float, float]]:
        """The fixed players and their intervals of the per-game draw."""
        random_share = self.options.random_share
        shares = [
            (self.random, 0.0, random_share),
            (self.scripted, random_share, random_share + self.options.scripted_share),
        ]
        return [(player, low, high) for player, low, high in shares if player is not None]

    def _snapshot(self, version: int, model: torch.nn.Module) -> None:
        if len(self.entries) < self.options.pool_size:
            slot = len(self.entries)
        else:
            oldest = self.entries.pop(0)  # leaves the pool
            self.retired[oldest.version] = oldest  # rated still, for a rollout drawn with it
            if self.spare is None:  # sync's barrier: no rollout is acting with it
                slot = oldest.slot
            else:  # hts: rollout j+1 may be; the spare is no rollout's, and the oldest's slot is the next spare
                slot, self.spare = self.spare, oldest.slot
        self.slots[slot].publish(model, version)
        self.entries.append(Snapshot(version, slot, self.rating))

    def _by_version(self) -> dict[int, Snapshot]:
        known = {entry.version: entry for entry in (*self.entries, *self._fixed_players())}
        return {**self.retired, **known}

    def _fixed_players(self) -> list[Snapshot]:
        return [player for player in (self.random, self.scripted) if player is not None]

    def _forget_retired(self) -> None:
        named = set(self.drawn.ravel().tolist())
        self.retired = {v: entry for v, entry in self.retired.items() if v in named}

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
        if opponent is self.scripted:
            self.against_scripted.append(score)
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
            "scripted": None if self.scripted is None else (self.scripted.rating, list(self.against_scripted)),
            "table": torch.from_numpy(self.table.copy()),
            "drawn": torch.from_numpy(self.drawn.copy()),
            "retired": [(e.version, e.slot, e.rating) for e in self.retired.values()],
            "spare": self.spare,
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
        if self.scripted is not None and state.get("scripted") is not None:
            rating, scores = state["scripted"]
            self.scripted.rating = float(rating)
            self.against_scripted.extend(scores)
        self.table[:] = state["table"].numpy()
        self.retired = {int(v): Snapshot(int(v), int(s), float(r)) for v, s, r in state.get("retired", [])}
        if state.get("spare") is not None:
            self.spare = int(state["spare"])
        if "drawn" in state:
            self.drawn[:] = state["drawn"].numpy()
        else:  # a checkpoint from before ``drawn`` (sync only): each slot's entry is the one it was drawn
            version_of = {e.slot: e.version for e in (*self.entries, *self._fixed_players())}
            self.drawn[:] = np.vectorize(lambda slot: version_of.get(int(slot), RANDOM_VERSION - 1))(self.table)
        self.prepared = int(state["prepared"])
        self.stats[self.column["pool_size"]] = len(self.entries)
        self.stats[self.column["elo"]] = self.rating

    # ------------------------------------------------------------------ as a learner extension

    def before_learning(self, storage: Storage, rollout: int, env_ids: np.ndarray | None) -> Storage:
        self.observe(storage, rollout)
        return storage

    def publishing(self, model: torch.nn.Module, version: int) -> None:
        self.prepare(version, model)


def selfplay_pool(learner) -> SelfPlayPool | None:
    """The pool of a run with ``selfplay.opponents = "pool"``; None otherwise."""
    if learner.spec.config.selfplay.opponents != POOL:
        return None
    return SelfPlayPool(learner.spec, learner.buffers, learner.stats)
