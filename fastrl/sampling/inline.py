"""Inline actors: an executor and its actor in one process, handing requests and actions over directly."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: this module needs neither at run time
    from fastrl.sampling.actor import Actor
    from fastrl.sampling.executor import Executor


# the longest one poll keeps stepping: in async the envs may never run dry, and the worker's loop beats its
# heartbeat and reads the stop flag only between polls (the watchdog took such a pair for a hung one)
SLICE_S = 0.05


class InlinePair:
    """An executor and the actor serving its envs in one process: requests and actions are handed
    over in-process, with no queue at all (with inline actors every env of this executor is served
    by this actor and by no other)."""

    def __init__(self, executor: Executor, actor: Actor):
        self.executor, self.actor = executor, actor
        executor.direct_actor = actor.index

    def start(self) -> None:
        self.executor.start()
        self.actor.start()

    def poll(self, timeout: float) -> bool:
        did = self.executor.poll(0)  # the learner's "go" messages (and async's free slots)
        deadline = time.monotonic() + SLICE_S
        while True:
            self.actor.receive(self.executor.take_direct_requests())
            released = self.actor.act_ready()
            if not released:
                break
            for envs in released:
                self.executor.handle(envs.tolist())
            did = True
            if time.monotonic() > deadline:
                break  # more is ready: the next poll goes on with it
        return did or self.executor.poll(timeout)  # idle: block until the learner's next "go"

    def shutdown(self) -> None:
        self.executor.shutdown()
        self.actor.shutdown()

    def close(self) -> None:
        self.executor.close()
        self.actor.close()
