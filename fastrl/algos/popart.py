"""PopArt (van Hasselt et al. 2016; Hessel et al. 2019, "Multi-task Deep RL with PopArt") for a value head in units
of running statistics: ``algo.normalize_returns`` in IMPALA (``fastrl.algos.impala``).

The built-in models' value is ``σ · (w·h + b) + μ``: the head ``value_head`` (w, b) predicts in units of the
running statistics (μ, σ) of ``value_normalizer`` (``fastrl.models.normalizer.ValueNormalizer``), and the model
returns values in the returns' own units, so V-trace, the actors and eval read raw values. PopArt's two parts:

- *Pop* ("preserving outputs precisely"): when the statistics move from (μ, σ) to (μ', σ'), the head becomes
  w' = w σ/σ', b' = (σ b + μ − μ')/σ', so every value the model returns is the one it returned before
  (``preserve_outputs``): moving the statistics changes no target and no action.
- *Art* ("adaptively rescaling targets"): the value regresses the targets in units of σ', the loss
  ((v_s − V(x))/σ')², and the policy gradient's advantages are divided by σ' too, so the gradients' scale does
  not follow the returns'.

The loss is differentiated at the parameters before the rescale (they made the forward); the gradient it gives
the head is σ/σ' times the gradient of the same loss at the rescaled head (V = σ'(w'·h + b') + μ'), and the
trunk's is the same at both, so ``rescaled_gradients`` multiplies the head's by σ'/σ: the step is the paper's, at
the parameters after the rescale. The statistics are model buffers: checkpoints, resume, the actors' weights and
``load_policy`` carry them with the head they belong to.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from fastrl.models.normalizer import MergeRanks


def value_statistics(model: nn.Module) -> nn.Module | None:
    """``model``'s ``algo.normalize_returns`` statistics, or None."""
    return getattr(model, "value_normalizer", None)


def value_head(model: nn.Module) -> nn.Linear:
    """The linear layer whose output the statistics scale (the built-in models' ``value_head``)."""
    head = getattr(model, "value_head", None)
    if not isinstance(head, nn.Linear) or head.out_features != 1:
        raise TypeError(
            f"PopArt rescales a model's value head, a Linear(width, 1) named value_head; {type(model).__name__} has "
            f"{type(head).__name__ if head is not None else 'none'}"
        )
    return head


def snapshot(statistics: nn.Module) -> tuple[Tensor, Tensor]:
    """(μ, σ) as they stand, copied: what ``preserve_outputs`` rescales from."""
    return statistics.mean.clone(), statistics.std().clone()


@torch.no_grad()
def observe_targets(
    statistics: nn.Module, targets: Tensor, weights: Tensor | None = None, merge_ranks: MergeRanks | None = None
) -> Tensor:
    """Merge the value targets ``targets`` (the rows ``weights`` keeps, where given) into the statistics; σ' after.
    ``merge_ranks``: every rank's targets (``fastrl.ranks.cohort``), so every rank's statistics and head agree."""
    rows = targets.reshape(-1) if weights is None else targets[weights > 0]
    statistics.observe(rows.float(), merge_ranks)
    return statistics.std()


@torch.no_grad()
def preserve_outputs(head: nn.Linear, before: tuple[Tensor, Tensor], after: tuple[Tensor, Tensor]) -> None:
    """Rescale ``head`` in place from statistics ``before`` = (μ, σ) to ``after`` = (μ', σ'), so that
    σ' (w'·h + b') + μ' = σ (w·h + b) + μ for every h."""
    (mean, std), (new_mean, new_std) = before, after
    head.weight.mul_(std / new_std)
    head.bias.copy_((std * head.bias + mean - new_mean) / new_std)


def rescaled_gradients(
    net: nn.Module, grads: list[Tensor], head: nn.Linear, before: tuple[Tensor, Tensor], after: tuple[Tensor, Tensor]
) -> list[Tensor]:
    """``grads`` (one per ``net.parameters()``) with the head's multiplied by σ'/σ: the loss's gradient at the
    rescaled head."""
    factor = after[1] / before[1]
    own = {id(head.weight), id(head.bias)}
    return [g * factor if id(p) in own else g for p, g in zip(net.parameters(), grads, strict=True)]
