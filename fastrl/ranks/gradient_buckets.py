"""torchrun's gradient all-reduce, started while backward still runs (the overlap of PyTorch's DDP).

The parameters are cut into buckets of about ``dist.bucket_mb`` in reverse order of definition:
backward makes the last layers' gradients first. A hook on every parameter counts the gradients
accumulated into its bucket; a full bucket is flattened and its all-reduce starts asynchronously,
while backward goes on through the earlier layers (on the Nature CNN: the 6 MB fully connected
layer's gradient travels while the convolutions' backward, most of the compute, still runs).
``reduce`` waits for them and writes the ranks' mean back into the gradients.

Every rank must issue the same collectives in the same order, whatever its data:

- buckets start strictly in bucket order (a bucket filled early waits for the ones before it);
- a rank with nothing to differentiate (no rows in a PPO minibatch), or stepping gradients that
  did not come from the backward just run (hts A2C's pending gradient after a resume), starts
  every bucket not yet started, in that same order, from the gradients it is given;
- a backward whose gradients are never stepped (the learner's warm-up) has its all-reduces
  finished and dropped when the next backward begins, on every rank alike.

The same buckets through the same collective give the same bits either way, so overlapping
changes no result: ranks stay bit-identical to each other and exact across resumes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    import torch.distributed as dist

MB = 1 << 20


def bucket_layout(tensors: list[torch.Tensor], cap_bytes: int) -> list[list[int]]:
    """Indices of ``tensors`` grouped from the last to the first, each group closed once it holds
    ``cap_bytes`` or more (``cap_bytes`` <= 0: one group of all)."""
    groups, current, size = [], [], 0
    for index in reversed(range(len(tensors))):
        current.append(index)
        size += tensors[index].numel() * tensors[index].element_size()
        if 0 < cap_bytes <= size:
            groups.append(current)
            current, size = [], 0
    if current:
        groups.append(current)
    return groups


@dataclass
class _Started:
    bucket: int
    flat: torch.Tensor
    work: dist.Work | None  # None: done already (started blocking)


@dataclass
class _Round:
    """The all-reduces of one backward pass of one watched net."""

    net: int  # which watched net's backward
    seen: set[int] = field(default_factory=set)  # its parameters whose gradient is in
    filled: list[int] = field(default_factory=list)  # per bucket, how many of its gradients are in
    sources: dict[int, torch.Tensor] = field(default_factory=dict)  # the gradient each started one was made of
    started: list[_Started] = field(default_factory=list)

    @property
    def next(self) -> int:
        return len(self.started)


class OverlappedAllReduce:
    """The mean gradient over ``ranks``, all-reduced in buckets as backward makes them.

    ``start(flat, asynchronous)`` runs one all-reduce in place, returning its work if asynchronous;
    ``guard(what, fn)`` runs ``fn`` turning a collective's failure into the cohort's error and
    counting its seconds. A net of one bucket gets no hooks: there is nothing to overlap, and a
    blocking all-reduce costs less than an asynchronous one (measured on the CartPole MLP).
    """

    def __init__(self, ranks: int, cap_bytes: int, start: Callable, guard: Callable):
        self.ranks, self.cap_bytes, self._launch, self._guard = ranks, cap_bytes, start, guard
        self.nets: list[tuple[list[torch.nn.Parameter], list[list[int]], dict[int, int]]] = []
        self.round: _Round | None = None

    def watch(self, net: torch.nn.Module) -> None:
        """Start each bucket's all-reduce during ``net``'s backward passes, once its gradients are in."""
        params = list(net.parameters())
        buckets = bucket_layout(params, self.cap_bytes)
        owner = {index: b for b, group in enumerate(buckets) for index in group}
        key = len(self.nets)
        self.nets.append((params, buckets, owner))
        if len(buckets) < 2:
            return
        for index, p in enumerate(params):
            if p.requires_grad:
                p.register_post_accumulate_grad_hook(lambda p, index=index: self._accumulated(key, index))

    def reduce(self, grads: list[torch.Tensor]) -> None:
        """Make ``grads`` the ranks' mean: the round its backward started if it is theirs, else all from here."""
        current, self.round = self.round, None
        if current is None or not self._made_of(current, grads):
            if current is not None:
                self._drain(current)
            current = _Round(net=-1)
        buckets = bucket_layout(grads, self.cap_bytes)
        while current.next < len(buckets):  # what backward did not start: one after the other, blocking
            self._start(current, current.next, [grads[i] for i in buckets[current.next]], asynchronous=False)
        self._wait(current)
        for s in current.started:
            s.flat /= self.ranks
            members = buckets[s.bucket]
            for i, mean in zip(members, s.flat.split([grads[i].numel() for i in members])):
                grads[i].copy_(mean.view_as(grads[i]))

    # -------------------------------------------------------------------------------- during backward

    def _accumulated(self, key: int, index: int) -> None:
        params, buckets, owner = self.nets[key]
        current = self.round
        if current is None or current.net != key or index in current.seen:  # a new backward pass
            if current is not None:
                self._drain(current)
            current = self.round = _Round(net=key, filled=[0] * len(buckets))
        current.seen.add(index)
        current.filled[owner[index]] += 1
        while current.next < len(buckets) and self._full(params, buckets[current.next], current):
            members = buckets[current.next]
            current.sources.update((i, params[i].grad) for i in members if params[i].grad is not None)
            grads = [params[i].grad if params[i].grad is not None else torch.zeros_like(params[i]) for i in members]
            self._start(current, current.next, grads, asynchronous=True)

    @staticmethod
    def _full(params, members: list[int], current: _Round) -> bool:
        return current.filled[current.next] == sum(params[i].requires_grad for i in members)

    def _start(self, current: _Round, bucket: int, grads: list[torch.Tensor], asynchronous: bool) -> None:
        flat = torch.cat([g.reshape(-1) for g in grads])
        work = self._guard("gradient all-reduce", lambda: self._launch(flat, asynchronous))
        current.started.append(_Started(bucket, flat, work))

    def _wait(self, current: _Round) -> None:
        self._guard("gradient all-reduce", lambda: [s.work.wait() for s in current.started if s.work is not None])

    def _made_of(self, current: _Round, grads: list[torch.Tensor]) -> bool:
        """Whether the buckets ``current`` started were made of ``grads`` (the same tensors, not copies)."""
        return all(i < len(grads) and grads[i] is g for i, g in current.sources.items())

    def _drain(self, current: _Round) -> None:
        """Finish and drop the all-reduces of a backward whose gradients were not stepped (every rank does)."""
        self._wait(current)
