"""gala across ranks (torchrun): one ring over every learner of every rank, and Proposition 1 measured over all.

Learner i of rank r is member g = r·L + i of G = R·L (L = ``engine.learners``, per rank); its ring in-peer is
member (g − 1) mod G (``fastrl.layers.gossip.bounds.in_peers``). Every gala learner of every rank joins one process
group (``cohort.join_group``). Peers on the same rank keep their shared-memory mailboxes
(``fastrl.layers.gossip.mixing``); this module carries what crosses ranks.

**Ring messages between ranks.** A message is the half-step's flat vector behind a header holding the update
that produced it (``GossipMessage``), sent point to point (``isend``/``irecv``). What the shared-memory
mailbox keeps beside its vector lives in the launch's store, under ``gala/`` (``Board``), per edge h → g:
``sent/<h>-<g>`` the update of h's message in flight to g, ``taken/<h>-<g>`` the update of the last one g
received, and ``final/<h>``: h sends no more. Why the store: gloo's point-to-point requests say they
completed only from ``wait()``, and a ``wait`` whose timeout expires closes the connection, so they cannot
be tested without blocking; a store counter is one small round trip and never blocks.

- A sender has at most one message in flight per out-peer: it posts update k only once the out-peer took
  the one in flight (taken ≥ sent), else it skips k; nothing piles up, and what it posts next is its newest.
  Skipping rather than waiting keeps the sender non-blocking, and the out-peer still never goes without a
  message while one is in flight, so the τ′ rule below bounds its staleness as on one node. With
  ``gala.deterministic`` the sender waits for the out-peer to take update k − 1 instead (every update's
  message is sent, in order: the shared-memory mailbox's rule).
- A receiver that sees sent > taken receives the one message in flight (a transfer, not a wait for the
  peer's progress) and sets taken. Whether to wait at all is gossip's τ′ rule, unchanged: only after
  ``gala.max_staleness`` updates without a new message (``gala.deterministic``: for message k exactly).
- ``final/<g>`` outlives g's process: a receiver never waits on a learner that ended, a sender stops sending
  to one, and a failed transfer with a learner that ended is no fault. Any other failed transfer raises
  ``PeerRankLost`` naming the learner and its rank.

**Finishing together.** Whether to finish early (the target, which rank 0 judges; the time limit;
Ctrl-C) is one rank's flag, but the ring is every rank's: a learner whose rank raised it says so in the
store (``finish_wanted``), and a learner that reads it there (every ``FINISH_POLL_S``) raises its own rank's, so
every learner finishes at its next barrier, as sync's barriers agree it.

**allreduce** across ranks (``fastrl.layers.gossip.group``): every update, one all-reduce of the gradient over
all G learners (gloo and NCCL give every member the same bits), with one more element: "this learner
finished". A learner that finishes takes part once more with it set, so its peers end at that update too
(``PeerFinished``), as on one node.

**Proposition 1 over all G learners: consensus rounds** (``fastrl.layers.gossip.group.ConsensusRounds``). In
round m every learner all-reduces, without waiting on it, its θ in float64 (sum: x̄ over all G) and [its
largest update norm, its staleness, its distance at round m − 1] (max). Once both are in: its own ‖x_g − x̄‖,
the bound from every learner's largest update norm and staleness, and the largest distance over all G at round
m − 1. A learner posts a round only after its previous one completed, so at most one is pending (no copies of
θ queue up for a slower learner). When: in lockstep schedules (allreduce, ``gala.deterministic``) at every
``ROUND_UPDATES``-th update, so x̄ is the average at one update k, Proposition 1's own quantity; otherwise
(learners at different updates) at each learner's first update ``ROUND_INTERVAL_S`` after it saw the
previous round complete: every learner gives the θ it holds at about the same moment.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

from fastrl.buffers.control import Flag
from fastrl.layers.gossip.group import ConsensusRounds, GroupReduce, Wait, first_line, flatten, unflatten
from fastrl.ranks.cohort import PeerRankLost, join_group

log = logging.getLogger(__name__)

HEADER = 2  # float32 slots before the vector: one int64, the update that produced the message
TAG = 0  # one message stream per ordered pair of learners
FINISH_POLL_S = 0.2  # how often a learner reads whether another rank wants to finish


@dataclass(frozen=True)
class Place:
    """Where one rank's learners sit among every rank's: member g = rank·learners + i."""

    rank: int
    learners: int  # per rank
    ranks: int

    @property
    def members(self) -> int:
        return self.learners * self.ranks

    def member(self, learner: int) -> int:
        return self.rank * self.learners + learner

    def is_local(self, member: int) -> bool:
        return member // self.learners == self.rank

    def local(self, member: int) -> int:
        return member % self.learners

    def name(self, member: int) -> str:
        return f"learner {member % self.learners} of rank {member // self.learners}"


@dataclass(frozen=True)
class GossipMessage:
    """One half-step on the wire: the update that produced it, then θ's flat vector (float32)."""

    update: int
    params: torch.Tensor

    @staticmethod
    def wire(n_params: int, device: torch.device) -> torch.Tensor:
        return torch.zeros(HEADER + n_params, dtype=torch.float32, device=device)

    def encode(self, wire: torch.Tensor) -> None:
        wire[:HEADER].view(torch.int64)[0] = self.update
        wire[HEADER:].copy_(self.params)

    @staticmethod
    def decode(wire: torch.Tensor) -> GossipMessage:
        return GossipMessage(int(wire[:HEADER].view(torch.int64)[0]), wire[HEADER:])


