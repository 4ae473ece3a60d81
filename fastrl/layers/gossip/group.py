"""gala's collectives over every learner of every rank (torchrun), beside the ring's messages (``gala_ring``).

- ``GroupReduce``: ``gala.mixing = "allreduce"`` across ranks: every update, one all-reduce of the gradient
  over all G learners (every member gets the same bits), plus one element, "this learner finished": a
  learner that finishes takes part once more with it set, so its peers end at that update too.
- ``ConsensusRounds``: Proposition 1 measured over all G learners. In round m every learner all-reduces,
  without waiting on it, its θ in float64 (the sum gives x̄ over all G) and [its largest update norm, its
  staleness, its distance at round m − 1] (max). A learner posts a round only once its previous one
  completed, so at most one is pending. In lockstep schedules (allreduce, ``gala.deterministic``) a round
  is every ``ROUND_UPDATES``-th update, so x̄ is the average at one update k, the quantity the bound is
  about; otherwise a round starts ``ROUND_INTERVAL_S`` after the previous one completed, each learner
  giving the θ it holds then.

Collectives are polled through gossip's wait (``Wait``), so a learner waiting on them still beats its
heartbeat and ends at the stop flag.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from fastrl.errors import StopRequested
from fastrl.ranks.cohort import PeerRankLost

log = logging.getLogger(__name__)

ROUND_UPDATES = 10  # lockstep schedules: a consensus round at every 10th update
ROUND_INTERVAL_S = 0.5  # otherwise: a round this long after the previous one completed

Wait = Callable[[Callable[[], bool], Callable[[], bool]], bool]  # Gossip._wait(ready, gone)


@torch.no_grad()
def flatten(model: torch.nn.Module, out: torch.Tensor) -> torch.Tensor:
    """θ's state (what gossip averages) into ``out``, in ``state_dict`` order."""
    offset = 0
    for tensor in model.state_dict().values():
        n = tensor.numel()
        out[offset : offset + n].copy_(tensor.reshape(-1))
        offset += n
    return out


@torch.no_grad()
def unflatten(flat: torch.Tensor, model: torch.nn.Module) -> None:
    offset = 0
    for tensor in model.state_dict().values():
        n = tensor.numel()
        tensor.copy_(flat[offset : offset + n].view_as(tensor))
        offset += n


