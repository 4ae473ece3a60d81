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
"""
from __future__ import annotations

import copy
import time
from typing import Callable

import torch

from fastrl.algos.gossip import consensus_bound, in_peers
from fastrl.buffers import RunBuffers
from fastrl.buffers.control import Flag, Stat
from fastrl.buffers.params import VERSION
from fastrl.errors import StopRequested

# mailbox header columns after the seqlock's [SEQ, VERSION]: the version the out-peer read last, "sends no more"
CONSUMED, FINAL = VERSION + 1, VERSION + 2
# allreduce header columns: the update this learner posted last, "posts no more"
POSTED, REDUCE_FINAL = 0, 1
BEAT_INTERVAL_S = 0.2
MAX_PAUSE_S = 0.001


class PeerFinished(Exception):
    """An allreduce peer ended (stop, target reached) before posting this update: end here too."""


class Gossip:
    def __init__(self, spec, buffers: RunBuffers, learner: int, model: torch.nn.Module, worker: int):
        gala = spec.config.gala
        self.learners, self.index, self.worker = spec.learners, learner, worker
        self.mixing, self.deterministic, self.max_staleness = gala.mixing, gala.deterministic, gala.max_staleness
        self.control = buffers.control
        self.stats = buffers.control.learner_stats
        arrays = buffers.arena.arrays
        self.mail_header = arrays["mailbox_header"]
        self.reduce_header = arrays["allreduce_header"]
        self.reduce_rows = torch.from_numpy(arrays["allreduce"])
        self.outbox = buffers.shared_params(learner, "mailbox")
        self.in_peers = in_peers(self.mixing, self.learners, learner)
        self.out_peers = [j for j in range(self.learners) if learner in in_peers(self.mixing, self.learners, j)]
        self.inboxes = [buffers.shared_params(j, "mailbox") for j in self.in_peers]
        self.peer_models = [copy.deepcopy(model) for _ in self.in_peers]
        self.last_mixed = [0] * len(self.in_peers)  # version of the last message mixed from each in-peer
        self.since_message = 0
        self.published = [buffers.shared_params(j) for j in range(self.learners)]
        self.snapshot = torch.empty((self.learners, self.outbox.flat.numel()), dtype=torch.float32)

    # ------------------------------------------------------------------ allreduce

    @torch.no_grad()
    def reduce_gradients(self, grads: list[torch.Tensor], update: int) -> None:
        """allreduce: replace ``grads`` in place by every learner's average for ``update``."""
        if self.mixing != "allreduce":
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
        if not self._wait(lambda: bool((posted >= update).all()), lambda: bool(((posted < update) & (finished == 1)).any())):
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
        if not self.in_peers:
            return
        self._send(model, update)
        fresh = [self._receive(k, update) for k in range(len(self.in_peers))]
        messages = [self.peer_models[k] for k, got in enumerate(fresh) if got]
        if not messages:
            self.since_message += 1
            return
        self.since_message = 0
        self.stats[self.index, Stat.MIXES] += len(messages)
        weight = 1.0 / (1 + len(messages))
        peers = [m.state_dict() for m in messages]
        for name, x in model.state_dict().items():
            for peer in peers:
                x.add_(peer[name])
            x.mul_(weight)

    def _send(self, model: torch.nn.Module, update: int) -> None:
        if self.deterministic:  # the out-peer must have read update - 1 before it is overwritten
            header = self.mail_header[self.index]
            out_final = [self.mail_header[j] for j in self.out_peers]
            self._wait(lambda: header[CONSUMED] >= update - 1, lambda: any(h[FINAL] for h in out_final))
        self.outbox.publish(model, update)

    def _receive(self, k: int, update: int) -> bool:
        """Load in-peer k's message if there is one to mix now; waits as the schedule requires."""
        inbox, header = self.inboxes[k], self.mail_header[self.in_peers[k]]
        last = self.last_mixed[k]
        if self.deterministic:
            wanted = update
        elif header[VERSION] > last or self.since_message < self.max_staleness:
            wanted = last + 1  # non-blocking: take whatever is newer, if anything
            if header[VERSION] < wanted:
                self._note_staleness(self.since_message + 1)
                return False
        else:
            wanted = last + 1  # more than max_staleness updates without news: wait for a message
        if not self._wait(lambda: header[VERSION] >= wanted, lambda: bool(header[FINAL])):
            return False
        version = inbox.load_into(self.peer_models[k], -1)
        if self.deterministic and version != update:
            raise RuntimeError(f"gala deterministic gossip: expected the message of update {update}, got {version}")
        header[CONSUMED] = version
        self.last_mixed[k] = version
        self.stats[self.index, Stat.MESSAGE_AGE] = update - version
        return True

    def wait_for_peers(self, ready: Callable[[], bool]) -> None:
        """Start together: a learner whose peers are still starting up would run ahead alone."""
        self._wait(ready, lambda: False)

    def _note_staleness(self, updates: int) -> None:
        row = self.stats[self.index]
        row[Stat.STALENESS] = max(row[Stat.STALENESS], updates)

    # ------------------------------------------------------------------ consensus

    @torch.no_grad()
    def measure(self, model: torch.nn.Module) -> None:
        """‖x_i − x̄‖ over every learner's published θ (this one's just published), and the bound beside it."""
        for j, params in enumerate(self.published):
            params.read_flat(self.snapshot[j])
        mean = self.snapshot.double().mean(0)
        distance = float(torch.linalg.vector_norm(self.snapshot[self.index].double() - mean))
        stats = self.stats
        largest = float(stats[:, Stat.MAX_UPDATE_NORM].max())
        staleness = int(stats[:, Stat.STALENESS].max())
        stats[self.index, Stat.CONSENSUS] = distance
        stats[self.index, Stat.BOUND] = consensus_bound(self.mixing, self.learners, largest, self.deterministic,
                                                        staleness)

    def finish(self) -> None:
        """This learner sends no more: peers stop waiting for it."""
        self.mail_header[self.index, FINAL] = 1
        self.reduce_header[self.index, REDUCE_FINAL] = 1

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
            self.stats[self.index, Stat.GOSSIP_WAIT_S] += time.perf_counter() - started
