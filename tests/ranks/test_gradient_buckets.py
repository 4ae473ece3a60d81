"""torchrun's gradient all-reduce in buckets started during backward (fastrl/ranks/gradient_buckets.py).

In one process, a stand-in collective (``FakeRanks``) records what each rank would issue: the order
and sizes of the buckets, and when during backward each starts. Across two real gloo ranks, the
overlapped path and the all-at-once path give the same bits, and every rank the same mean.
"""
import os

import pytest
import torch
import torch.multiprocessing as mp

from fastrl.ranks.cohort import Cohort
from fastrl.ranks.gradient_buckets import OverlappedAllReduce, bucket_layout

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh(),
                               torch.nn.Linear(64, 3))


class _Work:
    def __init__(self, flat: torch.Tensor, other: torch.Tensor, log: list):
        self.flat, self.other, self.log = flat, other, log

    def wait(self) -> None:
        self.log.append(("wait", self.flat.numel()))
        self.flat += self.other  # the other rank's share of this bucket


class FakeRanks:
    """Two ranks where the other one's gradients are ``other`` (a flat tensor in bucket order)."""

    def __init__(self, net: torch.nn.Module, cap_bytes: int, other: list[torch.Tensor]):
        self.log: list = []
        self.other = other
        self.reducer = OverlappedAllReduce(2, cap_bytes, self.start, lambda what, fn: fn())
        self.reducer.watch(net)
        self.layout = bucket_layout(list(net.parameters()), cap_bytes)

    def start(self, flat: torch.Tensor, asynchronous: bool) -> _Work | None:
        bucket = self.layout[sum(1 for entry in self.log if entry[0] == "start") % len(self.layout)]
        self.log.append(("start", flat.numel()))
        work = _Work(flat, torch.cat([self.other[i].reshape(-1) for i in bucket]), self.log)
        if asynchronous:
            return work
        work.wait()  # a blocking all-reduce: done on return
        return None


def _backward(net: torch.nn.Module, seed: int) -> list[torch.Tensor]:
    torch.manual_seed(seed)
    net.zero_grad(set_to_none=True)
    net(torch.randn(16, 8)).square().mean().backward()
    return [p.grad for p in net.parameters()]


def test_buckets_run_from_the_last_parameter_to_the_first_and_close_at_the_cap():
    tensors = [torch.zeros(n) for n in (10, 20, 30, 40)]  # float32: 40, 80, 120, 160 bytes
    assert bucket_layout(tensors, 150) == [[3], [2, 1], [0]]
    assert bucket_layout(tensors, 0) == [[3, 2, 1, 0]]
    assert bucket_layout(tensors, 1 << 20) == [[3, 2, 1, 0]]


def test_a_bucket_starts_while_backward_still_runs_and_the_result_is_the_ranks_mean():
    net = _net()
    other = [torch.randn_like(p) for p in net.parameters()]
    ranks = FakeRanks(net, cap_bytes=1024, other=other)
    first_layer = next(net.parameters())
    first_layer.register_post_accumulate_grad_hook(lambda p: ranks.log.append(("first layer's gradient", 0)))
    grads = _backward(net, seed=1)
    mine = [g.clone() for g in grads]
    assert len(ranks.layout) >= 3
    kinds = [kind for kind, _ in ranks.log]
    assert kinds.index("start") < kinds.index("first layer's gradient")  # overlapped with the rest of backward
    ranks.reducer.reduce(grads)
    assert [size for kind, size in ranks.log if kind == "start"] == [sum(grads[i].numel() for i in bucket)
                                                                     for bucket in ranks.layout]
    for g, m, o in zip(grads, mine, other):
        assert torch.allclose(g, (m + o) / 2)


