"""Executor: steps its envs, writes observations, rewards and random numbers into the slots.

Each env is a small state machine: it waits for the learner's "go" for a rollout, then for
T steps announces its observation to its actor and waits for the action. The executor steps
whichever envs have their action back, so stepping some envs overlaps the actor's forward
pass for the others (double-buffered sampling falls out of the per-env state). An env that
finished its rollout begins the next one at once if its "go" has come (``hts`` runs ahead: the
learner sends "go j+1" before rollout j is done), else it parks until the "go" arrives.

Faults: before every env call the executor writes which env, step and action into its
activity row (the watchdog names them if the call never returns). An env that raises or
returns what its spaces forbid ends the run with an ``EnvError`` naming all of it, or, with
``env.on_error = "reset"``, is reset: the failed step is marked done with reward 0 (no
bootstrap across it), the partial episode is dropped and the error counted.

Time limits: a step the env ends by truncation (``done`` = ``TRUNCATED``) also copies its
final observation into the slot's ``final_obs`` row before the reset overwrites it, so the
learner can bootstrap the cut return; that copy happens once per truncated episode, never on
the common path.

What happens when a rollout may begin and when a slot is full is the mode's
(``fastrl.sampling.slot_cycles``): barriers (``sync``, ``hts``, ``gala``: rollouts released by the
learner's "go") or queues (``async``: slots circulating through the free and full queues).

Checkpoints: when the learner asks (control block) at a barrier, where all envs are parked,
the executor saves every env's state, RNG stream, episode counters and last observation; a
resumed run restores them and continues bit for bit.
"""

from __future__ import annotations

import logging
import random
import time
import traceback
from collections import deque
from pathlib import Path
from queue import Empty

import numpy as np

from csrc_free_kernels.step_end import TERMINATED, TRUNCATED
from fastrl.buffers import RunBuffers
from fastrl.buffers.control import Activity, Clock, Phase
from fastrl.config import resolved_int
from fastrl.envs import EnvAdapter
from fastrl.envs.base import OPPONENT, EnvGroup
from fastrl.envs.gym import EnvOutputError
from fastrl.envs.registry import make_envs
from fastrl.errors import EnvError
from fastrl.learning.named_policies import policy_map
from fastrl.partition import opponent_rows, owner_of, split
from fastrl.runs.checkpoint import (
    CheckpointStore,
    read_env_episodes,
    read_env_states,
    write_env_episodes,
    write_env_states,
)
from fastrl.sampling.channels import Channels, decode_go, encode_request
from fastrl.sampling.slot_cycles import cycle_for
from fastrl.seeding import env_rng
from fastrl.spec import RunSpec, WorkerIds

log = logging.getLogger(__name__)
RESET_SEED_BOUND = 2**31 - 1
# activity columns and phases as plain ints: an IntEnum lookup costs more than the write, on every step
_PHASE, _ENV, _STEP, _ACTION, _ERRORS = (
    int(c) for c in (Activity.PHASE, Activity.ENV, Activity.STEP, Activity.ACTION, Activity.ENV_ERRORS)
)
_IDLE, _RESET, _STEPPING = int(Phase.IDLE), int(Phase.RESET), int(Phase.STEP)
RESET_ATTEMPTS = 3  # with env.on_error = "reset": consecutive failed resets before giving up


