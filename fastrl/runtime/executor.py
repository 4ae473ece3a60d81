"""Executor: steps its envs, writes observations, rewards and random numbers into the slots.

Each env is a small state machine: it waits for the learner's "go" for a rollout, then for
T steps announces its observation to its actor and waits for the action. The executor steps
whichever envs have their action back, so stepping some envs overlaps the actor's forward
pass for the others (double-buffered sampling falls out of the per-env state).
"""
from __future__ import annotations

import random
import time
from queue import Empty

import numpy as np

from fastrl.buffers import RunBuffers
from fastrl.buffers.control import Clock
from fastrl.envs import make_env
from fastrl.runtime.channels import Channels, decode_go, encode_request
from fastrl.runtime.spec import RunSpec, WorkerIds, owner_of, split
from fastrl.seeding import env_rng

RESET_SEED_BOUND = 2**31 - 1


class Executor:
    def __init__(self, spec: RunSpec, channels: Channels, buffers: RunBuffers, index: int):
        engine = spec.config.engine
        self.spec, self.channels, self.index = spec, channels, index
        self.mode, self.envs_total, self.steps = spec.mode, spec.envs, spec.steps
        self.env_ids = split(spec.envs, engine.executors)[index]
        self.local_of = {int(e): i for i, e in enumerate(self.env_ids)}
        self.actor_of = owner_of(spec.envs, engine.actors)
        self.envs = [make_env(spec.config.env) for e in self.env_ids]
        self.rngs = [env_rng(spec.config.run.seed, int(e)) for e in self.env_ids]
        n = len(self.env_ids)
        self.row = np.zeros(n, np.int64)  # flat row of each env's current observation
        self.t = np.zeros(n, np.int64)  # step within the rollout
        self.episode_return = np.zeros(n, np.float64)
        self.episode_length = np.zeros(n, np.int64)
        rows = buffers.slots.rows
        self.obs, self.action, self.reward = rows["obs"], rows["action"], rows["reward"]
        self.done, self.u = rows["done"], rows["u"]
        self.timing = buffers.control.timing[WorkerIds(engine.executors, engine.actors, engine.learners).executor(index)]
        self.step_delay_s = engine.step_delay_s
        self.group_size = max(1, -(-n // engine.env_groups))
        self.pending_requests = 0

    def poll(self, timeout: float) -> bool:
        """Handle every message waiting in the inbox; ``timeout`` 0 never blocks (serial mode)."""
        started = time.perf_counter()
        try:
            messages = self.channels.inboxes[self.index].get_many(block=timeout > 0, timeout=timeout)
        except Empty:
            self.timing[Clock.WAITING] += time.perf_counter() - started
            return False
        begun = time.perf_counter()
        self.timing[Clock.WAITING] += begun - started
        requests: dict[int, list[int]] = {}
        finished: list[int] = []
        episodes: list[tuple[int, float, int]] = []
        for message in messages:
            if message < 0:
                self._start_rollout(decode_go(message), requests)
            else:
                self._step(self.local_of[message], requests, finished, episodes)
                if self.pending_requests >= self.group_size:
                    self._flush(requests)  # the actor works on this group while we step the next
        self._flush(requests)
        timeout = self.spec.config.reliability.queue_timeout_s
        if finished:
            self.channels.rollout_done.put_many(finished, timeout=timeout)
        if episodes:
            self.channels.episodes.put_many(episodes, timeout=timeout)
        self.timing[Clock.ENV] += time.perf_counter() - begun
        return True

    def _flush(self, requests: dict[int, list[int]]) -> None:
        timeout = self.spec.config.reliability.queue_timeout_s
        for actor, batch in requests.items():
            if batch:
                self.channels.requests[actor].put_many(batch, timeout=timeout)
                batch.clear()
        self.pending_requests = 0

    def _announce(self, i: int, row: int, requests: dict[int, list[int]]) -> None:
        self.u[row] = self.rngs[i].random()
        self.row[i] = row
        env = int(self.env_ids[i])
        requests.setdefault(int(self.actor_of[env]), []).append(encode_request(env, row, self.envs_total))
        self.pending_requests += 1

    def _start_rollout(self, rollout: int, requests: dict[int, list[int]]) -> None:
        for i, env in enumerate(self.env_ids):
            row = self.mode.slot(int(env), rollout, self.envs_total) * (self.steps + 1)
            if rollout == 0:
                self.envs[i].reset(self._reset_seed(i), self.obs[row])
            else:
                self.obs[row] = self.obs[self.row[i]]  # last observation of the previous rollout
            self.t[i] = 0
            self._announce(i, row, requests)

    def _reset_seed(self, i: int) -> int:
        return int(self.rngs[i].integers(RESET_SEED_BOUND))

    def _step(self, i: int, requests, finished: list[int], episodes: list) -> None:
        row = int(self.row[i])
        reward, raw, done, over = self.envs[i].step(int(self.action[row]), self.obs[row], self.obs[row + 1])
        if self.step_delay_s:
            time.sleep(random.random() * self.step_delay_s)  # testing: timing noise, not seeded on purpose
        self.reward[row] = reward
        self.done[row] = done
        self.episode_return[i] += raw
        self.episode_length[i] += 1
        if over:
            episodes.append((int(self.env_ids[i]), float(self.episode_return[i]), int(self.episode_length[i])))
            self.episode_return[i] = 0.0
            self.episode_length[i] = 0
            self.envs[i].reset(self._reset_seed(i), self.obs[row + 1])
        self.t[i] += 1
        if self.t[i] == self.steps:
            self.row[i] = row + 1
            finished.append(int(self.env_ids[i]))
        else:
            self._announce(i, row + 1, requests)

    def close(self) -> None:
        for env in self.envs:
            env.close()
