"""The multi-rank benchmark's processes: a group of ranks of ``torch.distributed`` (gloo, on 127.0.0.1,
one torch thread each) that time one optimizer step and one all-reduce per config, and the parent that
spawns them, watches them and reaps them (``fastrl bench multinode`` puts their medians together).

Every figure is the median of ``repeats`` timed calls after ``warmup`` untimed ones, taken per rank;
each all-reduce runs after a barrier, so that it times the collective, not one rank waiting for the
other's compute.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import socket
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from multiprocessing.connection import wait
from pathlib import Path
from typing import TYPE_CHECKING

from fastrl.config import Config
from fastrl.errors import FastrlError
from fastrl.process.lifeline import die_with_parent, orphaned, stop_processes

if TYPE_CHECKING:
    from fastrl.envs import EnvInfo

logger = logging.getLogger(__name__)

FLOAT_BYTES = 4


class BenchFailed(FastrlError, RuntimeError):
    """A rank failed or the group ran past its time limit (every rank was stopped)."""


class RankFailed(BenchFailed):
    """A rank exited with a non-zero code."""


@dataclass(frozen=True)
class Job:
    """One config's model and batch, as every rank builds it."""

    config_path: str
    config: Config
    env_info: EnvInfo  # picklable; imported for the type only, to keep this module's imports light
    model: str
    algo: str
    numel: int  # count_parameters: what is all-reduced
    trainable: int  # the gradient alone, for reference
    step_rows: int  # rows of one optimizer step's batch
    steps_per_update: int


@dataclass(frozen=True)
class Options:
    repeats: int
    warmup: int
    sweep_bytes: tuple[int, ...]
    timeout_s: float


@dataclass(frozen=True)
class RankTimes:
    """One rank's medians (seconds)."""

    step_s: list[float]  # per job
    allreduce_s: list[float]  # per job
    sweep_s: list[float]  # per sweep size; empty with 1 rank
    overlapped_s: list[float] = field(default_factory=list)  # per job: a step with the learner's bucketed all-reduce
    profiles: list[dict] = field(default_factory=list)  # per job: asdict(BackwardProfile)


@dataclass(frozen=True)
class BackwardProfile:
    """When a step's gradient buckets are ready (medians, seconds from the step's start), the learner's layout."""

    bucket_bytes: list[int]  # in the order their all-reduces start
    ready_s: list[float]
    backward_end_s: float


# --- inside each rank ---------------------------------------------------------------------------