class Executor:
    def __init__(self, spec: RunSpec, channels: Channels, buffers: RunBuffers, index: int):
        engine = spec.config.engine
        executors = resolved_int(engine.executors, "engine.executors")
        actors = resolved_int(engine.actors, "engine.actors")
        self.spec, self.channels, self.index = spec, channels, index
        self.mode, self.envs_total, self.steps = spec.mode, spec.envs, spec.steps
        self.env_list = [int(e) for e in split(spec.envs, executors, spec.env_unit)[index]]  # this executor's envs
        self.local_of = {e: i for i, e in enumerate(self.env_list)}
        self.learners = spec.learners
        self.learner_of = owner_of(spec.envs, spec.learners)  # gala: each learner starts its own envs' rollouts
        self.local_of_learner = [
            [i for i, e in enumerate(self.env_list) if self.learner_of[e] == learner]
            for learner in range(spec.learners)
        ]
        n = len(self.env_list)
        unit = spec.env_unit  # a multi-agent env's rows are never split between groups
        self.group_size = max(1, -(-n // unit // engine.env_groups)) * unit
        self.envs: list[EnvAdapter] = make_envs(
            spec.config.env, [spec.global_env(e) for e in self.env_list], self.group_size
        )
        self.env_group: list[EnvGroup] = [getattr(env, "group", None) for env in self.envs]  # type: ignore[misc]
        self.stepped_together = self._groups()  # per env, its group's members; None: each env steps alone
        self.group_waiting: dict[int, list[int]] = {}  # a group's first member -> its members with actions
        # per-env state as Python lists: a numpy scalar costs more to read and write, on every step
        self.row = [0] * n  # flat row of each env's current observation
        self.t = [0] * n  # step within the rollout
        self.episode_return = [0.0] * n
        self.episode_length = [0] * n
        actor_of = owner_of(spec.envs, actors)
        self.actor_of_local = [int(actor_of[e]) for e in self.env_list]
        rows = buffers.slots.rows
        self.obs, self.action, self.reward = rows["obs"], rows["action"], rows["reward"]
        self.done, self.u = rows["done"], rows["u"]
        # Discrete: one uniform and an int action per row, as always; MultiDiscrete and Box: a row of D
        # uniforms from the env's stream (one per dimension) and the slot's action row handed to the adapter
        action = spec.env_info.action
        assert action is not None  # EnvInfo.__post_init__ fills it in (Discrete) where the env gave none
        self.scalar_actions = action.slot_shape == ()
        self.final_obs = rows["final_obs"]  # written only at truncations (see fastrl.buffers.slots)
        # a recurrent policy's state per row (model.lstm): the actor writes row t + 1 as it acts on row t; the
        # executor zeroes it where an episode starts and carries it across slots like the observation
        self.hidden = rows.get("hidden")
        self.live = rows.get("live")  # a multi-agent env's rows: how each takes part in learning (envs.base)
        # the row fields a slot's row 0 carries on from its env's last row T
        self.carried = [field for field in (self.obs, self.hidden, self.live) if field is not None]
        # self-play against a pool: the seats a snapshot plays are marked OPPONENT whatever the env says
        # and so are the agents of a frozen named policy (multiagent.frozen): no loss reads their rows
        pool = spec.config.selfplay.opponents == "pool"
        named = policy_map(spec.config, spec.env_info.agent_names)
        if pool:
            played_by_others = opponent_rows(spec.envs, spec.env_unit)
        elif named is not None:
            played_by_others = named.frozen_rows(spec.envs)
        else:
            played_by_others = np.zeros(spec.envs, bool)
        self.opponent = [bool(played_by_others[e]) for e in self.env_list]
        self.worker = WorkerIds(executors, actors, engine.learners).executor(index)
        self.name = f"executor-{index}"
        self.control = buffers.control
        self.timing = buffers.control.timing[self.worker]
        self.activity = memoryview(buffers.control.activity[self.worker])  # cheaper item access than numpy
        self.save_request = buffers.control.env_saves.data  # = memoryview(env_saves); numpy types .data as one
        self.store = CheckpointStore(spec.checkpoint_dir)
        self.step_delay_s = engine.step_delay_s
        self.pending_requests = 0
        self.direct_actor = -1  # inline actors: the actor in this process; its requests skip the queue
        self.direct_requests: list[int] = []
        self.rollouts = [-1] * spec.learners  # the newest rollout each learner has released ("go")
        self.env_rollout = [-1] * n  # the rollout each env is filling, or finished and parked at
        self.saved_rollout = -1
        self.first_rollout = spec.resume.rollout if spec.resume else 0
        self.slots = spec.slot_map  # where each env's steps live
        self.rngs, self.restored = self._streams_and_states()
        self.recent_episodes = self._recent_episodes()
        self.cycle = cycle_for(self, spec.mode.queued)  # the mode's part: barriers, or the async queues

    def _groups(self) -> list[list[int]] | None:
        """For each env, the local indices of the envs its backend steps together with it (``EnvGroup``, in
        member order), or None where every env steps alone."""
        if not any(group is not None for group in self.env_group):
            return None
        members: dict[int, list[int]] = {}
        for i, group in enumerate(self.env_group):
            members.setdefault(id(group), []).append(i)
        return [members[id(group)] for group in self.env_group]

    def _streams_and_states(self) -> tuple[list[np.random.Generator], dict[int, dict]]:
        """Each env's RNG stream, and the saved states a resumed run continues from (by local index)."""
        seed, resume = self.spec.config.run.seed, self.spec.resume
        saved = read_env_states(Path(resume.env_states)) if resume and resume.env_states else {}
        rngs, restored = [], {}
        for i, env in enumerate(self.env_list):
            state = saved.get(env)
            if state is not None and state["env"] is not None:
                rng = np.random.default_rng()
                rng.bit_generator.state = state["rng"]
                restored[i] = state
            else:  # a fresh run, or an env that could not be saved: seeded restart
                rng = env_rng(seed, self.spec.global_env(env), restart=self.first_rollout)
            rngs.append(rng)
        return rngs, restored

    def _recent_episodes(self) -> list[deque[tuple[int, int, float, int]]]:
        """Each env's last ``run.return_window`` finished episodes as ``(rollout, step, return, length)``, saved
        with its state so that a resumed run's return windows start full (from the checkpoint's, on resume)."""
        resume, window = self.spec.resume, self.spec.config.run.return_window
        saved = read_env_episodes(Path(resume.env_states)) if resume and resume.env_states else {}
        return [deque(saved.get(env, ()), maxlen=window) for env in self.env_list]

    # ------------------------------------------------------------------ loop (fastrl.process.component's protocol)

    def start(self) -> None:
        """Nothing to begin: the envs start on the learner's first "go"."""

    def poll(self, timeout: float) -> bool:
        """Handle every message waiting in the inbox; ``timeout`` 0 never blocks (serial mode)."""
        if self.save_request[0] - 1 > self.saved_rollout:  # the learner asks for env states (a checkpoint)
            self._save_env_states(self.control.requested_env_save())
        self.cycle.poll(timeout)  # async: free slots for envs waiting for one
        started = time.perf_counter()
        try:
            messages = self.channels.inboxes[self.index].get_many(block=timeout > 0, timeout=timeout)
        except Empty:
            self.timing[Clock.WAITING] += time.perf_counter() - started
            return False
        self.timing[Clock.WAITING] += time.perf_counter() - started
        self.handle(messages)
        return True

    def handle(self, messages) -> None:
        """Start rollouts ("go", negative) and step the envs whose actions are written (env ids)."""
        begun = time.perf_counter()
        requests: dict[int, list[int]] = {}
        finished: list[int] = []
        episodes: list[tuple[int, float, int]] = []
        for message in messages:
            if message < 0:
                self._start_rollout(*decode_go(message, self.learners), requests)
            else:
                self._arrive(self.local_of[message], requests, finished, episodes)
                if self.pending_requests >= self.group_size:
                    self.flush(requests)  # the actor works on this group while we step the next
        self.flush(requests)
        timeout = self.spec.config.reliability.queue_timeout_s
        if finished:
            self.cycle.report(finished, timeout)
        if episodes:
            self.channels.episodes.put_many(episodes, timeout=timeout)
        self.timing[Clock.ENV] += time.perf_counter() - begun

    def flush(self, requests: dict[int, list[int]]) -> None:
        timeout = self.spec.config.reliability.queue_timeout_s
        for actor, batch in requests.items():
            if not batch:
                continue
            if actor == self.direct_actor:
                self.direct_requests += batch
            else:
                self.channels.requests[actor].put_many(batch, timeout=timeout)
            batch.clear()
        self.pending_requests = 0

    def take_direct_requests(self) -> list[int]:
        """The requests for the actor in this process (inline actors), handed over without a queue."""
        requests, self.direct_requests = self.direct_requests, []
        return requests

    def announce(self, i: int, row: int, requests: dict[int, list[int]]) -> None:
        """Env ``i``'s observation is in ``row``: draw its uniforms and ask its actor for the action."""
        if self.scalar_actions:
            self.u[row] = self.rngs[i].random()
        else:
            self.rngs[i].random(out=self.u[row])  # D draws, in dimension order
        self.row[i] = row
        requests.setdefault(self.actor_of_local[i], []).append(encode_request(self.env_list[i], row, self.envs_total))
        self.pending_requests += 1

    def _start_rollout(self, rollout: int, learner: int, requests: dict[int, list[int]]) -> None:
        """The learner released ``rollout``: the mode's cycle starts the envs it may start."""
        self.rollouts[learner] = rollout
        self.cycle.go(rollout, learner, requests)

    def begin(self, i: int, row: int) -> None:
        """The first rollout of this process: restore the env's saved state, or reset it."""
        state = self.restored.pop(i, None)
        if state is None:
            self._reset(i, row)
            return
        self.envs[i].set_state(state["env"])
        self.episode_return[i] = float(state["episode_return"])
        self.episode_length[i] = int(state["episode_length"])
        self.obs[row] = state["obs"]
        if self.hidden is not None:
            self.hidden[row] = state["hidden"]
        if self.live is not None:
            self.live[row] = self._live(i)

    def _reset_seed(self, i: int) -> int:
        return int(self.rngs[i].integers(RESET_SEED_BOUND))

    def _arrive(self, i: int, requests, finished: list[int], episodes: list) -> None:
        """Env ``i``'s action is written: step it, or, where its backend steps a group together, the whole group
        once its last member's action is in (members advance in lockstep: the barrier modes only)."""
        if self.stepped_together is None:
            self._step(i, requests, finished, episodes)
            return
        members = self.stepped_together[i]
        waiting = self.group_waiting.setdefault(members[0], [])
        waiting.append(i)
        if len(waiting) < len(members):
            return
        waiting.clear()
        actions = [int(self.action[self.row[j]]) for j in members]
        try:
            self.env_group[i].step(actions)
        except Exception as exc:
            self.activity[_PHASE] = _IDLE
            details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            raise EnvError(
                f"env {self.spec.config.env.id!r} #{[self.env_list[j] for j in members]} on {self.name}: its "
                f"backend's group step(actions={actions}) raised {type(exc).__name__}: {exc}",
                details,
            ) from exc
        for j in members:
            self._step(j, requests, finished, episodes)

    def _step(self, i: int, requests, finished: list[int], episodes: list) -> None:
        row = self.row[i]
        result = self._env_step(i, row, int(self.action[row]) if self.scalar_actions else self.action[row])
        if self.step_delay_s:
            time.sleep(random.random() * self.step_delay_s)  # testing: timing noise, not seeded on purpose
        if result is None:  # the env failed and was reset into row + 1: no bootstrap across the failure
            self.reward[row] = 0.0
            self.done[row] = TERMINATED
        else:
            reward, raw, done, over = result
            self.reward[row] = reward
            self.done[row] = done
            self.episode_return[i] += raw
            self.episode_length[i] += 1
            if over:
                if done == TRUNCATED:  # the reset overwrites the final observation; the learner values it
                    self.final_obs[row] = self.obs[row + 1]
                episodes.append((self.env_list[i], self.episode_return[i], self.episode_length[i]))
                self.recent_episodes[i].append(
                    (self.env_rollout[i], self.t[i], self.episode_return[i], self.episode_length[i])
                )
                self.episode_return[i] = 0.0
                self.episode_length[i] = 0
                self._reset(i, row + 1)
        if self.live is not None:
            self.live[row + 1] = self._live(i)
        t = self.t[i] = self.t[i] + 1
        if t == self.steps:
            self.row[i] = row + 1
            self.cycle.full(i, row + 1, finished, requests)  # reported; the env goes on as the mode says
        else:
            self.announce(i, row + 1, requests)

    # ------------------------------------------------------------------ env calls and their faults

    def _mark(self, phase: int, i: int, action: int) -> None:
        activity = self.activity
        activity[_ENV] = self.env_list[i]
        activity[_STEP] = self.episode_length[i]
        activity[_ACTION] = action
        activity[_PHASE] = phase

    def _env_step(self, i: int, row: int, action):
        """``action``: an int (Discrete) or the slot's action row (the watchdog then names no action)."""
        activity = self.activity  # _mark, inlined: this runs on every step
        activity[_ENV] = self.env_list[i]
        activity[_STEP] = self.episode_length[i]
        activity[_ACTION] = action if self.scalar_actions else -1
        activity[_PHASE] = _STEPPING
        obs = self.obs
        try:
            result = self.envs[i].step(action, obs[row], obs[row + 1])
        except Exception as exc:
            self._env_failed(i, "step", action, exc)  # raises unless env.on_error = "reset"
            self._reset(i, row + 1)
            return None
        self.activity[_PHASE] = _IDLE
        return result

    def _reset(self, i: int, row: int) -> None:
        """A new episode's first observation into ``row``; a recurrent policy starts it from a zero state."""
        if self.hidden is not None:
            self.hidden[row] = 0.0
        attempts = RESET_ATTEMPTS if self.spec.config.env.on_error == "reset" else 1
        for attempt in range(1, attempts + 1):
            self._mark(_RESET, i, -1)
            try:
                self.envs[i].reset(self._reset_seed(i), self.obs[row])
            except Exception as exc:
                self._env_failed(i, "reset", -1, exc, last=attempt == attempts)
                continue
            self.activity[_PHASE] = _IDLE
            if self.live is not None:
                self.live[row] = self._live(i)
            return

    def _live(self, i: int) -> int:
        """How env ``i``'s row just written takes part in learning (``fastrl.envs.base``)."""
        return OPPONENT if self.opponent[i] else self.envs[i].live  # type: ignore[attr-defined]  # multi-agent

    def _env_failed(self, i: int, phase: str, action: int, exc: Exception, last: bool = False) -> None:
        """Raise the ``EnvError`` that names the env, or count the error and let the caller reset."""
        self.activity[_PHASE] = _IDLE
        message = self._describe(i, phase, action, exc)
        details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        if self.spec.config.env.on_error == "raise":
            raise EnvError(message + "; set env.on_error = 'reset' to reset a failing env and go on", details) from exc
        if last:
            raise EnvError(f"{message}; it failed {RESET_ATTEMPTS} resets in a row", details) from exc
        self.activity[_ERRORS] += 1
        first = self.activity[_ERRORS] == 1
        log.warning("%s; resetting it (env.on_error = 'reset')%s", message, "\n" + details if first else "")
        self.episode_return[i] = 0.0  # the partial episode is dropped, not reported
        self.episode_length[i] = 0

    def _describe(self, i: int, phase: str, action: int, exc: Exception) -> str:
        what = f"returned {exc}" if isinstance(exc, EnvOutputError) else f"raised {type(exc).__name__}: {exc}"
        call = f"step(action={action})" if phase == "step" else "reset()"
        return (
            f"env {self.spec.config.env.id!r} #{self.env_list[i]} on {self.name} {what}, in {call} at step "
            f"{int(self.episode_length[i])} of its episode (rollout {int(self.env_rollout[i])})"
        )

    # ------------------------------------------------------------------ checkpoints

    def _save_env_states(self, rollout: int) -> None:
        """At a barrier every env is parked after its last step: save what resuming needs to go on exactly."""
        if any(t != self.steps for t in self.t) or self.rollouts[0] != rollout - 1:
            raise RuntimeError(f"{self.name}: asked to save env states for rollout {rollout} while not parked")
        states = {e: self._env_state(i) for i, e in enumerate(self.env_list)}
        write_env_states(self.store.env_dir(rollout), self.name, states)
        recent = {e: list(self.recent_episodes[i]) for i, e in enumerate(self.env_list)}
        write_env_episodes(self.store.env_dir(rollout), self.name, recent)
        self.saved_rollout = rollout
        self.control.mark_env_saved(self.worker, rollout)

    def _env_state(self, i: int) -> dict:
        try:
            env_state = self.envs[i].get_state()
        except Exception as exc:  # e.g. an env holding a socket or a simulator handle
            env_state = None
            if i == 0:
                log.warning(
                    "env %r cannot be saved (%s: %s); a resumed run restarts it with a seeded reset",
                    self.spec.config.env.id,
                    type(exc).__name__,
                    exc,
                )
        return {
            "env": env_state,
            "rng": self.rngs[i].bit_generator.state,
            "episode_return": float(self.episode_return[i]),
            "episode_length": int(self.episode_length[i]),
            "obs": self.obs[self.row[i]].copy(),
            **({"hidden": self.hidden[self.row[i]].copy()} if self.hidden is not None else {}),
        }

    def shutdown(self) -> None:
        """Nothing to save: what a resume needs of the envs is saved at checkpoint barriers (``_save_env_states``)."""

    def close(self) -> None:
        self.activity.release()  # let the segment's mapping go
        self.save_request.release()
        for env in self.envs:
            env.close()
