"""What an update rule may ask of the other ranks' learners, and the one-rank answer.

Under torchrun every rank's learner learns as one (``fastrl.ranks.cohort.Cohort``): minibatches drawn over every
rank's rows, advantages normalised over the whole minibatch, running statistics merged in rank order. A rule
asks through this interface and never learns whether there are other ranks; with one (``Solo``) every call is
the identity. The learner hands each rule its cohort: the rules never import ``fastrl.ranks``.
"""

from __future__ import annotations

import torch


class Solo:
    """One rank: nothing to share."""

    rank, ranks = 0, 1
    seconds = 0.0  # spent in collectives with other ranks

    def watch(self, net: torch.nn.Module) -> None:
        """``net``'s backward passes make the gradients that ``reduce_gradients`` is given."""

    def reduce_gradients(self, grads: list[torch.Tensor]) -> None:
        pass

    def agree(self, *wishes: bool) -> tuple[bool, ...]:
        return wishes

    def rows(self, count: int) -> tuple[int, int]:
        """(the global index of this rank's first row, the global row count) when every rank holds ``count``."""
        return 0, count

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        """Every rank's ``x`` concatenated in rank order (along dim 0)."""
        return x

    def moments(self, count: int, mean: torch.Tensor, var: torch.Tensor) -> tuple[int, torch.Tensor, torch.Tensor]:
        """The (count, mean, population variance) of every rank's batch together."""
        return count, mean, var
