"""Actor: batch-polls ready observations, runs the policy once per batch, writes the actions.

Sampling uses the random number the executor wrote beside each observation (inverse CDF on
the CPU), and the forward runs in fixed-size micro-batches, so each row's action depends only
on its own observation and weights, never on what else happened to be in the batch.

An actor serves every learner (gala has several): a request names an env, the env names its
learner, and each learner's rows are forwarded with that learner's weights. Where envs run
ahead (``hts``) two rollouts are in flight at once, each acting with its own weights: the row
names the storage, the storage the weight slot. In lockstep (``sync``) an actor waits for all
of one learner's envs it serves, never for another learner's.

Rows other players than the learner play (the run's row roles, ``fastrl.sampling.row_roles``) are forwarded
apart, each player's with its own model: one the roles built, or a copy of the run's model loaded with one of
the players' parameter slots (``RunBuffers.player_params``).
"""

from __future__ import annotations

import time
from queue import Empty

import numpy as np
import torch

from fastrl.algos import action_sampler
from fastrl.buffers import RunBuffers
from fastrl.buffers.control import Clock
from fastrl.config import resolved_int
from fastrl.devices import configure_cuda, process_device
from fastrl.models.compiling import compile_mode_for, compile_policy, compiled_copy
from fastrl.models.microbatch import forward_microbatched
from fastrl.models.policy import build_copy
from fastrl.partition import owner_of, split
from fastrl.sampling.channels import Channels, decode_request
from fastrl.sampling.row_roles import RowRoles, row_roles_for
from fastrl.spec import RunSpec, WorkerIds


