"""The queues between processes. They carry small integers only; arrays stay in shared memory.

Messages (all ints, so a batch is one cheap ``put_many``), each encoded and decoded by the pair of
functions below, on both sides:
- request, executor -> actor: ``row * envs + env`` — env's observation at flat ``row`` is ready.
- inbox, actor -> executor: ``env`` — the action for env's current row is written.
- inbox, learner -> executor: ``-(rollout * learners + learner + 1)`` — start rollout ``rollout``
  for the envs of ``learner`` (gala has several learners at their own paces; else learner 0).
- rollout_done[learner], executor -> learner: ``env * 2 + rollout % 2`` — env finished ``rollout``
  (the parity: with run-ahead an env may finish rollout j+1 before another finishes j).
- free, learner -> executors (async): ``slot`` — an empty trajectory slot any env may fill.
- full, executor -> learner (async): ``slot * envs + env`` — env's slot holding T fresh steps (a learner extension
  can follow each env's episodes across its slots).
- episodes, executor -> main: ``(env, return, length, stats)`` of a finished episode; ``stats``: the adapter's
  ``episode_stats()`` (``{name: number}``, e.g. Crafter's achievements), or None.
- errors, any worker -> main: ``(worker, summary, traceback)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from faster_fifo import Queue

QUEUE_BYTES = 4 * 1024 * 1024


def _int_dumps(message: int) -> bytes:
    return message.to_bytes(8, "little", signed=True)


def _int_loads(data) -> int:
    return int.from_bytes(data, "little", signed=True)


def int_queue() -> Queue:
    """A queue of ints as 8 raw bytes each: half the cost of pickling them (measured)."""
    return Queue(QUEUE_BYTES, loads=_int_loads, dumps=_int_dumps)


def encode_request(env: int, row: int, envs: int) -> int:
    return row * envs + env


def decode_request(message, envs: int):
    """-> (env, row); an int or an int array of messages."""
    row, env = divmod(message, envs)
    return env, row


def encode_full(slot: int, env: int, envs: int) -> int:
    return slot * envs + env


def decode_full(message, envs: int):
    """-> (slot, env); an int or an int array of messages."""
    return divmod(message, envs)


def encode_rollout_done(env: int, rollout: int) -> int:
    return env * 2 + (rollout & 1)


def decode_rollout_done(message):
    """-> (env, rollout parity); an int or an int array of messages."""
    return message >> 1, message & 1


def encode_go(rollout: int, learner: int = 0, learners: int = 1) -> int:
    return -(rollout * learners + learner + 1)


def decode_go(message: int, learners: int = 1) -> tuple[int, int]:
    """-> (rollout, learner)"""
    return divmod(-message - 1, learners)


@dataclass
class Channels:
    requests: list[Queue]
    inboxes: list[Queue]
    rollout_done: list[Queue]
    free: Queue
    full: Queue
    episodes: Queue
    errors: Queue

    @classmethod
    def create(cls, actors: int, executors: int, learners: int = 1) -> Channels:
        return cls(
            requests=[int_queue() for _ in range(actors)],
            inboxes=[int_queue() for _ in range(executors)],
            rollout_done=[int_queue() for _ in range(learners)],
            free=int_queue(),
            full=int_queue(),
            episodes=Queue(QUEUE_BYTES),
            errors=Queue(QUEUE_BYTES),
        )

    def all(self) -> list[Queue]:
        return [*self.requests, *self.inboxes, *self.rollout_done, self.free, self.full, self.episodes, self.errors]

    def close(self) -> None:
        for q in self.all():
            q.close()