class Board:
    """The mailbox headers of the messages between ranks, as counters in the launch's store (``gala/``)."""

    def __init__(self, ranks, place: Place, member: int):
        self.store = dist.PrefixStore("gala/", ranks.connect())
        self.where, self.place, self.member = f"{ranks.addr}:{ranks.port}", place, member
        self.finals: set[int] = set()  # members seen final (final never goes back)

    def sent(self, sender: int, receiver: int) -> int:
        return self.count(f"sent/{sender}-{receiver}")

    def taken(self, sender: int, receiver: int) -> int:
        return self.count(f"taken/{sender}-{receiver}")

    def final(self, member: int) -> bool:
        if member not in self.finals and self.count(f"final/{member}"):
            self.finals.add(member)
        return member in self.finals

    def any_final(self) -> bool:
        """Some learner of the launch finished (it stops taking part in consensus rounds)."""
        return self.count("finished") > 0

    def advance(self, key: str, by: int) -> None:
        """Counters only grow and each has one writer, which knows its value: add the difference."""
        self._call(lambda: self.store.add(key, by))

    def mark_final(self) -> None:
        self.advance(f"final/{self.member}", 1)
        self.advance("finished", 1)

    def want_finish(self) -> None:
        self.advance("finish_wanted", 1)

    def finish_wanted(self) -> bool:
        """Some rank raised its finish flag (the target, the time limit, Ctrl-C)."""
        return self.count("finish_wanted") > 0

    def count(self, key: str) -> int:
        return int(self._call(lambda: self.store.add(key, 0)))  # add 0: read, creating it at 0, never blocking

    def _call(self, call):
        try:
            return call()
        except Exception as exc:  # noqa: BLE001 - a store timeout or a lost connection alike
            raise PeerRankLost(
                f"gala {self.place.name(self.member)}: lost the rendezvous store at {self.where} "
                f"({first_line(exc)}): rank 0 or torchrun's agent is gone"
            ) from None


class RemoteInbox:
    """Messages from an in-peer on another rank (``Gossip._receive`` reads it like a shared-memory mailbox)."""

    def __init__(self, board: Board, peer: int, n_params: int, device: torch.device):
        self.board, self.peer = board, peer
        self.wire = GossipMessage.wire(n_params, device)
        self.taken = 0  # the update of the last message received
        self.lost = False  # the peer ended with a message in flight that could not be received: no more

    def newest(self) -> int:
        """The update of the newest message there is to receive (that of the last received if none)."""
        return self.taken if self.lost else self.board.sent(self.peer, self.board.member)

    def gone(self) -> bool:
        return self.lost or self.board.final(self.peer)

    def take(self, model: torch.nn.Module) -> int | None:
        """Receive the message in flight into ``model``; its update, or None when its sender ended first."""
        try:
            dist.irecv(self.wire, src=self.peer, tag=TAG).wait()
        except Exception as exc:  # noqa: BLE001 - gloo and nccl raise RuntimeError subclasses of their own
            if self.board.final(self.peer):
                self.lost = True
                return None
            raise PeerRankLost(
                f"gala {self.board.place.name(self.board.member)}: receiving the gossip message of "
                f"{self.board.place.name(self.peer)} failed ({first_line(exc)}); that rank died, hung "
                "past dist.timeout_s or left"
            ) from None
        message = GossipMessage.decode(self.wire)
        unflatten(message.params, model)
        self.board.advance(f"taken/{self.peer}-{self.board.member}", message.update - self.taken)
        self.taken = message.update
        return message.update


