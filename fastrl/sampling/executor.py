"""Executor: steps its envs, writes observations, rewards and random numbers into the slots.

Each env is a small state machine: it waits for the learner's "go" for a rollout, then for
T steps announces its observation to its actor and waits for the action. The executor steps
whichever envs have their action back, so stepping some envs overlaps the actor's forward
pass for the others (double-buffered sampling falls out of the per-env state). An env that
finished its rollout begins the next one at once if its "go" has come (``hts`` runs ahead: the
learner sends "go j+1" before rollout j is done), else it parks until the "go" arrives.

Faults: every env call is named in the executor's activity row first, and a call that fails ends
the run or, with ``env.on_error = "reset"``, resets its env (``fastrl.sampling.env_faults``).

Time limits: a step the env ends by truncation (``done`` = ``TRUNCATED``) also copies its
final observation into the slot's ``final_obs`` row before the reset overwrites it, so the
learner can bootstrap the cut return; that copy happens once per truncated episode, never on
the common path.

What happens when a rollout may begin and when a slot is full is the mode's
(``fastrl.sampling.slot_cycles``): barriers (``sync``, ``hts``, ``gala``: rollouts released by the
learner's "go") or queues (``async``: slots circulating through the free and full queues).

Checkpoints: when the learner asks (control block) at a barrier, where all envs are parked,
the executor saves every env's state, RNG stream, episode counters and last observation; a
resumed run restores them and continues bit for bit (``fastrl.sampling.env_checkpoints``).

Agent rows: a multi-agent env's rows say how each takes part in learning (``live``, ``fastrl.envs.base``); the
rows the run's row roles (``fastrl.sampling.row_roles``) give to other players than the learner are ``UNLEARNED``.
"""

from __future__ import annotations

import functools
import random
import time
from queue import Empty

import numpy as np

from csrc_free_kernels.step_end import TERMINATED, TRUNCATED
from fastrl.buffers import RunBuffers
from fastrl.buffers.control import Clock
from fastrl.config import resolved_int
from fastrl.envs import EnvAdapter
from fastrl.envs.base import UNLEARNED, EnvGroup
from fastrl.envs.registry import make_envs
from fastrl.partition import owner_of, split
from fastrl.runs.checkpoint import CheckpointStore, write_env_episodes, write_env_states
from fastrl.sampling.channels import Channels, decode_go, encode_request
from fastrl.sampling.env_checkpoints import env_state, restored_episodes, restored_streams
from fastrl.sampling.env_faults import ACTION, ENV, IDLE, PHASE, RESET, RESETS_AHEAD, STEP, STEPPING, STEPS, EnvFaults
from fastrl.sampling.reset_ahead import SpareEpisodes, cores_idle_in_waits, spare_instance, wanted
from fastrl.sampling.row_roles import row_roles_for
from fastrl.sampling.slot_cycles import cycle_for
from fastrl.seeding import made_env_seed
from fastrl.spec import RunSpec, WorkerIds

