"""A plug-in algorithm's rule held to its contract at warm-up, before any env steps.

A rule's ``learn`` returns its loss terms and the metrics its registration names (``Algorithm.metrics``);
``advance`` returns an ``Update`` or None; ``state`` a dict the checkpoint keeps. A rule that breaks one of
these used to be stopped at its first update, after start-up and a rollout of env steps. Here a copy of the
rule, with copies of its model and optimizer, runs one whole cycle on the zero storage the warm-up uses;
what it returns is checked, and the copy is dropped. The learner's θ, optimizer, rule and random streams are
as they were (the torch and numpy global streams are put back), so a run's bits do not change.

Only plug-ins take the trial: the built-ins' contracts are held by the test suite, and a trial of PPO's
epochs on an Atari storage would add seconds to every start.
"""

from __future__ import annotations

import copy
import logging
import numbers
from collections.abc import Callable
from contextlib import contextmanager

import numpy as np
import torch

from fastrl.algos.update_rule import Update, UpdateRule
from fastrl.buffers.device_storage import DeviceStorage
from fastrl.errors import FastrlError

log = logging.getLogger(__name__)


class RuleContractError(FastrlError, RuntimeError):
    """A plug-in's rule returned what its contract does not allow (found at warm-up)."""


def check_rule_contract(rule: UpdateRule, storage: DeviceStorage, column: Callable[[str], int], name: str) -> None:
    """One ``learn``, ``advance`` and ``state`` of a copy of ``rule`` on ``storage``; ``column`` maps a reported
    key to its stats column (raising for a key the registration does not name). Raises RuleContractError."""
    try:
        trial = copy.deepcopy(rule, memo={id(rule.cohort): rule.cohort})  # the ranks' link is shared, not copied
    except Exception as exc:  # a model or state that cannot be copied (a compiled graph): checked at its update
        log.debug("algorithm %r: its rule could not be copied for the warm-up check (%s)", name, exc)
        return
    with _streams_kept(rule.device):
        try:
            losses = trial.learn(storage, 0)
        except FloatingPointError:
            return  # a loss non-finite on all-zero data says nothing of real data; its keys go unchecked
        _check_losses(losses, column, name)
        update = trial.advance()
        if update is not None and not isinstance(update, Update):
            raise RuleContractError(
                f"algorithm {name!r}: its rule's advance() returned {type(update).__name__}; it must return a "
                "fastrl.algos.update_rule.Update or None"
            )
        state = trial.state()
        if not isinstance(state, dict):
            raise RuleContractError(
                f"algorithm {name!r}: its rule's state() returned {type(state).__name__}; it must return a dict "
                "(what a resumed run's load() gets back)"
            )


def _check_losses(losses, column: Callable[[str], int], name: str) -> None:
    if not isinstance(losses, dict):
        raise RuleContractError(
            f"algorithm {name!r}: its rule's learn() returned {type(losses).__name__}; it must return a dict of "
            "loss terms and metrics by name (fastrl.algos.update_rule.Losses)"
        )
    for key, value in losses.items():
        try:
            column(key)
        except RuntimeError as exc:
            raise RuleContractError(f"{exc}; found at warm-up, before the run started") from None
        if not isinstance(value, (numbers.Real, np.floating, np.integer)) and not (
            isinstance(value, torch.Tensor) and value.numel() == 1
        ):
            raise RuleContractError(
                f"algorithm {name!r}: its rule's learn() reported {key!r} = {type(value).__name__}; each value must "
                "be a number"
            )


@contextmanager
def _streams_kept(device: torch.device):
    """The torch (and CUDA) and numpy global random streams as they were before the block."""
    cpu, numpy_state = torch.get_rng_state(), np.random.get_state()
    cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
    try:
        yield
    finally:
        torch.set_rng_state(cpu)
        np.random.set_state(numpy_state)
        if cuda is not None:
            torch.cuda.set_rng_state(cuda, device)
