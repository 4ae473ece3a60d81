"""One gala learner's side of the gossip: mailboxes in shared memory, never tensors on a queue.

``ring``: after its local update k a learner publishes its half-step into its own mailbox (a
seqlocked vector with the update number as version) and averages in its in-peer's last
message, if that is new. Non-blocking: it waits only when more than ``gala.max_staleness`` of
its updates went by without a new message. ``gala.deterministic``: update k mixes exactly the
in-peer's message of update k, and a sender waits until its out-peer has read its previous
message, so the mixing never depends on timing.

``allreduce``: every learner writes its gradient of update k into row k % 2 of the shared
gradient table, waits for all of them, and sums them in learner order: the same bits in every
learner, so learners that start equal stay bit-identical. Two rows suffice: a learner writes
update k+2 only after every learner posted k+1, which each did after reading update k.

A learner that finishes marks its mailbox final; peers stop waiting for it. Waits beat the
heartbeat (a slow peer is not a hang) and end at the stop flag.

Under torchrun (``spec.ranks``) the ring runs over every learner of every rank: learner i of rank r is
member r·L + i of R·L, its in-peer the member before it. Peers on this rank keep the mailboxes above;
peers on other ranks are reached through ``fastrl.layers.gossip.ring`` (point to point, with the
mailbox header in the launch's store), behind the same inbox/outbox interface, so the τ′ rule and the
deterministic schedule are this module's for both. allreduce becomes one collective over every learner,
and the consensus measurements become rounds over every learner (``gala_group.ConsensusRounds``).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable

import numpy as np
import torch

from fastrl.buffers import RunBuffers
from fastrl.buffers.control import Flag, Stat
from fastrl.buffers.params import VERSION, SharedParams
from fastrl.errors import StopRequested
from fastrl.layers.gossip import GOSSIP_STATS
from fastrl.layers.gossip.bounds import consensus_bound, in_peers
from fastrl.layers.gossip.ring import Place, RankGossip
from fastrl.learning.extensions import LearnerExtension, PeerFinished

# mailbox header columns after the seqlock's [SEQ, VERSION]: the version the out-peer read last, "sends no more"
CONSUMED, FINAL = VERSION + 1, VERSION + 2
# allreduce header columns: the update this learner posted last, "posts no more"
POSTED, REDUCE_FINAL = 0, 1
BEAT_INTERVAL_S = 0.2
MAX_PAUSE_S = 0.001
# ‖x_i − x̄‖ reads every learner's θ (a copy of each and a float64 mean: ~14 MB a learner on the Pong
# CNN, beside an update of 40 samples), so it is sampled, not taken after every update. Metrics lines
# (every run.log_interval_s) read it, so a few samples per line are plenty.
CONSENSUS_INTERVAL_S = 0.5


class ShmInbox:
    """An in-peer on this rank: its mailbox in the run's segment."""

    def __init__(self, mailbox: SharedParams, header: np.ndarray):
        self.mailbox, self.header = mailbox, header

    def newest(self) -> int:
        return int(self.header[VERSION])

    def gone(self) -> bool:
        return bool(self.header[FINAL])

    def take(self, model: torch.nn.Module) -> int:
        version = self.mailbox.load_into(model, -1)
        self.header[CONSUMED] = version
        return version


class ShmOutbox:
    """This learner's own mailbox, read by its out-peers on this rank."""

    def __init__(
        self,
        mailbox: SharedParams,
        header: np.ndarray,
        out_headers: list[np.ndarray],
        deterministic: bool,
        wait: Callable,
    ):
        self.mailbox, self.header, self.out_headers = mailbox, header, out_headers
        self.deterministic, self.wait = deterministic, wait

    def send(self, model: torch.nn.Module, update: int) -> None:
        if self.deterministic:  # the out-peer must have read update - 1 before it is overwritten
            header, out_final = self.header, self.out_headers
            self.wait(lambda: header[CONSUMED] >= update - 1, lambda: any(h[FINAL] for h in out_final))
        self.mailbox.publish(model, update)