class RemoteOutbox:
    """Messages to an out-peer on another rank: at most one in flight."""

    def __init__(self, board: Board, peer: int, n_params: int, device: torch.device, deterministic: bool, wait: Wait):
        self.board, self.peer, self.deterministic, self.wait = board, peer, deterministic, wait
        self.wire = GossipMessage.wire(n_params, device)  # never written while its message is in flight
        self.params = torch.empty(n_params, dtype=torch.float32, device=device)
        self.in_flight: tuple[int, dist.Work] | None = None  # (update, request)
        self.closed = False  # the out-peer ended: nothing more to send
        self.sent = 0  # the update of the last message posted
        self.messages = self.skipped = 0  # posted; not posted, one being in flight

    def send(self, model: torch.nn.Module, update: int) -> None:
        if self.closed:
            return
        if not self._free():
            self.skipped += 1
            return
        GossipMessage(update, flatten(model, self.params)).encode(self.wire)
        try:
            request = dist.isend(self.wire, dst=self.peer, tag=TAG)
        except Exception as exc:  # noqa: BLE001
            self._failed(exc)
            return
        assert request is not None, "isend returns no request only to a rank outside the group; every rank is in it"
        self.board.advance(f"sent/{self.board.member}-{self.peer}", update - self.sent)
        self.sent, self.in_flight = update, (update, request)
        self.messages += 1

    def _free(self) -> bool:
        """Whether the out-peer took the message in flight (deterministic: wait until it did)."""
        if self.in_flight is None:
            return True
        update, request = self.in_flight
        if self.deterministic:
            if not self.wait(lambda: self._taken() >= update, lambda: self.board.final(self.peer)):
                self.closed = True
                return False
        elif self._taken() < update:
            return False  # still in flight: skip this update, send a newer one later
        try:
            request.wait()  # received already: returns at once, and frees the request
        except Exception as exc:  # noqa: BLE001
            self._failed(exc)
            return False
        self.in_flight = None
        return True

    def _taken(self) -> int:
        return self.board.taken(self.board.member, self.peer)

    def _failed(self, exc: Exception) -> None:
        if self.board.final(self.peer):
            self.closed = True  # it ended and its process went: no fault
            return
        raise PeerRankLost(
            f"gala {self.board.place.name(self.board.member)}: sending its gossip message to "
            f"{self.board.place.name(self.peer)} failed ({first_line(exc)}); that rank died, hung past "
            "dist.timeout_s or left"
        )


class RankGossip:
    """One learner's links to the learners of the other ranks: its group, its board, its boxes, its rounds."""

    def __init__(self, spec, place: Place, member: int, model: torch.nn.Module, wait: Wait):
        gala, ranks = spec.config.gala, spec.ranks
        device = next(model.parameters()).device
        self.place, self.member = place, member
        self.name = place.name(member)
        join_group(ranks, member, place.members, device)
        self.device = device if ranks.backend == "nccl" else torch.device("cpu")
        self.board = Board(ranks, place, member)
        self.n_params = sum(t.numel() for t in model.state_dict().values())
        self.deterministic, self.wait = gala.deterministic, wait
        n_grads = sum(p.numel() for p in model.parameters())
        self.reducer = (
            GroupReduce(place.members, n_grads, self.device, wait, self.name) if gala.mixing == "allreduce" else None
        )
        lockstep = gala.mixing == "allreduce" or (gala.mixing == "ring" and gala.deterministic)
        self.rounds = ConsensusRounds(place.members, self.n_params, lockstep, self.device, self.board, wait, self.name)
        self.outboxes: list[RemoteOutbox] = []
        self.finish_said, self.finish_read_at = False, 0.0

    def inbox(self, peer: int) -> RemoteInbox:
        return RemoteInbox(self.board, peer, self.n_params, self.device)

    def outbox(self, peer: int) -> RemoteOutbox:
        box = RemoteOutbox(self.board, peer, self.n_params, self.device, self.deterministic, self.wait)
        self.outboxes.append(box)
        return box

    def share_finish(self, control) -> None:
        """This rank wants to finish: tell every rank; another rank does: raise this rank's flag."""
        if control.is_set(Flag.FINISH):
            if not self.finish_said:
                self.board.want_finish()
                self.finish_said = True
            return
        now = time.monotonic()
        if now - self.finish_read_at >= FINISH_POLL_S:
            self.finish_read_at = now
            if self.board.finish_wanted():
                control.set(Flag.FINISH)

    def finish(self, stopping: bool) -> None:
        """This learner sends no more: the store says so (for good), allreduce peers end at this update."""
        try:
            self.board.mark_final()
        except PeerRankLost as exc:
            log.warning("%s", exc)  # the store is gone: so are the peers that would read it
        if self.reducer is not None and not stopping:
            self.reducer.finish()
        last = self.rounds.last
        if last is not None:
            log.info(
                "gala %s: %d consensus rounds over %d learners; the last at update %d: distance %.6g, largest "
                "update norm %.6g, staleness %d",
                self.name,
                self.rounds.rounds,
                self.place.members,
                last.update,
                last.distance,
                last.largest,
                last.staleness,
            )
        for box in self.outboxes:
            log.info(
                "gala %s: %d messages sent to %s, %d updates not sent (one was in flight)",
                self.name,
                box.messages,
                self.place.name(box.peer),
                box.skipped,
            )
