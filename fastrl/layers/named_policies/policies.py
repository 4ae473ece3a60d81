"""Named policies (``multiagent.policies``; docs/multi-agent.md): each agent of a multi-agent env played by a
policy of its own.

Row e of the buffers is env e // k's agent e mod k, so a policy's rows are fixed for the whole run: those of the
agents mapped to it. The **run's policy** (the first learning policy in the env's agent order) is the learner's
model, published to the weight slots as in any run. Every **other policy** has a slot of the shared pool segment
(``fastrl.buffers``, where self-play keeps its snapshots), and the actors forward its rows with that slot's
parameters (``fastrl.sampling.actor``):

- a **learning** policy has its own model, optimizer, update rule and statistics in the learner, which learns
  it at every barrier from its rows alone (its actions' log-probs and values are its own) and then publishes it
  into its slot with the run's version;
- a **frozen** policy's parameters come from a checkpoint (``multiagent.frozen``; only its tensors are read) and
  never change; its rows are marked ``UNLEARNED``, so no loss reads them. The checkpoints keep its parameters: a
  resumed run plays the same ones whatever happened to the file.

A policy's slot is rewritten at the barrier. In ``sync`` no env steps there; in ``hts`` the envs run ahead
(rollout j+1 plays while the learner publishes for rollout j+2), so there every other policy has two slots, one
per rollout parity as the run's weights have, and an other policy moves on with the run's (its update applied in
the learner's ``advance``, its delayed gradient or lagged trainee kept by its rule as the run's is). One learner
(checked before the run starts). Every decision is a function of the config and the env's agents, so the run
stays bit-identical across layouts.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from fastrl.config import Config, ConfigError
from fastrl.learning.extensions import LearnerExtension, Storage

if TYPE_CHECKING:  # annotations only
    from fastrl.algos.update_rule import UpdateRule
    from fastrl.learning.checked_step import CheckedStep

RUNS_POLICY = 0  # the learner's own model: index 0 of ``PolicyMap.names``


@dataclass(frozen=True)
class PolicyMap:
    """Which policy plays each agent: ``names[0]`` is the run's policy, the others in the env's agent order."""

    names: tuple[str, ...]
    of_agent: tuple[int, ...]  # each agent's policy, an index into ``names``, in the env's agent order
    frozen: tuple[bool, ...]  # per policy
    copies: int = 1  # pool slots per other policy: 2 where the envs run ahead (hts), one per rollout parity

    @property
    def slots(self) -> int:
        """Pool slots the other policies take (policy p > 0: slots (p - 1) * copies onwards)."""
        return (len(self.names) - 1) * self.copies

    def slot_of(self, policy: int, version: int) -> int:
        """Where policy ``policy`` > 0 is published for the rollout that acts with version ``version``."""
        return (policy - 1) * self.copies + version % self.copies

    def row_policy(self, envs: int) -> np.ndarray:
        """Each of the ``envs`` rows' policy."""
        return np.tile(np.asarray(self.of_agent, np.int64), envs // len(self.of_agent))

    def row_slots(self, envs: int, version: int = 0) -> np.ndarray:
        """Each row's pool slot in the rollout of version ``version``; -1: the run's own weights."""
        policy = self.row_policy(envs)
        return np.where(policy == RUNS_POLICY, -1, (policy - 1) * self.copies + version % self.copies)

    def rows_of(self, policy: int, envs: int) -> np.ndarray:
        return np.flatnonzero(self.row_policy(envs) == policy)

    def frozen_rows(self, envs: int) -> np.ndarray:
        """Whether a frozen policy plays each row (its actions are the env's, its row no loss reads)."""
        return np.asarray(self.frozen)[self.row_policy(envs)]

    def learning(self) -> list[int]:
        return [p for p in range(len(self.names)) if not self.frozen[p]]


def policy_map(config: Config, agent_names: Sequence[str]) -> PolicyMap | None:
    """The run's map, or None where one policy plays every agent (``multiagent.policies = {}``)."""
    mapping, frozen = config.multiagent.policies, config.multiagent.frozen
    if not mapping:
        return None
    in_order = [mapping[agent] for agent in agent_names]
    learning = [name for name in in_order if name not in frozen]
    first = learning[0]
    names = [first] + [name for name in dict.fromkeys(in_order) if name != first]
    copies = 2 if config.engine.mode == "hts" else 1
    return PolicyMap(
        tuple(names), tuple(names.index(name) for name in in_order), tuple(name in frozen for name in names), copies
    )


def frozen_parameters(config: Config, name: str, model: torch.nn.Module) -> torch.Tensor:
    """Frozen policy ``name``'s parameters from its checkpoint, flat in the order of ``model``'s state (the
    shared slots' layout), checked to fit ``model``."""
    from fastrl.evaluation.targets import resolve_checkpoint
    from fastrl.runs.checkpoint import load_checkpoint

    source = config.multiagent.frozen[name]
    key = f"multiagent.frozen.{name} = {source!r}"
    if not isinstance(source, str):
        raise ConfigError(f"{key}: expected a run directory or a checkpoint file")
    try:
        path, _ = resolve_checkpoint(source)
        state = load_checkpoint(path).get("model")
    except ConfigError as exc:
        raise ConfigError(f"{key}: {exc}") from None
    if not isinstance(state, dict):
        raise ConfigError(f"{key}: checkpoint {str(path)!r} holds no 'model' parameters")
    fitted = copy.deepcopy(model).cpu()
    try:
        fitted.load_state_dict(state)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0]
        raise ConfigError(
            f"{key}: its parameters do not fit this run's model {config.model.name!r} ({first}); a frozen policy "
            "must have been trained with the same model and observation/action spaces"
        ) from None
    return torch.cat([tensor.detach().reshape(-1).float() for tensor in fitted.state_dict().values()])