class Gossip(LearnerExtension):
    """A gala learner's gossip, as the learner extension it is: peers awaited at the start, gradients averaged
    before each step (allreduce), θ mixed after each update (ring) and the consensus measured once it is
    published."""

    def __init__(self, spec, buffers: RunBuffers, learner: int, model: torch.nn.Module, worker: int):
        gala = spec.config.gala
        self.learners, self.index, self.worker = spec.learners, learner, worker
        self.mixing, self.deterministic, self.max_staleness = gala.mixing, gala.deterministic, gala.max_staleness
        self.control = buffers.control
        self.stats = buffers.control.learner_stats
        self.column = {name: buffers.control.stat_column(name) for name in GOSSIP_STATS}  # the layer's own columns
        arrays = buffers.arena.arrays
        self.mail_header = arrays["mailbox_header"]
        self.reduce_header = arrays["allreduce_header"]
        self.reduce_rows = torch.from_numpy(arrays["allreduce"])
        ranks = getattr(spec, "ranks", None)
        self.place = Place(ranks.rank, spec.learners, ranks.ranks) if ranks else Place(0, spec.learners, 1)
        self.member, self.members = self.place.member(learner), self.place.members  # over every rank
        self.link = RankGossip(spec, self.place, self.member, model, self._wait) if ranks else None
        self.in_peers = in_peers(self.mixing, self.members, self.member)
        self.out_peers = [j for j in range(self.members) if self.member in in_peers(self.mixing, self.members, j)]
        self.inboxes = [self._inbox(buffers, j) for j in self.in_peers]
        self.outboxes = self._outboxes(buffers)
        self.peer_models = [copy.deepcopy(model) for _ in self.in_peers]
        self.last_mixed = [0] * len(self.in_peers)  # version of the last message mixed from each in-peer
        self.since_message = 0
        self.update = 0  # the last update mixed
        self.published_params = [buffers.shared_params(j) for j in range(self.learners)]
        self.snapshot = torch.empty(
            (self.learners, buffers.shared_params(learner, "mailbox").flat.numel()), dtype=torch.float32
        )
        self.measured_at = -float("inf")  # perf_counter of the last consensus sample
        self.spec = spec

    def _inbox(self, buffers: RunBuffers, member: int):
        if not self.place.is_local(member):
            assert self.link is not None, "a learner on another rank is reached only through the ranks' link"
            return self.link.inbox(member)
        j = self.place.local(member)
        return ShmInbox(buffers.shared_params(j, "mailbox"), self.mail_header[j])

    def _outboxes(self, buffers: RunBuffers) -> list:
        """The mailbox, if an out-peer is on this rank; a link per out-peer on another rank."""
        local = [self.place.local(j) for j in self.out_peers if self.place.is_local(j)]
        remote = [j for j in self.out_peers if not self.place.is_local(j)]
        boxes: list = []
        if remote:
            assert self.link is not None, "a learner on another rank is reached only through the ranks' link"
            boxes = [self.link.outbox(j) for j in remote]
        if local:
            boxes.insert(
                0,
                ShmOutbox(
                    buffers.shared_params(self.index, "mailbox"),
                    self.mail_header[self.index],
                    [self.mail_header[j] for j in local],
                    self.deterministic,
                    self._wait,
                ),
            )
        return boxes

    # ------------------------------------------------------------------ allreduce

    @torch.no_grad()
    def reduce_gradients(self, grads: list[torch.Tensor], update: int) -> None:
        """allreduce: replace ``grads`` in place by every learner's average for ``update``."""
        if self.mixing != "allreduce":
            return
        if self.link is not None:  # one collective over every rank's learners
            assert self.link.reducer is not None, "allreduce mixing: the ranks' link holds the group's reducer"
            if not self.link.reducer.reduce(grads):
                raise PeerFinished(f"an allreduce peer finished before update {update}")
            return
        rows = self.reduce_rows[update % 2]
        mine, offset = rows[self.index], 0
        for g in grads:
            n = g.numel()
            mine[offset : offset + n].copy_(g.reshape(-1))
            offset += n
        self.reduce_header[self.index, POSTED] = update
        posted = self.reduce_header[:, POSTED]
        finished = self.reduce_header[:, REDUCE_FINAL]
        if not self._wait(
            lambda: bool((posted >= update).all()), lambda: bool(((posted < update) & (finished == 1)).any())
        ):
            raise PeerFinished(f"an allreduce peer finished before update {update}")
        total = rows[0, :offset].clone()
        for j in range(1, self.learners):  # the same order in every learner: the same bits
            total += rows[j, :offset]
        total /= self.learners
        offset = 0
        for g in grads:
            n = g.numel()
            g.copy_(total[offset : offset + n].view_as(g))
            offset += n

    # ------------------------------------------------------------------ ring

    @torch.no_grad()
    def mix(self, model: torch.nn.Module, update: int) -> None:
        """Send the half-step of ``update`` and average in what the in-peers sent (ring)."""
        self.update = update
        if self.link is not None:
            self.link.share_finish(self.control)
        if not self.in_peers:
            return
        for box in self.outboxes:
            box.send(model, update)
        fresh = [self._receive(k, update) for k in range(len(self.in_peers))]
        messages = [self.peer_models[k] for k, got in enumerate(fresh) if got]
        if not messages:
            self.since_message += 1
            return
        self.since_message = 0
        self.stats[self.index, self.column["mixes"]] += len(messages)
        weight = 1.0 / (1 + len(messages))
        peers = [m.state_dict() for m in messages]
        for name, x in model.state_dict().items():
            for peer in peers:
                x.add_(peer[name])
            x.mul_(weight)

    def _receive(self, k: int, update: int) -> bool:
        """Load in-peer k's message if there is one to mix now; waits as the schedule requires."""
        inbox = self.inboxes[k]
        last = self.last_mixed[k]
        if self.deterministic:
            wanted = update
        elif inbox.newest() > last or self.since_message < self.max_staleness:
            wanted = last + 1  # non-blocking: take whatever is newer, if anything
            if inbox.newest() < wanted:
                self._note_staleness(self.since_message + 1)
                return False
        else:
            wanted = last + 1  # more than max_staleness updates without news: wait for a message
        if not self._wait(lambda: inbox.newest() >= wanted, inbox.gone):
            return False
        version = inbox.take(self.peer_models[k])
        if version is None:  # an in-peer on another rank ended before its last message could be received
            return False
        if self.deterministic and version != update:
            raise RuntimeError(f"gala deterministic gossip: expected the message of update {update}, got {version}")
        self.last_mixed[k] = version
        self.stats[self.index, self.column["message_age"]] = update - version
        return True

    def start(self) -> None:
        """Start together: a learner whose peers are still starting up would run ahead alone."""
        ids, ready = self.spec.worker_ids, self.control.ready
        learners = [ids.learner(i) for i in range(self.learners)]
        self._wait(lambda: bool(ready[learners].all()), lambda: False)

    def updated(self, model: torch.nn.Module, version: int) -> None:
        self.mix(model, version)

    def published(self, model: torch.nn.Module, last: bool) -> None:
        self.measure(model, final=last)

    def _note_staleness(self, updates: int) -> None:
        row = self.stats[self.index]
        row[self.column["staleness"]] = max(row[self.column["staleness"]], updates)

    # ------------------------------------------------------------------ consensus

    @torch.no_grad()
    def measure(self, model: torch.nn.Module, final: bool = False) -> None:
        """‖x_i − x̄‖ over every learner's published θ (this one's just published), and the bound beside it,
        at most every ``CONSENSUS_INTERVAL_S`` and after the ``final`` update (the summary's figure). Under
        torchrun: over every rank's learners, in consensus rounds (``gala_group.ConsensusRounds``, which every
        learner steps after every update)."""
        if self.link is not None:
            self._measure_rounds(model)
            return
        now = time.perf_counter()
        if not final and now - self.measured_at < CONSENSUS_INTERVAL_S:
            return
        self.measured_at = now
        for j, params in enumerate(self.published_params):
            params.read_flat(self.snapshot[j])
        mean = self.snapshot.double().mean(0)
        distance = float(torch.linalg.vector_norm(self.snapshot[self.index].double() - mean))
        stats = self.stats
        largest = float(stats[:, Stat.MAX_UPDATE_NORM].max())
        staleness = int(stats[:, self.column["staleness"]].max())
        stats[self.index, self.column["consensus"]] = distance
        stats[self.index, self.column["bound"]] = consensus_bound(
            self.mixing, self.learners, largest, self.deterministic, staleness
        )

    def _measure_rounds(self, model: torch.nn.Module) -> None:
        """A completed round's numbers: this learner's distance to the mean of all, the bound from every
        learner's largest update and staleness, and the previous round's radius over every learner."""
        assert self.link is not None, "consensus rounds run over the ranks' link"
        row = self.stats[self.index]
        done = self.link.rounds.step(
            model, self.update, float(row[Stat.MAX_UPDATE_NORM]), int(row[self.column["staleness"]])
        )
        if done is None:
            return
        row[self.column["consensus"]] = done.distance
        row[self.column["bound"]] = consensus_bound(
            self.mixing, self.members, done.largest, self.deterministic, done.staleness
        )
        row[self.column["radius"]] = max(done.previous_radius, 0.0)

    def finish(self) -> None:
        """This learner sends no more: peers stop waiting for it."""
        self.mail_header[self.index, FINAL] = 1
        self.reduce_header[self.index, REDUCE_FINAL] = 1
        if self.link is not None:
            self.link.finish(stopping=self.control.is_set(Flag.STOP))

    # ------------------------------------------------------------------ waiting

    def _wait(self, ready: Callable[[], bool], gone: Callable[[], bool]) -> bool:
        """Block until ``ready()`` (True) or the peer is gone without it (False)."""
        if ready():
            return True
        started = last_beat = time.perf_counter()
        pause = 1e-5
        try:
            while True:
                if ready():
                    return True
                if gone():
                    return ready()  # it may have sent its last message just before finishing
                if self.control.is_set(Flag.STOP):
                    raise StopRequested("the run is stopping")
                now = time.perf_counter()
                if now - last_beat >= BEAT_INTERVAL_S:
                    self.control.beat(self.worker)  # waiting on a slow peer is not a hang
                    last_beat = now
                time.sleep(pause)
                pause = min(2 * pause, MAX_PAUSE_S)
        finally:
            self.stats[self.index, self.column["gossip_wait_s"]] += time.perf_counter() - started


def gossip(learner) -> Gossip | None:
    """A gala learner's gossip with the others; None in every other mode."""
    if learner.spec.config.engine.mode != "gala":
        return None
    return Gossip(learner.spec, learner.buffers, learner.index, learner.model, learner.worker)