def first_line(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


class GroupReduce:
    """allreduce over every learner of every rank: the gradient's mean, and who finished."""

    def __init__(self, members: int, n_params: int, device: torch.device, wait: Wait, name: str):
        self.members, self.n_params, self.device, self.wait, self.name = members, n_params, device, wait, name
        self.pending = None  # the request of a collective this learner left unfinished (stopped while waiting)
        self.closed = False  # a learner finished: no more collectives

    def reduce(self, grads: list[torch.Tensor]) -> bool:
        """Replace ``grads`` by every learner's mean; False (grads untouched) when a learner finished instead."""
        flat = torch.cat(
            [g.reshape(-1).to(self.device, torch.float32) for g in grads] + [torch.zeros(1, device=self.device)]
        )
        self._collective(flat)
        if flat[-1] > 0:
            self.closed = True
            return False
        flat /= self.members  # the same sum on every member: the same bits
        for g, mean in zip(grads, flat[:-1].split([g.numel() for g in grads])):
            g.copy_(mean.view_as(g))
        return True

    def finish(self) -> None:
        """Take part once more, as "finished": peers at that update end there too. Not awaited."""
        if self.closed or self.pending is not None:
            return
        flag = torch.zeros(self.n_params + 1, device=self.device)
        flag[-1] = 1.0
        self.closed = True
        try:
            self.pending = dist.all_reduce(flag, async_op=True)
        except Exception as exc:  # noqa: BLE001 - the group is already broken: peers learn it their own way
            log.warning("gala %s: could not tell the allreduce peers it finished (%s)", self.name, first_line(exc))

    def _collective(self, flat: torch.Tensor) -> None:
        try:
            request = dist.all_reduce(flat, async_op=True)
            self.pending = request
            self.wait(request.is_completed, lambda: False)  # beats the heartbeat, ends at the stop flag
            request.wait()
        except StopRequested:
            raise  # left pending: finish() will not add another collective behind it
        except Exception as exc:  # noqa: BLE001
            raise PeerRankLost(
                f"gala {self.name}: the gradient all-reduce over every rank's learners failed "
                f"({first_line(exc)}); another rank died, hung past dist.timeout_s or left"
            ) from None
        self.pending = None


@dataclass(frozen=True)
class Consensus:
    """One completed consensus round, as this learner sees it."""

    update: int  # this learner's update when it gave its θ
    distance: float  # ‖x_g − x̄‖, x̄ over all G learners' θ of this round
    largest: float  # the largest update norm of any learner so far (L of the bound)
    staleness: int  # the most updates any learner went without a new message (τ of the bound)
    previous_radius: float  # max over all G of ‖x_g − x̄‖ at the previous round (-1 before the second)


@dataclass
class _Round:
    update: int
    own: torch.Tensor  # x_g (float64)
    total: torch.Tensor  # Σ x over every learner, once reduced
    scalars: torch.Tensor  # [largest update norm, staleness, previous distance], max over every learner
    requests: tuple


class ConsensusRounds:
    """Proposition 1's measurements over every learner of every rank, one round pending at most."""

    def __init__(self, members: int, n_params: int, lockstep: bool, device: torch.device, board, wait: Wait, name: str):
        self.members, self.n_params, self.lockstep, self.device = members, n_params, lockstep, device
        self.board, self.wait, self.name = board, wait, name
        self.pending: _Round | None = None
        self.distance = -1.0  # this learner's at the last completed round
        self.completed_at = time.monotonic()
        self.stopped = False  # a learner finished or a round failed: no more rounds
        self.rounds = 0  # completed
        self.last: Consensus | None = None

    @torch.no_grad()
    def step(self, model: torch.nn.Module, update: int, largest: float, staleness: int) -> Consensus | None:
        """After ``update``: collect the pending round if it completed, post the next if it is due."""
        done = self._collect()
        if self.stopped or not self._due(update):
            return done
        if self.pending is not None:  # lockstep: the round of ROUND_UPDATES updates ago; learners are near it
            if not self.wait(self._complete, self.board.any_final):
                self.stopped = True  # a learner ended before giving its θ: this round will never complete
                return done
            done = self._collect()
            if self.stopped:
                return done
        self._post(model, update, largest, staleness)
        return done

    def _due(self, update: int) -> bool:
        if self.lockstep:
            return update % ROUND_UPDATES == 0
        return self.pending is None and time.monotonic() - self.completed_at >= ROUND_INTERVAL_S

    def _post(self, model: torch.nn.Module, update: int, largest: float, staleness: int) -> None:
        own = flatten(model, torch.empty(self.n_params, dtype=torch.float64, device=self.device))
        total = own.clone()
        scalars = torch.tensor([largest, float(staleness), self.distance], dtype=torch.float64, device=self.device)
        try:
            requests = (
                dist.all_reduce(total, async_op=True),
                dist.all_reduce(scalars, op=dist.ReduceOp.MAX, async_op=True),
            )
        except Exception as exc:  # noqa: BLE001 - the group is broken: the ring or the ranks' link says why
            self._stop(exc)
            return
        self.pending = _Round(update, own, total, scalars, requests)

    def _complete(self) -> bool:
        assert self.pending is not None, "only a posted round can complete"
        return all(request.is_completed() for request in self.pending.requests)

    def _collect(self) -> Consensus | None:
        if self.pending is None or not self._complete():
            return None
        current, self.pending = self.pending, None
        try:
            for request in current.requests:
                request.wait()
        except Exception as exc:  # noqa: BLE001
            self._stop(exc)
            return None
        self.distance = float(torch.linalg.vector_norm(current.own - current.total / self.members))
        self.completed_at = time.monotonic()
        largest, staleness, previous = current.scalars.tolist()
        self.rounds += 1
        self.last = Consensus(current.update, self.distance, largest, int(staleness), previous)
        return self.last

    def _stop(self, exc: Exception) -> None:
        """A measurement, not the learning: a failed round ends the measuring, not the run."""
        self.stopped = True
        log.warning(
            "gala %s: consensus round failed (%s); no more rounds (a learner ended or a rank is gone)",
            self.name,
            first_line(exc),
        )
