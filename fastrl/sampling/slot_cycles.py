"""How an executor's envs move from slot to slot: the mode's part of the executor, one strategy per kind.

Stepping an env, announcing it to its actor and handling its faults are the executor's, whatever the mode;
what happens when a rollout may begin and when a slot is full is the mode's, picked once (``cycle_for``):

- ``Barriers`` (``sync``, ``hts``, ``gala``): the learner's "go" for rollout j starts the envs parked at the
  end of j - 1 (or resets them, for a run's first rollout) in their slot of j's storage, row 0 carrying on
  from the last one's row T; a full slot is reported to the learner owning the env, and an env whose next
  "go" already came (``hts`` runs ahead) begins it at once, else it parks.
- ``Queues`` (``async``, IMPALA): one "go" at the start, no barrier. A full slot goes onto the full queue
  and its env takes any free slot (its last observation, kept aside because the full slot may be reused at
  once, becomes the new slot's row 0); an env finding none waits in line, the others go on. A multi-agent env's
  agents fill their slots at the same step; the executor steps the env once every agent has a slot and an action.
"""

from __future__ import annotations

import time
from queue import Empty
from typing import Protocol

import numpy as np

from fastrl.buffers.control import Clock
from fastrl.buffers.slots import SlotMap
from fastrl.sampling.channels import Channels, decode_rollout_done, encode_full, encode_rollout_done

Requests = dict[int, list[int]]  # actor -> encoded requests, flushed by the executor


class CycleHost(Protocol):
    """What a slot cycle reads and calls of the executor it runs in (``fastrl.sampling.executor``). Envs are
    named by local index ``i``; rows are flat rows of the slots."""

    env_list: list[int]  # each local env's global index
    envs_total: int  # envs of the run
    steps: int  # T: steps of a rollout
    first_rollout: int  # this process's first: its envs begin (reset, or restore a saved state) rather than carry on
    learners: int
    learner_of: np.ndarray  # each global env's learner
    local_of_learner: list[list[int]]  # each learner's envs, by local index
    slots: SlotMap
    channels: Channels
    timing: np.ndarray  # this executor's row of seconds per kind of work (``Clock``)
    carried: list[np.ndarray]  # the row fields a slot's row 0 takes from its env's last row T (obs, and state)
    t: list[int]  # each env's step within its rollout
    row: list[int]  # each env's current row
    env_rollout: list[int]  # the rollout each env is filling, or finished and parked at
    rollouts: list[int]  # the newest rollout each learner has released ("go")

    def begin(self, i: int, row: int) -> None:
        """Env ``i``'s first row of this process: its saved state restored, or a reset."""

    def announce(self, i: int, row: int, requests: Requests) -> None:
        """Env ``i``'s observation is in ``row``: ask its actor for the action (into ``requests``)."""

    def flush(self, requests: Requests) -> None:
        """Send ``requests`` to the actors."""


