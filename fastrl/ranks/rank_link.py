"""What the main processes of a torchrun launch's ranks tell each other through its store, never tensors: the run
directory rank 0 chose, the checkpoint every rank resumes, a heartbeat, the episodes and frames rank 0's metrics sum
over ranks, and why a rank failed, so that every other rank ends naming it (``RankLink``)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from fastrl.config import ConfigError
from fastrl.errors import FastrlError
from fastrl.spec import Ranks

BEAT_INTERVAL_S = 0.5
SILENT_S = 3 * BEAT_INTERVAL_S  # a rank whose beat has not moved for this long, when this one ends, is gone


class RankLink:
    """What the main process of each rank tells the others, through the launch's store."""

    def __init__(self, ranks: Ranks):
        self.ranks = ranks
        self.store = ranks.connect(host=ranks.leader and not ranks.agent_store)
        self.rank = ranks.rank
        self.beats = 0
        self.last_beat = 0.0
        self.seen = {r: (-1, time.monotonic()) for r in range(ranks.ranks) if r != self.rank}  # beat count, when
        self.sent_episodes = 0
        self.read_episodes = {r: 0 for r in range(1, ranks.ranks)}
        self.outbox: list[tuple[int, float, int]] = []
        self.frames = {r: 0.0 for r in range(1, ranks.ranks)}

    # ------------------------------------------------------------------ before the run

    def agree_run_dir(self, choose: Callable[[], Path]) -> Path:
        """Rank 0's run directory (``choose``: the one named, or one it makes now), for every rank: default names
        carry a time stamp, so only rank 0 chooses."""
        if self.ranks.leader:
            chosen = choose()
            self.store.set("run_dir", str(chosen))
            return chosen
        return Path(self._get("run_dir").decode())

    def agree_resume(self, wanted: int, available: list[int], explicit: bool) -> int:
        """The rollout every rank resumes from: the one each would (their latest checkpoints, which a fault
        may have left at different rollouts), else the newest every rank has, unless a file was named."""
        self.store.set(f"resume/{self.rank}", json.dumps({"wanted": wanted, "available": available}))
        every = {r: json.loads(self._get(f"resume/{r}")) for r in range(self.ranks.ranks)}
        if len({e["wanted"] for e in every.values()}) == 1:
            return wanted
        common = set.intersection(*(set(e["available"]) for e in every.values()))
        if explicit or not common:
            listed = ", ".join(f"rank {r} at rollout {e['wanted']}" for r, e in every.items())
            raise ConfigError(
                f"the ranks' checkpoints are at different rollouts ({listed}) and "
                + ("a checkpoint file was named" if explicit else "no rollout is checkpointed on every rank")
                + ": resume from one every rank has, --resume RUN/checkpoints/ckpt-<rollout>.pt"
            )
        return max(common)

    def _get(self, key: str) -> bytes:
        try:
            return self.store.get(key)
        except Exception as exc:  # noqa: BLE001 - a store timeout or a lost connection alike
            raise ConfigError(
                f"rank {self.rank}: no answer for {key!r} from the other ranks within dist.timeout_s = "
                f"{self.ranks.timeout_s:g} ({exc})"
            ) from None

    # ------------------------------------------------------------------ while it runs

    def episodes(self, take_local: Callable[[], list]) -> Callable[[], list]:
        """The episodes source of this rank's metrics: its own; rank 0's also every other rank's
        (without an env index: they count in the run's return, not in a learner's)."""

        def take() -> list:
            local = take_local()
            if not self.ranks.leader:
                self.outbox += local
                return local
            return local + self._take_remote()

        return take

    def remote_frames(self) -> float:
        """The frames the other ranks' learners reported last (rank 0's metrics sum them with its own)."""
        return float(sum(self.frames.values()))

    def tick(self, frames: float) -> None:
        """Beat, pass on episodes and frames; raise ``RankFailed`` when another rank failed or went silent."""
        now = time.monotonic()
        if now - self.last_beat < BEAT_INTERVAL_S:
            return
        self.last_beat = now
        self.beats += 1
        try:
            self.store.set(f"beat/{self.rank}", str(self.beats))
            if not self.ranks.leader:
                self._send(frames)
            self._check_others(now)
        except RankFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - the store's host (rank 0 or torchrun's agent) is gone
            raise RankFailed(
                f"lost the rendezvous store at {self.ranks.addr}:{self.ranks.port} ({exc}): rank 0 or "
                "torchrun's agent is gone"
            ) from None

    def _send(self, frames: float) -> None:
        self.store.set(f"frames/{self.rank}", str(frames))
        if self.outbox:
            self.store.set(f"episodes/{self.rank}/{self.sent_episodes}", json.dumps(self.outbox))
            self.outbox = []
            self.sent_episodes = self.store.add(f"episodes/{self.rank}/count", 1)

    def _take_remote(self) -> list:
        taken = []
        for r, read in self.read_episodes.items():
            try:
                count = self.store.add(f"episodes/{r}/count", 0)
                for k in range(read, count):
                    key = f"episodes/{r}/{k}"
                    taken += [(None, *episode) for _env, *episode in json.loads(self.store.get(key))]
                    self.store.delete_key(key)
                self.read_episodes[r] = count
                if self.store.check([f"frames/{r}"]):
                    self.frames[r] = float(self.store.get(f"frames/{r}"))
            except Exception:  # noqa: BLE001 - tick() reports a lost store; metrics go on without
                break
        return taken

    def _check_others(self, now: float) -> None:
        for r, (count, since) in self.seen.items():
            if self.store.check([f"status/{r}"]):
                raise RankFailed(f"rank {r} failed: {self.store.get(f'status/{r}').decode()}", rank=r)
            beat = int(self.store.get(f"beat/{r}")) if self.store.check([f"beat/{r}"]) else -1
            if beat != count:
                self.seen[r] = (beat, now)
            elif beat >= 0 and now - since > self.ranks.timeout_s and not self._ended(r):
                raise RankFailed(
                    f"rank {r} went silent: no heartbeat for {now - since:.0f} s (dist.timeout_s = "
                    f"{self.ranks.timeout_s:g}); it died or its machine is unreachable",
                    rank=r,
                )

    def report(self, status: str, how: str = "failed") -> None:
        """This rank ends: ``failed`` (the others end too, naming it), ``stopped`` (a signal) or ``done``;
        after either of the last two its silence is no fault (best effort: the store may be gone)."""
        try:
            self.store.set(f"{ {'failed': 'status', 'stopped': 'stopped', 'done': 'done'}[how] }/{self.rank}", status)
        except Exception:  # noqa: BLE001
            pass

    def _ended(self, r: int) -> bool:
        return self.store.check([f"done/{r}"]) or self.store.check([f"stopped/{r}"])

    def explain(self) -> str:
        """Which other rank ended this one: one that reported a failure, else one gone silent without a word
        (killed, or its machine lost), watched for up to ``SILENT_S`` to tell; '' when none is known."""
        try:
            deadline = time.monotonic() + 2 * SILENT_S
            undecided = set(self.seen)
            while undecided and time.monotonic() < deadline:
                for r in sorted(undecided):
                    verdict = self._verdict(r)
                    if verdict is not None:
                        if verdict:
                            return verdict
                        undecided.discard(r)
                time.sleep(0.05)
        except Exception:  # noqa: BLE001 - the store may be gone with the rank that hosted it
            pass
        return ""

    def _verdict(self, r: int) -> str | None:
        """Rank r's part in this rank's end: its failure or its silence (a message), no part (''), or
        not known yet (None)."""
        if self.store.check([f"status/{r}"]):
            return f"rank {r} failed first: {self.store.get(f'status/{r}').decode()}"
        if self._ended(r):
            return ""
        count, since = self.seen[r]
        beat = int(self.store.get(f"beat/{r}")) if self.store.check([f"beat/{r}"]) else -1
        now = time.monotonic()
        if beat != count:  # it beat since this rank last looked: watch on (killed just after, or alive)
            self.seen[r] = (beat, now)
            return None
        if now - since > SILENT_S:
            return f"rank {r} went silent {now - since:.1f} s ago without reporting anything: it was killed or lost"
        return None


class RankFailed(FastrlError):
    """Another rank failed or went silent; ``rank`` names it when known."""

    def __init__(self, what: str, rank: int | None = None):
        super().__init__(what)
        self.rank = rank