RESET_SEED_BOUND = 2**31 - 1


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
        self.learner_of = owner_of(spec.envs, spec.learners)  # many learners: each starts its own envs' rollouts
        self.local_of_learner = [
            [i for i, e in enumerate(self.env_list) if self.learner_of[e] == learner]
            for learner in range(spec.learners)
        ]
        n = len(self.env_list)
        unit = spec.env_unit  # a multi-agent env's rows are never split between groups
        self.group_size = max(1, -(-n // unit // engine.env_groups)) * unit
        self.first_rollout = spec.resume.rollout if spec.resume else 0
        global_envs = [spec.global_env(e) for e in self.env_list]
        seeds = [made_env_seed(spec.config.run.seed, e, restart=self.first_rollout) for e in global_envs]
        self.envs: list[EnvAdapter] = make_envs(spec.config.env, global_envs, self.group_size, seeds)
        self.env_group: list[EnvGroup] = [getattr(env, "group", None) for env in self.envs]  # type: ignore[misc]
        self.episode_stats = [getattr(env, "episode_stats", None) for env in self.envs]  # optional (envs.base)
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
        roles = row_roles_for(spec, buffers)  # the rows no loss reads are UNLEARNED, whatever the env says
        unlearned = roles.unlearned_rows() if roles is not None else None
        self.unlearned = [unlearned is not None and bool(unlearned[e]) for e in self.env_list]
        self.worker = WorkerIds(executors, actors, engine.learners).executor(index)
        self.name = f"executor-{index}"
        self.control = buffers.control
        self.timing = buffers.control.timing[self.worker]
        self.activity = memoryview(buffers.control.activity[self.worker])  # cheaper item access than numpy
        self.faults = EnvFaults(self.activity, spec.config.env.id, self.name, spec.config.env.on_error)
        self.save_request = buffers.control.env_saves.data  # = memoryview(env_saves); numpy types .data as one
        self.store = CheckpointStore(spec.checkpoint_dir)
        self.step_delay_s = engine.step_delay_s
        self.pending_requests = 0
        self.direct_actor = -1  # inline actors: the actor in this process; its requests skip the queue
        self.direct_requests: list[int] = []
        self.rollouts = [-1] * spec.learners  # the newest rollout each learner has released ("go")
        self.env_rollout = [-1] * n  # the rollout each env is filling, or finished and parked at
        self.saved_rollout = -1
        self.slots = spec.slot_map  # where each env's steps live
        self.rngs, self.restored = restored_streams(spec, self.env_list, self.first_rollout)
        # each env's next reset seed, drawn an episode ahead so that a spare can reset with it (sampling.reset_ahead)
        self.next_seed = [
            int(self.restored[i]["next_reset_seed"]) if "next_reset_seed" in self.restored.get(i, {}) else self._draw(i)
            for i in range(n)
        ]
        self.spares: SpareEpisodes | None = None
        self.reset_ahead_undecided = False
        self.recent_episodes = restored_episodes(spec, self.env_list)
        self.cycle = cycle_for(self, spec.mode.queued)  # the mode's part: barriers, or the async queues
        try:
            self.first_episodes = self._reset_at_start()
        except BaseException:  # a failing first reset ends the run at start-up: the envs made are closed here
            self.close()
            raise

    def _groups(self) -> list[list[int]] | None:
        """For each env, the local indices of the envs its backend steps together with it (``EnvGroup``, in
        member order), or None where every env steps alone."""
        if not any(group is not None for group in self.env_group):
            return None
        members: dict[int, list[int]] = {}
        for i, group in enumerate(self.env_group):
            members.setdefault(id(group), []).append(i)
        return [members[id(group)] for group in self.env_group]

    # ------------------------------------------------------------------ loop (fastrl.process.component's protocol)

    def start(self) -> None:
        """Nothing to begin: the envs were reset as the executor was built; they step from the learner's first "go"."""

    def poll(self, timeout: float) -> bool:
        """Handle every message waiting in the inbox; ``timeout`` 0 never blocks (serial mode)."""
        if self.save_request[0] - 1 > self.saved_rollout:  # the learner asks for env states (a checkpoint)
            self._save_env_states(self.control.requested_env_save())
        if timeout > 0 and self.spares is not None:  # about to wait: reset a spare ahead instead, if one is due
            return self._poll_once(0) or self._reset_one_ahead() or self._poll_once(timeout)
        return self._poll_once(timeout)

    def _poll_once(self, timeout: float) -> bool:
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

    def _reset_one_ahead(self) -> bool:
        """Reset one env's spare with its next seed (``fastrl.sampling.reset_ahead``); False when none is due."""
        assert self.spares is not None
        begun = time.perf_counter()
        built = self.spares.build_next(self.next_seed, self.episode_length, self.faults, self.env_list)
        self.timing[Clock.ENV] += time.perf_counter() - begun
        return built

    def handle(self, messages) -> None:
        """Start rollouts ("go", negative) and step the envs whose actions are written (env ids)."""
        begun = time.perf_counter()
        requests: dict[int, list[int]] = {}
        finished: list[int] = []
        episodes: list[tuple[int, float, int, dict | None]] = []
        arrived = len(messages)  # every message but a "go" is an env's action in: one row stepped each
        for message in messages:
            if message < 0:
                arrived -= 1
                self._start_rollout(*decode_go(message, self.learners), requests)
            else:
                self._arrive(self.local_of[message], requests, finished, episodes)
                if self.pending_requests >= self.group_size:
                    self.flush(requests)  # the actor works on this group while we step the next
        self.activity[STEPS] += arrived  # before the report, so that the summary holds them
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

    def _reset_at_start(self) -> dict[int, tuple[np.ndarray, int]]:
        """Each env without a saved state reset now, as the process starts, with the reset seed its first "go"
        would draw: its first observation and ``live``, for ``begin``. A slow env's reset (Crafter builds its
        world, ~0.1 s) then costs start-up, not the first rollout, while every executor starts at once."""
        first, took = {}, []
        for i in range(len(self.env_list)):
            if i not in self.restored:
                obs = np.empty_like(self.obs[0])
                begun = time.perf_counter()
                self._new_episode(i, obs)
                took.append(time.perf_counter() - begun)
                first[i] = (obs, self._live(i))
        self._decide_reset_ahead(took)
        return first

    def _decide_reset_ahead(self, resets_s: list[float]) -> None:
        """Reset ahead (``engine.reset_ahead``) as set, or under "auto" where these resets were slow; with none
        timed yet (every env restored from a checkpoint), the first reset in place decides."""
        self.reset_ahead_undecided = not resets_s
        alone = self.stepped_together is None  # a backend's env groups step together: none can swap instances
        setting = self.spec.config.engine.reset_ahead
        if resets_s and alone and wanted(setting, self.envs, resets_s, cores_idle_in_waits(self.spec)):
            make = functools.partial(spare_instance, self.spec, self.env_list, self.first_rollout)
            self.spares = SpareEpisodes(make, self.obs[0], len(self.env_list))

    def begin(self, i: int, row: int) -> None:
        """The first rollout of this process: the env's saved state restored, or its first episode started."""
        state = self.restored.pop(i, None)
        if state is None:
            self.obs[row], live = self.first_episodes.pop(i)
            if self.hidden is not None:
                self.hidden[row] = 0.0
        else:
            self.envs[i].set_state(state["env"])
            self.episode_return[i] = float(state["episode_return"])
            self.episode_length[i] = int(state["episode_length"])
            self.obs[row] = state["obs"]
            if self.hidden is not None:
                self.hidden[row] = state["hidden"]
            live = self._live(i)
        if self.live is not None:
            self.live[row] = live

    def _draw(self, i: int) -> int:
        return int(self.rngs[i].integers(RESET_SEED_BOUND))

    def _reset_seed(self, i: int) -> int:
        """Env ``i``'s next episode's seed; the one after it is drawn now, so a spare may reset with it early."""
        seed, self.next_seed[i] = self.next_seed[i], self._draw(i)
        return seed

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
        picked = self.action[[self.row[j] for j in members]]  # fancy indexing copies: the members' actions in order
        actions = picked.tolist() if self.scalar_actions else list(picked)
        try:
            self.env_group[i].step(actions)
        except Exception as exc:
            self.faults.group_failed(exc, [self.env_list[j] for j in members], actions)
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
                stats = self.episode_stats[i]  # read before the reset: the episode's own figures (envs.base)
                episodes.append((self.env_list[i], self.episode_return[i], self.episode_length[i], stats and stats()))
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

    def _env_step(self, i: int, row: int, action):
        """``action``: an int (Discrete) or the slot's action row (the watchdog then names no action)."""
        activity = self.activity  # EnvFaults.mark, inlined: this runs on every step
        activity[ENV] = self.env_list[i]
        activity[STEP] = self.episode_length[i]
        activity[ACTION] = action if self.scalar_actions else -1
        activity[PHASE] = STEPPING
        obs = self.obs
        try:
            result = self.envs[i].step(action, obs[row], obs[row + 1])
        except Exception as exc:
            self._env_failed(i, "step", action, exc)  # raises unless env.on_error = "reset"
            self._reset(i, row + 1)
            return None
        activity[PHASE] = IDLE
        return result

    def _reset(self, i: int, row: int) -> None:
        """A new episode's first observation into ``row``; a recurrent policy starts it from a zero state (its
        ``live``: the caller's)."""
        if self.hidden is not None:
            self.hidden[row] = 0.0
        self._new_episode(i, self.obs[row])

    def _new_episode(self, i: int, out: np.ndarray) -> None:
        """Env ``i`` reset with the next seed of its stream, its first observation into ``out``."""
        attempts = self.faults.reset_attempts
        for attempt in range(1, attempts + 1):
            seed = self._reset_seed(i)
            spare = None if self.spares is None else self.spares.take(i, seed, out, self.envs[i])
            if spare is not None:  # reset ahead with this seed: it takes the finished instance's place
                self.envs[i], self.episode_stats[i] = spare, getattr(spare, "episode_stats", None)
                self.activity[RESETS_AHEAD] += 1
                return
            self.faults.mark(RESET, self.env_list[i], self.episode_length[i], -1)
            begun = time.perf_counter()
            try:
                self.envs[i].reset(seed, out)
            except Exception as exc:
                self._env_failed(i, "reset", -1, exc, last=attempt == attempts)
                continue
            self.faults.idle()
            if self.reset_ahead_undecided:  # a resumed run: its first reset in place decides
                self._decide_reset_ahead([time.perf_counter() - begun])
            return

    def _live(self, i: int) -> int:
        """How env ``i``'s row just written takes part in learning (``fastrl.envs.base``); 0 without agent rows."""
        if self.live is None:
            return 0
        return UNLEARNED if self.unlearned[i] else self.envs[i].live  # type: ignore[attr-defined]  # multi-agent

    def _env_failed(self, i: int, phase: str, action, exc: Exception, last: bool = False) -> None:
        """Raise the ``EnvError`` that names the env, or count the error and drop the partial episode (it is not
        reported) for the caller to reset the env."""
        step, rollout = int(self.episode_length[i]), int(self.env_rollout[i])
        self.faults.failed(exc, self.env_list[i], phase, action, step, rollout, last)
        self.episode_return[i] = 0.0
        self.episode_length[i] = 0

    # ------------------------------------------------------------------ checkpoints

    def _save_env_states(self, rollout: int) -> None:
        """At a barrier every env is parked after its last step: save what resuming needs to go on exactly."""
        if any(t != self.steps for t in self.t) or self.rollouts[0] != rollout - 1:
            raise RuntimeError(f"{self.name}: asked to save env states for rollout {rollout} while not parked")
        hidden = self.hidden
        states = {
            e: env_state(
                self.envs[i],
                self.rngs[i],
                self.episode_return[i],
                self.episode_length[i],
                self.obs[self.row[i]],
                None if hidden is None else hidden[self.row[i]],
                self.next_seed[i],
                self.spec.config.env.id if i == 0 else None,
            )
            for i, e in enumerate(self.env_list)
        }
        write_env_states(self.store.env_dir(rollout), self.name, states)
        recent = {e: list(self.recent_episodes[i]) for i, e in enumerate(self.env_list)}
        write_env_episodes(self.store.env_dir(rollout), self.name, recent)
        self.saved_rollout = rollout
        self.control.mark_env_saved(self.worker, rollout)

    def shutdown(self) -> None:
        """Nothing to save: what a resume needs of the envs is saved at checkpoint barriers (``_save_env_states``)."""

    def close(self) -> None:
        self.activity.release()  # let the segment's mapping go
        self.save_request.release()
        for env in self.envs:
            env.close()
        if self.spares is not None:
            self.spares.close()
