"""Plug-ins that misbehave as the fuzz tells them: model ``tests.fuzz.plugins:model`` with ``model.kwargs = {fault,
at}``, and an update rule for generated algorithm registrations.

Model faults: ``raise_init``; at its ``at``-th forward (the start-up check's is the first): ``raise``, ``nan_head``,
``nan_value``, ``inf_value``, ``head_shape`` (a column too many), ``value_shape`` (``[B, 2]``), ``int_head`` (an
integer tensor), ``one_output`` (the head alone), ``meta_device`` (tensors on torch's meta device); ``not_module``
(the factory returns no module)."""

from __future__ import annotations

import torch

from fastrl.algos.a2c import A2CSync
from fastrl.models.mlp import MLPPolicy


class FaultyPolicy(MLPPolicy):
    def __init__(self, fault: str, at: int, **kwargs):
        super().__init__(**kwargs)
        self.fault, self.at, self.calls = fault, at, 0

    def forward(self, obs):
        head, value = super().forward(obs)
        self.calls += 1
        if self.calls < self.at:
            return head, value
        fault = self.fault
        if fault == "raise":
            raise RuntimeError(f"forward {self.calls} failed on purpose")
        if fault == "nan_head":
            return head * float("nan"), value
        if fault == "nan_value":
            return head, value * float("nan")
        if fault == "inf_value":
            return head, value + float("inf")
        if fault == "head_shape":
            return torch.cat([head, head[:, :1]], 1), value
        if fault == "value_shape":
            return head, torch.stack([value, value], 1)
        if fault == "int_head":
            return head.long(), value
        if fault == "one_output":
            return head
        if fault == "meta_device":
            return head.to("meta"), value.to("meta")
        return head, value


def model(obs_shape, n_actions, fault: str = "none", at: int = 1):
    if fault == "raise_init":
        raise RuntimeError("the model could not be built, on purpose")
    if fault == "not_module":
        return object()
    return FaultyPolicy(fault, at, obs_shape=obs_shape, n_actions=n_actions)


class FaultyRule(A2CSync):
    """A2C whose loss, from its ``at``-th call, raises or is NaN (options ``fault``, ``at``)."""

    calls = 0

    def _loss(self, net, storage):
        loss, stats = super()._loss(net, storage)
        FaultyRule.calls += 1
        fault = getattr(self.options, "fault", "none")
        if FaultyRule.calls >= getattr(self.options, "at", 1):
            if fault == "raise":
                raise RuntimeError("the loss failed on purpose")
            if fault == "nan":
                return loss * float("nan"), stats
        return loss, stats