class Actor:
    def __init__(self, spec: RunSpec, channels: Channels, buffers: RunBuffers, index: int):
        engine = spec.config.engine
        executors = resolved_int(engine.executors, "engine.executors")
        actors = resolved_int(engine.actors, "engine.actors")
        self.spec, self.channels, self.index = spec, channels, index
        self.envs_total = spec.envs
        served = split(spec.envs, actors)[index]
        self.served = len(served)
        self.lockstep = spec.mode.lockstep
        self.learner_of = owner_of(spec.envs, spec.learners)
        self.served_of_learner = np.bincount(self.learner_of[served], minlength=spec.learners)
        self.executor_of = owner_of(spec.envs, executors, spec.env_unit)
        self.device = process_device(engine.actor_device, spec.local_rank)
        configure_cuda(spec.config, self.device)  # before the first CUDA call: TF32 and cuDNN as configured
        self.micro_batch = resolved_int(engine.micro_batch, "engine.micro_batch")
        self.model = compile_policy(
            build_copy(spec.env_info, spec.config).to(self.device).eval(),
            compile_mode_for(spec.config, self.device, "actor"),
        )  # before copying: the copies compile too
        self.distribution = action_sampler(spec)  # the head's kind (or the algorithm's own): its sampling kernel
        self.reads_observations = getattr(self.model, "reads_observations", True)
        # one model per weight set: learner l's slot k is set l * slots + k
        self.weight_slots = spec.mode.weight_slots
        sets = spec.learners * self.weight_slots
        self.slot_map = spec.slot_map  # a row's storage names its weight slot
        self.models = [self.model] + [compiled_copy(self.model) for _ in range(sets - 1)]
        self.params = [
            buffers.shared_params(learner, slot=k) for learner in range(spec.learners) for k in range(self.weight_slots)
        ]
        self.versions = [-1] * sets
        rows = buffers.slots.rows
        self.obs, self.u = rows["obs"], rows["u"]
        self.action, self.logp, self.value, self.stamp = rows["action"], rows["logp"], rows["value"], rows["version"]
        # each served env has at most one request outstanding, so `served` rows always suffice; on a GPU the
        # rows are gathered into page-locked memory, from which the copy to the device runs asynchronously
        pinned = self.device.type == "cuda"
        obs_dtype = torch.from_numpy(np.zeros(0, spec.env_info.obs_dtype)).dtype
        self.obs_batch = torch.empty((self.served, *spec.env_info.obs_shape), dtype=obs_dtype, pin_memory=pinned)
        # a recurrent policy (model.lstm): each row's state is read from the slot beside its observation and
        # the next is written to the row after it (fastrl.models.recurrent), so it lives in the buffer, not here
        self.hidden = rows.get("hidden")
        self.hidden_batch = (
            None if self.hidden is None else torch.empty((self.served, self.hidden.shape[1]), pin_memory=pinned)
        )
        # the players of rows other than the learner's (None: the learner's weights play every row), and the
        # models of those that play with a players' parameter slot, loaded as it changes
        self.player_params = [buffers.player_params(k) for k in range(buffers.plan.player_slots)]
        self.player_models: dict[int, torch.nn.Module] = {}
        self.player_versions: dict[int, int] = {}
        self.roles = row_roles_for(spec, buffers, self.device)
        self.pending: list[list[int]] = [[] for _ in range(sets)]  # requests by weight set
        self.constant: list[tuple | None] = [None] * sets  # (version, logits, value) of an obs-blind policy
        self.zero_micro_batch: torch.Tensor | None = None  # its input, made on first use
        self._warm_up()
        self.timing = buffers.control.timing[WorkerIds(executors, actors, engine.learners).actor(index)]

    @torch.inference_mode()
    def _warm_up(self) -> None:
        """Run the forward and the sampler once so the first real batch pays no JIT or lazy-init cost."""
        hidden = None if self.hidden_batch is None else self.hidden_batch[:1].zero_().to(self.device)
        for model in self.models:  # each weight slot's copy compiles its own graphs (models.compiling)
            logits, value = forward_microbatched(
                model, self.obs_batch[:1].zero_().to(self.device), self.micro_batch, hidden
            )[:2]
        scratch = {
            name: np.zeros((1, *column.shape[1:]), column.dtype)
            for name, column in (
                ("u", self.u),
                ("action", self.action),
                ("logp", self.logp),
                ("value", self.value),
                ("stamp", self.stamp),
            )
        }
        self.distribution.sample_rows(
            logits.float().cpu().numpy(),
            value.float().cpu().numpy(),
            0,
            np.zeros(1, np.int64),
            scratch["u"],
            scratch["action"],
            scratch["logp"],
            scratch["value"],
            scratch["stamp"],
        )

    # ------------------------------------------------------------------ loop (fastrl.process.component's protocol)

    def start(self) -> None:
        """Nothing to begin: requests come once the learner has released the envs."""

    def poll(self, timeout: float) -> bool:
        started = time.perf_counter()
        try:
            messages = self.channels.requests[self.index].get_many(block=timeout > 0, timeout=timeout)
        except Empty:
            messages = []
        self.timing[Clock.WAITING] += time.perf_counter() - started
        self.receive(messages)
        released = self.act_ready()
        for envs in released:
            self._release(envs)
        return bool(released)

    def receive(self, messages: list[int]) -> None:
        """Queue requests (``row * envs + env``) by the weights they act with, until their batch may go."""
        if len(self.pending) == 1:
            self.pending[0] += messages
            return
        envs, slots, slot_map = self.envs_total, self.weight_slots, self.slot_map
        for message in messages:
            env, row = decode_request(message, envs)
            weights = self.learner_of[env] * slots + slot_map.storage_of_row(row) % slots  # the row's storage
            self.pending[weights].append(message)

    def act_ready(self) -> list[np.ndarray]:
        """Act on every batch that may go (in lockstep: all of a learner's served envs); their envs."""
        begun = time.perf_counter()
        released = []
        for weights, batch in enumerate(self.pending):
            if not batch or (self.lockstep and len(batch) < self.served_of_learner[weights // self.weight_slots]):
                continue
            self.pending[weights] = []
            released.append(self._act(np.sort(np.asarray(batch, np.int64)), weights))
        if released:
            self.timing[Clock.INFERENCE] += time.perf_counter() - begun
        return released

    def _act(self, messages: np.ndarray, weights: int) -> np.ndarray:
        """Write the actions of these requests' rows with weight set ``weights``; returns their envs."""
        envs, rows = decode_request(messages, self.envs_total)
        model = self.models[weights]
        version = self.params[weights].load_into(model, self.versions[weights])
        roles = self.roles
        if roles is not None:
            rows = self._act_others(roles, envs, rows, version)
        n = len(rows)
        if n == 0:  # every row another player's
            self.versions[weights] = version
            return envs
        if self.reads_observations:
            logits, value = self._forward(model, rows)
        else:
            logits, value = self._constant_outputs(weights, version, n)
        self.versions[weights] = version
        # one kernel samples every row from its own u and writes action, logp, value and version
        self.distribution.sample_rows(
            np.ascontiguousarray(logits, np.float32),
            np.ascontiguousarray(value, np.float32),
            version,
            rows,
            self.u,
            self.action,
            self.logp,
            self.value,
            self.stamp,
        )
        return envs

    @torch.inference_mode()
    def _forward(self, model: torch.nn.Module, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        obs = self.obs_batch[: len(rows)]
        np.take(self.obs, rows, axis=0, out=obs.numpy())
        if self.hidden is None:
            logits, value = forward_microbatched(model, obs.to(self.device, non_blocking=True), self.micro_batch)
            return logits.float().cpu().numpy(), value.float().cpu().numpy()
        assert self.hidden_batch is not None  # allocated in __init__ wherever self.hidden is
        hidden = self.hidden_batch[: len(rows)]
        np.take(self.hidden, rows, axis=0, out=hidden.numpy())
        logits, value, after = forward_microbatched(
            model, obs.to(self.device, non_blocking=True), self.micro_batch, hidden.to(self.device, non_blocking=True)
        )
        self.hidden[rows + 1] = after.float().cpu().numpy()  # row t + 1 of the same slot: the actor never acts on row T
        return logits.float().cpu().numpy(), value.float().cpu().numpy()

    def _act_others(self, roles: RowRoles, envs: np.ndarray, rows: np.ndarray, version: int) -> np.ndarray:
        """Act on the rows other players play in the rollout of ``version``, each player's batch with its model;
        the rows of the learner's own weights are returned."""
        slots = roles.slots(envs, rows, version)
        others = slots >= 0
        if not others.any():
            return rows
        for slot in np.unique(slots[others]).tolist():
            chosen = rows[slots == slot]
            logits, value = self._forward(self._player(roles, slot), chosen)
            self.distribution.sample_rows(
                np.ascontiguousarray(logits, np.float32),
                np.ascontiguousarray(value, np.float32),
                version,  # the rollout's: a learning player publishes version j for it; no loss reads the others'
                chosen,
                self.u,
                self.action,
                self.logp,
                self.value,
                self.stamp,
            )
        return rows[~others]

    def _player(self, roles: RowRoles, slot: int) -> torch.nn.Module:
        """Player ``slot``'s model: the roles' own, or a copy of the run's with its players' slot loaded."""
        own = roles.model(slot)
        if own is not None:
            return own
        model = self.player_models.get(slot)
        if model is None:
            model = self.player_models[slot] = compiled_copy(self.model)
        self.player_versions[slot] = self.player_params[slot].load_into(model, self.player_versions.get(slot, -1))
        return model

    def _constant_outputs(self, weights: int, version: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """A policy that ignores the observation gives every row the same outputs: forward one
        micro-batch of zero rows once per weight version and tile its first row (no per-batch torch
        call; the same input, so the same bits, as ``forward_microbatched`` pads one row to)."""
        cached = self.constant[weights]
        if cached is None or cached[0] != version:
            with torch.inference_mode():  # entered only here: the context costs more than a cached batch
                if self.zero_micro_batch is None:
                    self.zero_micro_batch = torch.zeros(
                        (self.micro_batch, *self.obs_batch.shape[1:]), dtype=self.obs_batch.dtype, device=self.device
                    )
                logits, value = self.models[weights](self.zero_micro_batch)
                logits, value = logits[:1].float().cpu().numpy(), value[:1].float().cpu().numpy()
            cached = self.constant[weights] = (
                version,
                np.repeat(logits, self.served, 0),
                np.repeat(value, self.served),
            )
        return cached[1][:n], cached[2][:n]

    def _release(self, envs: np.ndarray) -> None:
        owners = self.executor_of[envs]
        timeout = self.spec.config.reliability.queue_timeout_s
        for executor in np.unique(owners):
            self.channels.inboxes[executor].put_many(envs[owners == executor].tolist(), timeout=timeout)

    def shutdown(self) -> None:
        """Nothing to save: the actor's weights are the learner's, its state the executors'."""

    def close(self) -> None:
        """Nothing to let go of: its views of the segment and its models go with the process."""