def _median_s(fn, repeats: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _time_step(job: Job, options: Options, cohort=None) -> tuple[float, BackwardProfile]:
    """Median seconds of one optimizer step on a random batch of the learner's size, and when its gradient
    buckets were ready; with ``cohort`` the gradients are all-reduced as the learner does (in buckets started
    during backward) before the clip."""
    import numpy as np
    import torch

    from fastrl.algos.optimizers import make_optimizer
    from fastrl.models.policy import build_policy
    from fastrl.ranks.gradient_buckets import MB, bucket_layout

    torch.manual_seed(0)
    model = build_policy(job.env_info, job.config, device="cpu").train()
    optimizer = make_optimizer(model, job.config.algo)
    params = list(model.parameters())
    buckets = bucket_layout(params, int(job.config.dist.bucket_mb * MB))
    stamps: dict[int, float] = {}
    for index, p in enumerate(params):
        p.register_post_accumulate_grad_hook(lambda p, index=index: stamps.__setitem__(index, time.perf_counter()))
    if cohort is not None:
        cohort.watch(model)
    shape = (job.step_rows, *job.env_info.obs_shape)
    dtype = np.dtype(job.env_info.obs_dtype)
    rng = np.random.default_rng(0)
    # the values do not change the cost; the dtype does (uint8 frames are converted inside the model)
    values = rng.integers(0, 256, shape) if dtype == np.uint8 else rng.standard_normal(shape)
    obs = torch.from_numpy(values.astype(dtype))
    max_norm = job.config.algo.max_grad_norm
    marks: list[tuple[list[float], float]] = []

    def step() -> None:
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        logits, value = model(obs)
        loss = logits.logsumexp(-1).mean() + value.pow(2).mean()
        loss.backward()
        marks.append(
            ([max(stamps.get(i, start) for i in bucket) - start for bucket in buckets], time.perf_counter() - start)
        )
        if cohort is not None:
            cohort.reduce_gradients([p.grad if p.grad is not None else torch.zeros_like(p) for p in params])
        if max_norm > 0:  # the learner clips before every step
            torch.nn.utils.clip_grad_norm_(params, max_norm)
        optimizer.step()

    median = _median_s(step, options.repeats, options.warmup)
    timed = marks[options.warmup :]
    profile = BackwardProfile(
        bucket_bytes=[sum(params[i].numel() * FLOAT_BYTES for i in bucket) for bucket in buckets],
        ready_s=[statistics.median(ready[b] for ready, _ in timed) for b in range(len(buckets))],
        backward_end_s=statistics.median(end for _, end in timed),
    )
    return median, profile


def _time_allreduce(numel: int, options: Options) -> float:
    """Median seconds of ``all_reduce`` on ``numel`` float32s; the barrier before each call is not timed, so
    that a rank that arrives first does not count the other's lateness as communication."""
    import torch
    import torch.distributed as dist

    tensor = torch.ones(numel, dtype=torch.float32)
    times = []
    for repeat in range(options.warmup + options.repeats):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(tensor)
        if repeat >= options.warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def _loopback_interface() -> str:
    """The loopback interface's name (``lo`` on Linux, ``lo0`` on macOS), so gloo stays on 127.0.0.1."""
    names = [name for _, name in socket.if_nameindex() if name.startswith("lo")]
    return names[0] if names else "lo"


def _rank_main(rank: int, world: int, port: int, jobs: list[Job], options: Options, out_path: str) -> None:
    """One rank: compute, then all-reduce per job, then (2+ ranks) the size sweep; rank 0 writes everyone's medians."""
    if die_with_parent() and orphaned():  # else it would wait in a collective until the group's timeout
        sys.exit(1)
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)  # one core per rank: the ranks stand for nodes, not for threads
    os.environ["GLOO_SOCKET_IFNAME"] = _loopback_interface()
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=options.timeout_s),
    )
    try:
        from fastrl.ranks.cohort import Cohort

        step_s, allreduce_s, overlapped_s, profiles = [], [], [], []
        for job in jobs:
            dist.barrier()  # the ranks compute at the same time, as nodes would
            step, profile = _time_step(job, options)
            step_s.append(step)
            profiles.append(asdict(profile))
            allreduce_s.append(_time_allreduce(job.numel, options))
            dist.barrier()
            cohort = Cohort(rank, world, torch.device("cpu"), job.config.dist.bucket_mb)
            overlapped_s.append(_time_step(job, options, cohort)[0])
        sweep_s = [_time_allreduce(size // FLOAT_BYTES, options) for size in options.sweep_bytes] if world > 1 else []
        gathered: list = [None] * world
        dist.all_gather_object(gathered, asdict(RankTimes(step_s, allreduce_s, sweep_s, overlapped_s, profiles)))
        if rank == 0:  # whole or not at all: the parent may read it while another rank tears down
            Path(out_path + ".part").write_text(json.dumps(gathered))
            os.replace(out_path + ".part", out_path)
        dist.barrier()  # nobody tears the group down while another rank still uses it
    finally:
        dist.destroy_process_group()


# --- the parent: spawn, watch, reap -------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_group(world: int, jobs: list[Job], options: Options) -> list[RankTimes]:
    """Spawn ``world`` ranks and return their medians; any failure or the time limit stops every rank."""
    context = multiprocessing.get_context("spawn")  # fresh interpreters: no forked torch thread pools
    with tempfile.TemporaryDirectory(prefix="fastrl_multinode_") as workdir:
        out_path = os.path.join(workdir, "ranks.json")
        port = free_port()
        processes = [
            context.Process(
                target=_rank_main,
                args=(rank, world, port, jobs, options, out_path),
                name=f"fastrl-multinode-rank{rank}",
                daemon=True,
            )
            for rank in range(world)
        ]
        try:
            for process in processes:
                process.start()
            try:
                _watch(processes, time.monotonic() + options.timeout_s)
            except RankFailed as failure:
                if not _delivered(out_path, processes):
                    raise
                logger.warning("multinode bench: %s after every rank's results were in; they are kept", failure)
            gathered = json.loads(Path(out_path).read_text())
        finally:
            stop_processes(processes, kill_wait_s=5.0)
    return [RankTimes(**entry) for entry in gathered]


def _delivered(out_path: str, processes: list, grace_s: float = 5.0) -> bool:
    """Whether the ranks' results were written whole although a rank failed: gloo can abort a rank
    ("terminate called without an active exception") while the group is torn down after the last
    collective. Waits up to ``grace_s`` for the other ranks to finish."""
    deadline = time.monotonic() + grace_s
    while any(p.is_alive() for p in processes) and time.monotonic() < deadline:
        time.sleep(0.05)
    return os.path.exists(out_path)


def _watch(processes: list, deadline: float) -> None:
    """Until every rank exits 0; a rank that fails would leave the others blocked in a collective."""
    running = list(processes)
    while running:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise BenchFailed(f"{len(processes)} ranks ran past --timeout-s; stopped")
        for sentinel in wait([p.sentinel for p in running], timeout=remaining):
            process = next(p for p in running if p.sentinel == sentinel)
            process.join()
            if process.exitcode != 0:
                raise RankFailed(f"{process.name} exited with code {process.exitcode} (its traceback is above)")
            running.remove(process)