def test_a_model_of_one_bucket_is_all_reduced_after_backward_blocking():
    net = _net()
    other = [torch.ones_like(p) for p in net.parameters()]
    ranks = FakeRanks(net, 1 << 20, other)  # the whole model in one bucket: nothing to overlap
    grads = _backward(net, seed=6)
    assert ranks.log == []  # no hooks: backward started nothing
    mine = [g.clone() for g in grads]
    ranks.reducer.reduce(grads)
    assert ranks.log == [("start", sum(g.numel() for g in grads)), ("wait", sum(g.numel() for g in grads))]
    assert all(torch.allclose(g, (m + 1) / 2) for g, m in zip(grads, mine))


def test_a_rank_without_a_backward_issues_the_same_buckets_in_the_same_order():
    net = _net()
    other = [torch.zeros_like(p) for p in net.parameters()]
    with_backward = FakeRanks(net, 1024, other)
    with_backward.reducer.reduce(_backward(net, seed=2))
    without = FakeRanks(_net(), 1024, other)
    without.reducer.reduce([torch.zeros_like(p) for p in net.parameters()])  # no rows in this minibatch
    started = [(kind, size) for kind, size in with_backward.log if kind == "start"]
    assert started == [(kind, size) for kind, size in without.log if kind == "start"]


def test_a_backward_never_stepped_is_finished_and_dropped_before_the_next():
    net = _net()
    other = [torch.ones_like(p) for p in net.parameters()]
    ranks = FakeRanks(net, 1024, other)
    _backward(net, seed=3)  # the learner's warm-up: its all-reduces start, nobody steps them
    buckets = len(ranks.layout)
    grads = _backward(net, seed=4)
    assert [kind for kind, _ in ranks.log].count("wait") == buckets  # drained when the second backward began
    mine = [g.clone() for g in grads]
    ranks.reducer.reduce(grads)
    assert [kind for kind, _ in ranks.log].count("start") == 2 * buckets
    for g, m in zip(grads, mine):
        assert torch.allclose(g, (m + 1) / 2)


def test_gradients_from_elsewhere_are_reduced_whole_from_what_is_given():
    net = _net()
    other = [torch.zeros_like(p) for p in net.parameters()]
    ranks = FakeRanks(net, 1024, other)
    _backward(net, seed=5)
    given = [torch.full_like(p, 4.0) for p in net.parameters()]  # a resumed pending gradient, say
    ranks.reducer.reduce(given)
    assert all(torch.equal(g, torch.full_like(g, 2.0)) for g in given)


def _rank(rank: int, port: int, out: dict) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    torch.distributed.init_process_group("gloo", rank=rank, world_size=2)
    try:
        results = []
        for bucket_mb in (0.001, 0.0):  # overlapped in buckets of ~1 KB, then one all-reduce after backward
            net = _net()
            cohort = Cohort(rank, 2, torch.device("cpu"), bucket_mb)
            cohort.watch(net)
            grads = _backward(net, seed=10 + rank)
            cohort.reduce_gradients(grads)
            results.append(torch.cat([g.reshape(-1) for g in grads]))
        out[rank] = results
    finally:
        torch.distributed.destroy_process_group()


def test_two_gloo_ranks_get_the_same_mean_overlapped_or_not():
    from fastrl.bench.rank_group import free_port

    with mp.Manager() as manager:
        out = manager.dict()
        mp.start_processes(_rank, args=(free_port(), out), nprocs=2, start_method="spawn")
        (overlapped0, whole0), (overlapped1, whole1) = out[0], out[1]
    assert torch.equal(overlapped0, overlapped1)  # every rank steps the same bits
    expected = sum(torch.cat([g.reshape(-1) for g in _backward(_net(), seed=10 + r)]) for r in range(2)) / 2
    assert torch.allclose(overlapped0, expected)
    assert torch.equal(overlapped0, whole0) and torch.equal(whole0, whole1)  # overlapping changes no bit


def test_a_negative_bucket_size_is_refused():
    from fastrl.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="dist.bucket_mb"):
        load_config(None, ["dist.bucket_mb=-1.0"])
