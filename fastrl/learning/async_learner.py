"""The async (IMPALA) learner: no barrier; batches of full slots from a queue, one V-trace step each.

The schedule is ``fastrl.modes.asynchronous``'s (why its loop lives here, not there, is said
there). At start every slot index goes onto the free queue and the executors get their only
"go". Then: ``get_many`` up to ``algo.batch_slots`` full slots; gather them (a copy: the slots are
wherever the envs left them, not contiguous) and put them back on the free queue at once; one
update (``Impala``, or ``Collect``: a batch consumed still counts); publish θ with the next
version. The policy lag (learner version minus each step's behaviour version) is measured per
batch and logged as its mean and max, never asserted.

A "rollout" here counts learner batches: frames = batches x batch_slots x T x frame skip (the
frames learned from; the envs may be up to the free slots ahead). Checkpoints are written
between batches and are never exact (the envs are mid-trajectory and keep no saved state): a
resumed run goes on from θ, the optimizer and the counters, with freshly reset envs.
"""

from __future__ import annotations

import time
from queue import Empty

import numpy as np

from fastrl.algos.update_rule import Update
from fastrl.buffers.control import Clock, Done, Flag, Stat, write_lag
from fastrl.learning.learner import Learner
from fastrl.sampling.channels import decode_full


class AsyncLearner(Learner):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.batch: list[int] = []  # full slots taken so far towards the next batch

    def start(self) -> None:
        slots = list(range(self.buffers.slots.shape.slots))
        self.channels.free.put_many(slots, timeout=self.spec.config.reliability.queue_timeout_s)
        self.released = self.rollout - 1  # the one "go" of an async run
        self.release(self.rollout)

    def poll(self, timeout: float) -> bool:
        if self.finished:
            return False
        need = self.algo.batch_slots - len(self.batch)
        started = time.perf_counter()
        try:
            self.batch += self.channels.full.get_many(block=timeout > 0, timeout=timeout, max_messages_to_get=need)
        except Empty:
            pass
        self.timing[Clock.WAITING] += time.perf_counter() - started
        if len(self.batch) < self.algo.batch_slots:
            if self.control.is_set(Flag.FINISH) and self.cohort.ranks == 1:  # stopping: do not wait for a batch that
                # may never fill (with ranks the others wait in this batch's all-reduce: it fills and finishes)
                self._save("final")
            return False
        batch, self.batch = self.batch, []
        begun = time.perf_counter()
        with self._naming_what_is_kept():
            self._learn(batch)
        self.timing[Clock.LEARNING] += time.perf_counter() - begun
        return True

    def _learn(self, batch: list[int]) -> None:
        slots, envs = decode_full(np.asarray(batch, np.int64), self.spec.envs)
        storage = self.buffers.slots.gather(slots.tolist())  # a copy, so the slots can be freed at once
        self.channels.free.put_many(slots.tolist(), timeout=self.spec.config.reliability.queue_timeout_s)
        lags = self.version - storage["version"][:, : self.spec.steps]
        self.learn(storage, self.rollout, env_ids=envs)  # an env's slots come in the order it filled them
        self.apply(self.rule.advance() or Update(lag=None))  # collecting: θ stays, the batch still counts
        write_lag(self.stats, float(lags.mean()), float(lags.max()))
        self.move_to(self.rollout + 1)
        self.publish()
        frames = int(self.stats[Stat.FRAMES])
        self._agree()
        if frames >= self.frame_budget or self.finishing:
            self._save("final")
        elif self._checkpoint_due(frames):
            self._save("periodic")

    def _save(self, kind: str) -> None:
        """Write a (never exact) checkpoint now; the last one also ends the run."""
        checkpoint = self._checkpoint(kind)
        self.store.save(checkpoint, self.rollout)
        self.last_checkpoint = (time.monotonic(), checkpoint["frames"])
        self.time_due = False
        if kind == "final":
            self.finished = True
            self.control.mark_learner(self.index, Done.SAVED)
            self.control.mark_learner(self.index, Done.COMPLETE)
