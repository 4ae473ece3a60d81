"""Executors take turns on the CPUs: a barrier then waits for the average core, not the slowest.

Every rollout barrier waits for the last env, so an engine whose executors stay each on its
own core runs at the pace of the slowest core. Cores are not equally fast: hybrid CPUs mix fast
and slow cores, and on a shared VM one vCPU can run 5-14% slower than the other for seconds
(measured with two bare ALE loops, one per vCPU). Linux leaves a busy process where it is, so
with one executor per core that gap turned into 4-8% of each executor's time spent waiting for
the other. With ``engine.core_rotation_s = P`` executor i runs on the (i + k)-th CPU it may use
during the k-th period of P seconds (the monotonic clock is shared, so all executors move
together and stay one per CPU): each sees every core's speed in turn. One move per period costs
a cache refill, well under 1% at P = 0.1 s.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)


MIN_PERIOD_S = 1e-3  # shorter periods move a process more often than it can run: 5e-324 made now / P infinite


class CoreRotation:
    def __init__(self, index: int, period_s: float):
        self.index, self.period_s = index, max(period_s, MIN_PERIOD_S) if period_s > 0 else period_s
        can_pin = hasattr(os, "sched_setaffinity")  # Linux; elsewhere the OS places processes
        self.cpus = sorted(os.sched_getaffinity(0)) if can_pin else []
        self.enabled = period_s > 0 and len(self.cpus) > 1
        if period_s > 0 and not can_pin:
            log.warning("engine.core_rotation_s = %s ignored: this OS has no sched_setaffinity", period_s)
        self.period = -1

    def tick(self, now: float) -> None:
        """Move to this period's CPU if the period changed (``now`` from ``time.monotonic``)."""
        if not self.enabled:
            return
        period = int(now / self.period_s)
        if period != self.period:
            self.period = period
            os.sched_setaffinity(0, {self.cpus[(self.index + period) % len(self.cpus)]})
