"""What a gradient all-reduce costs an update: 1 and 2 ranks on localhost (gloo), projected to 8 and 64 nodes.

    fastrl bench multinode [--configs A.toml B.toml] [--repeats 30] [--sizes 4K 16K ... 16M]
                           [--nodes 8 64] [--alpha-us US] [--bandwidth-gbps GBPS]

Measured, in 1 and then 2 processes (ranks) of ``torch.distributed`` with the gloo backend on
127.0.0.1, one torch thread per rank (2 ranks on a 2-core machine: a core each):

- **the update's compute**, per config: the engine's own policy (``build_policy`` on the config's
  env) with the config's optimizer, one optimizer step = forward + backward of a stand-in loss
  (logits' logsumexp + value², the cost of A2C's/PPO's loss without their bookkeeping) on a
  batch of the learner's size, gradient clipping and ``optimizer.step()``. A2C-like configs take
  one step of ``engine.envs x engine.rollout`` rows per update; PPO takes ``epochs x minibatches``
  steps of a minibatch each, and each step's gradient is what a multi-node learner all-reduces,
  so both are reported: per optimizer step and per update (steps x the per-step median).
- **the all-reduce**: ``dist.all_reduce`` of one flat float32 tensor of ``count_parameters``
  elements (the model's state: its gradients plus the few normaliser statistics that must be
  kept equal across nodes too), each call after a barrier so that it times the collective, not
  one rank waiting for the other's compute. With 1 rank there is nothing to exchange: what gloo's
  call costs then is reported as measured, the baseline.

Every figure is the median of ``--repeats`` timed calls after ``--warmup`` untimed ones, taken
per rank; across ranks the slowest rank's median is reported (an update waits for it). The
all-reduce's share of an update is ``allreduce / (compute + allreduce)``: no overlap of
communication with backward (one all-reduce after backward).

**The learner's overlap** (``fastrl/ranks/gradient_buckets.py``): the learner all-reduces its
gradients in buckets of ``dist.bucket_mb``, each started as soon as backward has made it. Measured:
a step with that all-reduce (``step_overlapped_ms``; ``overlapped_share`` = what it adds over the
compute, as a share of the step). Projected: the 1-rank step's profile (when each bucket is ready)
with each bucket's all-reduce at the α-β cost, one at a time in order; what outlasts backward is
``overlapped_exposed_ms`` and ``overlapped_share`` = exposed / (compute + exposed).

**Projection model.** The α-β (latency-bandwidth) cost of a ring all-reduce of n bytes on p
nodes: ``T(p, n) = 2(p-1)·α + 2(p-1)/p · n/β`` (reduce-scatter then all-gather: 2(p-1) steps, each
one latency α plus an n/p-byte chunk at bandwidth β). At p = 2 it is ``T = 2α + n/β``; α and β are
fitted on a sweep of message sizes (``--sizes``) at 2 ranks, by least squares on the relative
error (weights 1/T) so that the latency-bound small messages count as much as the
bandwidth-bound large ones. The fit is of **localhost loopback**, so it projects a network that
behaves like loopback (no wire, a memory copy through the kernel); on a real network α and β
differ (and the compute does not shrink), so ``--alpha-us`` and ``--bandwidth-gbps`` project with
your network's numbers instead of the fitted ones. The projected share assumes each node does
the compute measured with 1 rank here (the same batch per node: data parallelism that adds
nodes, not one that splits a batch).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from fastrl.bench.alpha_beta import MODEL, exposed_allreduce_s, fit_alpha_beta, ring_allreduce_s
from fastrl.bench.rank_group import (
    FLOAT_BYTES,
    BackwardProfile,
    BenchFailed,
    Job,
    Options,
    RankTimes,
    run_group,
)
from fastrl.config import ConfigError

logger = logging.getLogger(__name__)

DEFAULT_CONFIGS = ("configs/cartpole_sync.toml", "configs/pong_sync.toml")
DEFAULT_SIZES = ("4K", "16K", "64K", "256K", "1M", "4M", "16M")
DEFAULT_NODES = (8, 64)
RANK_COUNTS = (1, 2)  # the baseline and the smallest group: what one localhost can measure of a cluster


@dataclass(frozen=True)
class RankResult:
    """A config at one rank count (milliseconds; the slowest rank's medians)."""

    ranks: int
    step_compute_ms: float
    step_allreduce_ms: float
    update_compute_ms: float
    update_allreduce_ms: float
    share: float  # allreduce / (compute + allreduce); the same per step and per update
    step_overlapped_ms: float  # measured: a step whose all-reduce starts in buckets during backward (the learner's)
    overlapped_share: float  # (step_overlapped - compute) / step_overlapped: what the overlap leaves exposed


@dataclass(frozen=True)
class Projection:
    nodes: int
    step_allreduce_ms: float
    update_allreduce_ms: float
    update_ms: float  # 1-rank compute + projected all-reduce, per update
    share: float
    overlapped_exposed_ms: float  # per step: what of the bucketed all-reduce outlasts backward (projected)
    overlapped_share: float  # exposed / (compute + exposed)


@dataclass(frozen=True)
class SweepPoint:
    bytes: int
    measured_ms: float
    model_ms: float


@dataclass(frozen=True)
class AlphaBeta:
    model: str
    fitted_on: str
    alpha_us: float  # what the projections use
    bandwidth_gbps: float  # gigabits per second, what the projections use
    source: str  # "fitted", "given" or "alpha given, bandwidth fitted" ...
    fitted_alpha_us: float
    fitted_bandwidth_gbps: float
    note: str
    sweep: list[SweepPoint] = field(default_factory=list)


@dataclass(frozen=True)
class ModelResult:
    config: str
    model: str
    algo: str
    parameters: int
    trainable_parameters: int
    allreduce_bytes: int
    step_rows: int
    steps_per_update: int
    ranks: dict[str, RankResult]
    model_at_2_ranks_ms: float  # the fitted α-β model at this size: how well it fits the 2-rank measurement
    projection: dict[str, Projection]


# --- inputs -------------------------------------------------------------------------------------


def parse_size(text: str) -> int:
    """Bytes from ``4096``, ``4K``/``4KiB``, ``16M``/``16MiB`` (powers of 1024); a multiple of 4 (float32s)."""
    units = {"": 1, "K": 1024, "KIB": 1024, "M": 1024**2, "MIB": 1024**2, "G": 1024**3, "GIB": 1024**3}
    raw = text.strip().upper()
    digits = raw.rstrip("KMGIB")
    try:
        value = int(float(digits) * units[raw[len(digits) :]])
    except (ValueError, KeyError):
        raise ConfigError(f"--sizes {text!r}: expected bytes such as 4096, 4K or 16M") from None
    if value < FLOAT_BYTES or value % FLOAT_BYTES:
        raise ConfigError(f"--sizes {text!r}: expected a multiple of {FLOAT_BYTES} bytes (float32 elements), >= 4")
    return value


def build_job(path: str) -> Job:
    """The config's model sizes and batch; raises ConfigError for a bad config (before any process starts)."""
    from fastrl.algos.registry import load_algorithm
    from fastrl.api import resolve_config
    from fastrl.buffers.params import count_parameters
    from fastrl.envs import probe_env
    from fastrl.models.policy import build_policy

    config = resolve_config(path)  # a file, or a shipped config by name (configs/pong_sync.toml anywhere)
    env_info = probe_env(config.env)
    model = build_policy(env_info, config, device="cpu")
    rows = config.engine.envs * config.engine.rollout
    epochs = load_algorithm(config.algo.name).epochs  # PPO, PQN: several optimizer steps per update
    return Job(
        config_path=path,
        config=config,
        env_info=env_info,
        model=type(model).__name__,
        algo=config.algo.name,
        numel=count_parameters(model),
        trainable=sum(p.numel() for p in model.parameters() if p.requires_grad),
        step_rows=math.ceil(rows / config.algo.minibatches) if epochs else rows,
        steps_per_update=config.algo.epochs * config.algo.minibatches if epochs else 1,
    )


def check_options(
    repeats: int,
    warmup: int,
    sizes: list[int],
    nodes: list[int],
    alpha_us: float | None,
    bandwidth_gbps: float | None,
    timeout_s: float,
) -> None:
    if repeats < 1:
        raise ConfigError(f"--repeats {repeats}: expected an int >= 1")
    if warmup < 0:
        raise ConfigError(f"--warmup {warmup}: expected an int >= 0")
    if len(set(sizes)) < 2:
        raise ConfigError(f"--sizes: the alpha-beta fit needs at least 2 different sizes, got {sizes}")
    if any(p < 2 for p in nodes):
        raise ConfigError(f"--nodes {nodes}: expected node counts >= 2")
    if alpha_us is not None and not (math.isfinite(alpha_us) and alpha_us >= 0):
        raise ConfigError(f"--alpha-us {alpha_us!r}: expected microseconds >= 0")
    if bandwidth_gbps is not None and not (math.isfinite(bandwidth_gbps) and bandwidth_gbps > 0):
        raise ConfigError(f"--bandwidth-gbps {bandwidth_gbps!r}: expected gigabits per second > 0")
    if not timeout_s > 0:
        raise ConfigError(f"--timeout-s {timeout_s!r}: expected seconds > 0")


# --- putting it together ------------------------------------------------------------------------


def _slowest(per_rank: list[RankTimes], attribute: str, index: int) -> float:
    return max(getattr(times, attribute)[index] for times in per_rank)


def _rank_result(job: Job, ranks: int, per_rank: list[RankTimes], index: int) -> RankResult:
    step = _slowest(per_rank, "step_s", index)
    allreduce = _slowest(per_rank, "allreduce_s", index)
    overlapped = _slowest(per_rank, "overlapped_s", index)
    return RankResult(
        ranks=ranks,
        step_compute_ms=_ms(step),
        step_allreduce_ms=_ms(allreduce),
        update_compute_ms=_ms(step * job.steps_per_update),
        update_allreduce_ms=_ms(allreduce * job.steps_per_update),
        share=round(allreduce / (step + allreduce), 4),
        step_overlapped_ms=_ms(overlapped),
        overlapped_share=round(max(overlapped - step, 0.0) / overlapped, 4),
    )


def _projection(
    job: Job, nodes: int, step_s: float, profile: BackwardProfile, alpha_s: float, beta: float
) -> Projection:
    allreduce = ring_allreduce_s(nodes, job.numel * FLOAT_BYTES, alpha_s, beta)
    exposed = exposed_allreduce_s(profile, nodes, alpha_s, beta)
    return Projection(
        nodes=nodes,
        step_allreduce_ms=_ms(allreduce),
        update_allreduce_ms=_ms(allreduce * job.steps_per_update),
        update_ms=_ms((step_s + allreduce) * job.steps_per_update),
        share=round(allreduce / (step_s + allreduce), 4),
        overlapped_exposed_ms=_ms(exposed),
        overlapped_share=round(exposed / (step_s + exposed), 4),
    )


def _ms(seconds: float) -> float:
    return round(seconds * 1e3, 4)


def _alpha_beta(
    sizes: list[int],
    sweep_s: list[float],
    fitted_alpha: float,
    fitted_beta: float,
    alpha_us: float | None,
    bandwidth_gbps: float | None,
) -> tuple[AlphaBeta, float, float]:
    """The model's record and the (α s, β bytes/s) the projections use: the fitted ones unless given."""
    alpha = fitted_alpha if alpha_us is None else alpha_us * 1e-6
    beta = fitted_beta if bandwidth_gbps is None else bandwidth_gbps * 1e9 / 8
    sources = {
        (True, True): "fitted",
        (False, False): "given (--alpha-us, --bandwidth-gbps)",
        (False, True): "alpha given (--alpha-us), bandwidth fitted",
        (True, False): "alpha fitted, bandwidth given (--bandwidth-gbps)",
    }
    source = sources[(alpha_us is None, bandwidth_gbps is None)]
    sweep = [
        SweepPoint(size, _ms(t), _ms(ring_allreduce_s(2, size, fitted_alpha, fitted_beta)))
        for size, t in zip(sizes, sweep_s)
    ]
    record = AlphaBeta(
        model=MODEL,
        fitted_on="2 ranks, gloo, localhost loopback (127.0.0.1), a sweep of message sizes",
        alpha_us=round(alpha * 1e6, 3),
        bandwidth_gbps=round(beta * 8 / 1e9, 3),
        source=source,
        fitted_alpha_us=round(fitted_alpha * 1e6, 3),
        fitted_bandwidth_gbps=round(fitted_beta * 8 / 1e9, 3),
        note="fitted on loopback, so the fitted numbers project a network like loopback (no wire); on a real "
        "network alpha and beta differ: pass --alpha-us and --bandwidth-gbps (gigabits/s) to project with "
        "its numbers. Projected compute per node = the 1-rank compute measured here.",
        sweep=sweep,
    )
    return record, alpha, beta


def measure(
    configs: Sequence[str] = DEFAULT_CONFIGS,
    repeats: int = 30,
    warmup: int = 5,
    sizes: list[int] | None = None,
    nodes: Sequence[int] = DEFAULT_NODES,
    alpha_us: float | None = None,
    bandwidth_gbps: float | None = None,
    timeout_s: float = 900.0,
) -> dict:
    """The bench's result as a JSON-ready dict (ConfigError for bad input, BenchFailed if a rank fails)."""
    sizes = sorted(set(sizes if sizes is not None else map(parse_size, DEFAULT_SIZES)))
    check_options(repeats, warmup, sizes, list(nodes), alpha_us, bandwidth_gbps, timeout_s)
    jobs = [build_job(path) for path in configs]
    options = Options(repeats, warmup, tuple(sizes), timeout_s)
    groups = {}
    for world in RANK_COUNTS:
        logger.info("multinode bench: %d rank(s), %d config(s), %d repeats", world, len(jobs), repeats)
        groups[world] = run_group(world, jobs, options)
    sweep_s = [max(times.sweep_s[i] for times in groups[2]) for i in range(len(sizes))]
    fitted_alpha, fitted_beta = fit_alpha_beta(sizes, sweep_s)
    alpha_beta, alpha, beta = _alpha_beta(sizes, sweep_s, fitted_alpha, fitted_beta, alpha_us, bandwidth_gbps)
    models = []
    for index, job in enumerate(jobs):
        step_1 = _slowest(groups[1], "step_s", index)
        models.append(
            ModelResult(
                config=job.config_path,
                model=job.model,
                algo=job.algo,
                parameters=job.numel,
                trainable_parameters=job.trainable,
                allreduce_bytes=job.numel * FLOAT_BYTES,
                step_rows=job.step_rows,
                steps_per_update=job.steps_per_update,
                ranks={str(world): _rank_result(job, world, groups[world], index) for world in RANK_COUNTS},
                model_at_2_ranks_ms=_ms(ring_allreduce_s(2, job.numel * FLOAT_BYTES, fitted_alpha, fitted_beta)),
                projection={
                    str(p): _projection(job, p, step_1, BackwardProfile(**groups[1][0].profiles[index]), alpha, beta)
                    for p in nodes
                },
            )
        )
    return {
        "bench": "multinode",
        "backend": "gloo",
        "host": "localhost (127.0.0.1 loopback), one machine",
        "cpu_count": os.cpu_count(),
        "torch_threads_per_rank": 1,
        "torch": _torch_version(),
        "repeats": repeats,
        "warmup": warmup,
        "timing": "median of repeats per rank, the slowest rank's; update = steps_per_update x the step's median; "
        "share = allreduce / (compute + allreduce), no overlap; overlapped_share: the learner's "
        "all-reduce in buckets started during backward, measured (ranks) and projected (projection: "
        "each bucket's all-reduce from when it is ready, one at a time, minus backward's end)",
        "models": [asdict(result) for result in models],
        "alpha_beta": asdict(alpha_beta),
    }


def _torch_version() -> str:
    import torch

    return torch.__version__


# --- command line -------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--configs",
        nargs="+",
        default=list(DEFAULT_CONFIGS),
        metavar="CONFIG",
        help="configs whose model and batch are timed (default: the MLP of cartpole_sync.toml "
        "and the Nature CNN of pong_sync.toml)",
    )
    parser.add_argument("--repeats", type=int, default=30, help="timed calls per median (default 30)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls first (default 5)")
    parser.add_argument(
        "--sizes",
        nargs="+",
        default=list(DEFAULT_SIZES),
        metavar="BYTES",
        help="message sizes of the 2-rank sweep the alpha-beta model is fitted on "
        "(4096, 4K, 16M: powers of 1024; default 4K..16M)",
    )
    parser.add_argument(
        "--nodes", type=int, nargs="+", default=list(DEFAULT_NODES), help="node counts to project to (default 8 64)"
    )
    parser.add_argument(
        "--alpha-us",
        type=float,
        help="project with this latency per ring step (microseconds) instead of the one fitted on loopback",
    )
    parser.add_argument(
        "--bandwidth-gbps",
        type=float,
        help="project with this bandwidth (gigabits/s) instead of the one fitted on loopback",
    )
    parser.add_argument(
        "--timeout-s", type=float, default=900.0, help="time limit of each group of ranks (default 900)"
    )


def run(args: argparse.Namespace) -> int:
    """The CLI's body: JSON on stdout; exit 2 for bad input, 1 if a rank failed."""
    try:
        result = measure(
            args.configs,
            args.repeats,
            args.warmup,
            [parse_size(s) for s in args.sizes],
            args.nodes,
            args.alpha_us,
            args.bandwidth_gbps,
            args.timeout_s,
        )
    except ConfigError as exc:
        print(f"fastrl bench multinode: {exc}", file=sys.stderr)
        return 2
    except BenchFailed as exc:
        print(f"fastrl bench multinode: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result), flush=True)
    return 0