class Barriers:
    """Rollouts released by the learner's "go"; slots reported per rollout (see the module's doc)."""

    def __init__(self, executor: CycleHost):
        self.ex = executor

    def go(self, rollout: int, learner: int, requests: Requests) -> None:
        """The learner released ``rollout``: its envs parked at the end of the one before begin it."""
        ex = self.ex
        first = rollout == ex.first_rollout
        for i in ex.local_of_learner[learner]:
            if first or (ex.t[i] == ex.steps and ex.env_rollout[i] == rollout - 1):
                self._begin_rollout(i, rollout, requests)

    def _begin_rollout(self, i: int, rollout: int, requests: Requests) -> None:
        ex = self.ex
        row = ex.slots.first_row(ex.slots.slot(ex.env_list[i], rollout))
        if rollout == ex.first_rollout:
            ex.begin(i, row)
        else:
            last = ex.row[i]  # row T of the previous rollout: its last observation (and state)
            for field in ex.carried:
                field[row] = field[last]
        ex.t[i] = 0
        ex.env_rollout[i] = rollout
        ex.announce(i, row, requests)

    def full(self, i: int, last_row: int, finished: list[int], requests: Requests) -> None:
        """Env ``i`` filled its slot (its row T is ``last_row``): report it; begin its next rollout if released."""
        ex = self.ex
        env, rollout = ex.env_list[i], ex.env_rollout[i]
        finished.append(encode_rollout_done(env, rollout))  # the learner counts each rollout's envs apart
        if ex.rollouts[ex.learner_of[env]] > rollout:  # run-ahead: its next "go" has come
            self._begin_rollout(i, rollout + 1, requests)

    def report(self, finished: list[int], timeout: float) -> None:
        """The envs done with their rollout, to whichever learner owns them."""
        ex = self.ex
        if ex.learners == 1:
            ex.channels.rollout_done[0].put_many(finished, timeout=timeout)
            return
        owners = ex.learner_of[decode_rollout_done(np.asarray(finished))[0]]
        for learner in np.unique(owners):
            ex.channels.rollout_done[learner].put_many(
                [e for e, o in zip(finished, owners) if o == learner], timeout=timeout
            )

    def poll(self, timeout: float) -> None:
        """Nothing waits outside a slot between barriers."""


class Queues:
    """Slots circulating through the free and full queues (see the module's doc)."""

    def __init__(self, executor: CycleHost):
        self.ex = executor
        n = len(executor.env_list)
        self.waiting: list[int] = []  # envs without a slot, in the order they asked
        self.fresh = [True] * n  # not begun yet: its first slot starts with a reset (or a saved state)
        # each env's last row T, kept aside: its full slot may be handed out again at once
        self.last = [np.zeros((n, *field.shape[1:]), field.dtype) for field in executor.carried]

    def go(self, rollout: int, learner: int, requests: Requests) -> None:
        """The only "go" of an async run: every env takes a free slot."""
        self.waiting = list(range(len(self.ex.env_list)))
        self.take_free_slots(0, requests)

    def full(self, i: int, last_row: int, finished: list[int], requests: Requests) -> None:
        """Env ``i``'s slot goes to the learner; the env keeps its last observation and waits for a free one."""
        ex = self.ex
        for kept, field in zip(self.last, ex.carried):
            kept[i] = field[last_row]
        finished.append(encode_full(ex.slots.slot_of(last_row), ex.env_list[i], ex.envs_total))
        self.waiting.append(i)

    def report(self, finished: list[int], timeout: float) -> None:
        self.ex.channels.full.put_many(finished, timeout=timeout)
        if self.waiting:
            self.take_free_slots(0)

    def poll(self, timeout: float) -> None:
        """Free slots for waiting envs; blocks up to ``timeout`` only when every env waits."""
        if self.waiting:
            self.take_free_slots(timeout if len(self.waiting) == len(self.ex.env_list) else 0)

    def take_free_slots(self, timeout: float, requests: Requests | None = None) -> None:
        """Give waiting envs free slots, in order."""
        ex = self.ex
        started = time.perf_counter()
        try:
            slots = ex.channels.free.get_many(block=timeout > 0, timeout=timeout, max_messages_to_get=len(self.waiting))
        except Empty:
            slots = []
        ex.timing[Clock.WAITING] += time.perf_counter() - started
        own = requests is None
        requests = {} if requests is None else requests
        for slot in slots:
            i = self.waiting.pop(0)
            row = ex.slots.first_row(slot)
            if self.fresh[i]:
                self.fresh[i] = False
                ex.begin(i, row)
            else:
                for kept, field in zip(self.last, ex.carried):
                    field[row] = kept[i]
            ex.t[i] = 0
            ex.announce(i, row, requests)
        if own:
            ex.flush(requests)


def cycle_for(executor: CycleHost, queued: bool) -> Barriers | Queues:
    """The strategy of the run's mode (``queued``: ``ModeSpec.queued``)."""
    return Queues(executor) if queued else Barriers(executor)
