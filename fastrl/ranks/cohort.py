"""The learners that learn as one across ranks (``torchrun``): one learner per rank, one torch.distributed group.

Every rank steps its own share of the envs and learns from its own storage; the learners keep
bit-identical parameters by taking, at every optimizer step, the same gradient: the mean of
every rank's, all-reduced before clipping (so the clip sees the global norm, as one learner
over all the envs would), in buckets started while backward still runs (``gradient_buckets``).
What else one learner over every env would compute from all of the data is made global the same
way, so 2 ranks x 4 envs learn what 1 rank x 8 envs learns, up to float rounding:

- batch statistics (the running observation and return normalisers) merge every rank's moments
  in rank order;
- PPO's minibatches are drawn over the global rows (``rows``), each rank taking the rows it
  holds, with advantages normalised over the whole minibatch (``gather``) and each rank's loss
  weighted by its share of it;
- whether to stop and whether a checkpoint is due by time are agreed at every barrier
  (``agree``: any rank's wish), so every rank parks, saves and finishes at the same barrier.

A collective that fails (a rank died, hung past ``dist.timeout_s`` or left) raises
``PeerRankLost``; the learner saves its last good state and the run ends as for any fault.

With one rank (``Solo``) every call is the identity and the learner's arithmetic is the one it
always was. gala's learners do not learn as one (each has its own parameters): they gossip
(``fastrl.layers.gossip.mixing``) and use this module only for the process group.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

import torch

from fastrl.algos.sharding import Solo
from fastrl.errors import FastrlError
from fastrl.ranks.gradient_buckets import MB, OverlappedAllReduce

log = logging.getLogger(__name__)


class PeerRankLost(FastrlError, RuntimeError):
    """A cross-rank collective failed: another rank died, hung past dist.timeout_s, or left."""


class Cohort(Solo):
    """One learner of each rank, in the default process group (rank = the launch's rank)."""

    def __init__(self, rank: int, ranks: int, device: torch.device, bucket_mb: float = 1.0):
        self.rank, self.ranks, self.device = rank, ranks, device
        self.seconds = 0.0  # spent in collectives (waiting for the slowest rank included)
        self.gradients = OverlappedAllReduce(ranks, int(bucket_mb * MB), self._start_all_reduce, self._guarded)

    def watch(self, net: torch.nn.Module) -> None:
        self.gradients.watch(net)

    def reduce_gradients(self, grads: list[torch.Tensor]) -> None:
        self.gradients.reduce(grads)

    def _start_all_reduce(self, flat: torch.Tensor, asynchronous: bool):
        return torch.distributed.all_reduce(flat, async_op=asynchronous)  # flat: gradients on self.device

    def agree(self, *wishes: bool) -> tuple[bool, ...]:
        flags = torch.tensor([int(w) for w in wishes], dtype=torch.int32, device=self.device)
        self._collective("barrier agreement", torch.distributed.all_reduce, flags, op=torch.distributed.ReduceOp.MAX)
        return tuple(bool(f) for f in flags.tolist())

    def rows(self, count: int) -> tuple[int, int]:
        return self.rank * count, self.ranks * count

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous().to(self.device)
        parts = [torch.empty_like(x) for _ in range(self.ranks)]
        self._collective("all-gather", torch.distributed.all_gather, parts, x)
        return torch.cat(parts).to(x.device)

    def moments(self, count, mean, var):
        stacked = torch.stack([torch.full_like(mean, float(count)), mean, var])
        every = self.gather(stacked.unsqueeze(0))
        total, mean, var = every[0, 0].flatten()[0], every[0, 1], every[0, 2]
        for r in range(1, self.ranks):  # Chan et al.'s merge, in rank order: the same bits on every rank
            n, m, v = every[r, 0].flatten()[0], every[r, 1], every[r, 2]
            merged = total + n
            delta = m - mean
            mean = mean + delta * (n / merged)
            var = (var * total + v * n + delta.square() * (total * n / merged)) / merged
            total = merged
        return int(total), mean, var

    def _collective(self, what: str, call, *args, **kwargs):
        return self._guarded(what, lambda: call(*args, **kwargs))

    def _guarded(self, what: str, call):
        started = time.perf_counter()
        try:
            return call()
        except Exception as exc:  # noqa: BLE001 - gloo and nccl raise RuntimeError subclasses of their own
            raise PeerRankLost(
                f"rank {self.rank}'s learner: the cross-rank {what} failed ({type(exc).__name__}: "
                f"{str(exc).splitlines()[0] if str(exc) else ''}); another rank died, hung past "
                "dist.timeout_s or left"
            ) from None
        finally:
            self.seconds += time.perf_counter() - started


def join_group(ranks, member: int, members: int, device: torch.device) -> None:
    """Join the launch's process group as ``member`` of ``members`` (one learner per rank; gala: every
    learner of every rank), through the launch's store under keys of its own."""
    import torch.distributed as dist

    if dist.is_initialized():
        return
    store = dist.PrefixStore("group/", ranks.connect())
    if ranks.backend == "nccl":
        torch.cuda.set_device(device)
    dist.init_process_group(
        ranks.backend, store=store, rank=member, world_size=members, timeout=timedelta(seconds=ranks.timeout_s)
    )
    log.info("learner %d of %d joined the %s group", member, members, ranks.backend)


def join_cohort(spec, device: torch.device) -> Solo:
    """The cohort of this rank's learner: ``Solo`` on one rank and in a mode of independent learners (gala)."""
    if spec.ranks is None or spec.independent:
        return Solo()
    join_group(spec.ranks, spec.ranks.rank, spec.ranks.ranks, device)
    # gloo between CUDA learners (more ranks on a node than GPUs): the small collectives go through the CPU
    talks_on = device if spec.ranks.backend == "nccl" else torch.device("cpu")
    return Cohort(spec.ranks.rank, spec.ranks.ranks, talks_on, spec.config.dist.bucket_mb)


def leave_group() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001 - a peer already gone: nothing left to tear down with it
            pass