@dataclass
class PolicyLearner:
    """A learning policy other than the run's: the learner's model, optimizer and rule for it, its rows."""

    name: str
    policy: int  # its index in ``PolicyMap.names``
    rows: np.ndarray
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    rule: UpdateRule
    step: CheckedStep
    stats: np.ndarray  # its own stats row (never the run's: the metrics show the run's policy)


class NamedPolicies(LearnerExtension):
    """The learner's side: the other policies learned, published and checkpointed beside the run's policy.

    ``trainer(stats, rows)`` builds a learning policy's (model, rule, optimizer, checked step) as the learner builds
    its own, so every policy learns by the same rule and settings. As a learner extension it learns the other
    policies' rows before θ's rule learns its own, moves them on and publishes them with θ, and keeps them in
    the checkpoint."""

    key = "policies"

    def __init__(
        self,
        config: Config,
        envs: int,
        policies: PolicyMap,
        buffers,
        run_model,
        trainer: Callable,
        resuming: bool = False,
    ):
        self.policies = policies
        self.run_rows = policies.rows_of(RUNS_POLICY, envs)
        self.slots = [buffers.player_params(k) for k in range(policies.slots)]
        self.learners: list[PolicyLearner] = []
        self.frozen: dict[int, torch.Tensor] = {}  # policy (index into names) -> parameters
        self.frozen_published = False
        for p, name in enumerate(policies.names[1:], start=1):
            if policies.frozen[p]:  # a resumed run's come from its checkpoint (``load``): the file may be gone
                self.frozen[p] = torch.empty(0) if resuming else frozen_parameters(config, name, run_model)
                continue
            stats = np.zeros_like(buffers.control.learner_stats[0])  # its own: the metrics show the run's policy
            rows = policies.rows_of(p, envs)
            model, rule, optimizer, step = trainer(stats, len(rows))
            self.learners.append(PolicyLearner(name, p, rows, model, optimizer, rule, step, stats))

    def run_policy_rows(self, storage: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The run's policy's rows of an update's storage."""
        return {name: field[self.run_rows] for name, field in storage.items()}

    def learn(self, storage: dict[str, np.ndarray], rollout: int, uploads, entropy_coef: float, clip: float) -> None:
        """Each other learning policy's update on its own rows, kept by its rule until ``advance``."""
        for policy in self.learners:
            rows = {name: field[policy.rows] for name, field in storage.items()}
            policy.rule.entropy_coef, policy.rule.clip = entropy_coef, clip
            with policy.step.update(policy.rule.trained, rollout):
                policy.rule.learn(uploads.of(rows), rollout)

    def advance(self) -> None:
        """Each other learning policy moves on by its pending update when the run's policy does (sync: the one it
        just learned; hts: its rule's delayed gradient or trainee), so a checkpoint finds every policy at one step."""
        for policy in self.learners:
            update = policy.rule.advance()
            if update is not None and update.grads is not None:
                policy.step(policy.model, update.grads)
            if update is not None and update.params is not None:
                policy.model.load_state_dict(update.params)

    def publish(self, version: int) -> None:
        """Every other learning policy into its slot for the rollout of ``version``, stamped with that version; the
        frozen ones once, into each of their slots."""
        for policy in self.learners:
            self.slots[self.policies.slot_of(policy.policy, version)].publish(policy.model, version)
        if not self.frozen_published:
            for p, flat in self.frozen.items():
                for copy_ in range(self.policies.copies):
                    self.slots[self.policies.slot_of(p, copy_)].write_flat(flat, 0)
            self.frozen_published = True

    def state(self) -> dict:
        return {
            "learning": {
                p.name: {"model": p.model.state_dict(), "optimizer": p.optimizer.state_dict(), **p.rule.state()}
                for p in self.learners
            },
            "frozen": {self.policies.names[p]: flat.clone() for p, flat in self.frozen.items()},
        }

    def load(self, state: dict) -> None:
        """A resumed run: each policy as saved, the frozen ones' parameters the checkpoint's, not the file's."""
        for policy in self.learners:
            kept = state["learning"][policy.name]
            policy.model.load_state_dict(kept["model"])
            policy.optimizer.load_state_dict(kept["optimizer"])
            policy.rule.load(kept)
        for p in self.frozen:
            self.frozen[p] = state["frozen"][self.policies.names[p]]

    # ------------------------------------------------------------------ as a learner extension

    def follow(self, run_rule: UpdateRule, uploads) -> None:
        """Learn as the run's policy does: with its rule's entropy bonus and clip range, uploaded the same way."""
        self.run_rule, self.uploads = run_rule, uploads

    def rows_learned(self, rows: int) -> int:
        return len(self.run_rows)

    def before_learning(self, storage: Storage, rollout: int, env_ids: np.ndarray | None) -> Storage:
        self.learn(storage, rollout, self.uploads, self.run_rule.entropy_coef, self.run_rule.clip)
        return self.run_policy_rows(storage)

    def advanced(self) -> None:
        self.advance()

    def publishing(self, model: torch.nn.Module, version: int) -> None:
        self.publish(version)


def named_policies(learner) -> NamedPolicies | None:
    """The other policies of ``multiagent.policies``, learned beside the run's; None without them."""
    spec = learner.spec
    named = policy_map(spec.config, spec.env_info.agent_names)
    if named is None:
        return None
    policies = NamedPolicies(
        spec.config,
        spec.envs,
        named,
        learner.buffers,
        learner.model,
        learner.other_policy,
        resuming=spec.resume is not None,
    )
    policies.follow(learner.rule, learner.uploads)
    return policies
