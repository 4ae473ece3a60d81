"""``engine.executors / actors / inline_actors / learner_threads / micro_batch = "auto"``: the process layout
chosen for the machine.

Resolved once, in the main process, before anything starts (``plan_run``), for a config whose learners and
actors ``fastrl.devices`` placed already (``resolve_devices``); the run directory's ``config.toml`` then holds
the numbers, so the run repeats anywhere. The rules are those the docs/tuning.md measured (2 cores, Pong hts,
16 envs):

- **Actors on the CPU** (no GPU, or ``engine.actor_device = "cpu"``): one executor per core given to
  stepping, each running its envs' forward inline (``actors = executors``): 2 executors with inline
  actors ran 2.86K frames/s against 2.75K for 2 executors + 1 actor process and 2.67K for 1 + 1. Up to
  ``SHARED_LEARNER_CORES`` cores a CPU learner shares the executors' cores, with a thread on each
  (2 learner threads ran the Pong PPO job 1.8x faster than 1 on 2 cores: in sync the executors
  wait while it learns); on bigger machines each learner's threads (a quarter of the cores, 2 to
  ``MAX_LEARNER_THREADS``; 1 for a CUDA learner, which only feeds the GPU) get cores of their own
  (not measured: reasoning).
- **Actors on CUDA** (``engine.actor_device`` "cuda", or "auto" following a CUDA ``engine.device``): the
  CNN's forward leaves the executors' cores: 1 actor process on the GPU (2 from ``MANY_CORES`` cores, so
  one batch's transfer overlaps the other's forward), no inline actors, executors on the cores left after
  the actors and learners (``bench/device_check.sh`` measures these choices on a GPU machine).

In both, never more executors than envs, never more than ``MAX_EXECUTORS``, and no executor that
would not shorten the busiest one's share: a barrier waits for the executor with the most envs,
so 16 envs on 15 executors step no faster than on 8 (two envs each), and the 7 spare cores are
left to the learner and the OS. Keys given explicitly are kept; only the "auto" ones are chosen,
consistently with them (``inline_actors = true`` makes ``actors = executors`` whichever is given).
``engine.serial`` runs everything in one process: "auto" gives 1 executor and 1 actor there.

The micro-batch (``engine.micro_batch = "auto"``) depends on where the actors compute and on the model,
never on the layout, so a run's bits do not depend on the process counts: 8 rows for the built-in image
models on a CPU, 16 for the others (the sizes measured batch-invariant on every CPU, models/microbatch.py),
and on a GPU one forward for all of a learner's envs (rounded up to a multiple of 8): a GPU's forward
of 8 rows costs about what one of a few hundred does.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from dataclasses import dataclass

from fastrl.config import AUTO, Config, EngineConfig, validate

log = logging.getLogger(__name__)

SHARED_LEARNER_CORES = 4  # up to this many cores the learner shares them with the executors (measured on 2)
MANY_CORES = 16  # from this many cores a GPU gets 2 actor processes
MAX_LEARNER_THREADS = 8  # "auto" learner threads on big machines (not measured: reasoning)
MAX_EXECUTORS = 32  # each executor is a process (with inline actors, one holding torch): start-up and memory
CPU_IMAGE_MICRO_BATCH = 8  # the CNNs' rows are batch-invariant at 8 on every CPU measured (models/microbatch.py)
CPU_MICRO_BATCH = 16  # the MLP's need 16 on AVX-512 Xeons
MAX_GPU_MICRO_BATCH = 1024  # a Nature CNN forward of 1024 Atari frames: ~30 MB of input, a few ms on a GPU


@dataclass(frozen=True)
class Machine:
    cores: int  # the CPUs this process may run on
    cuda: bool  # torch sees a CUDA device

    @classmethod
    def detect(cls) -> Machine:
        import torch

        try:
            cores = len(os.sched_getaffinity(0))  # a container's or taskset's share, not the host's count
        except AttributeError:  # not Linux
            cores = os.cpu_count() or 1
        return cls(max(1, cores), bool(torch.cuda.is_available()))


@dataclass(frozen=True)
class Layout:
    executors: int
    actors: int
    inline_actors: bool

    def describe(self) -> str:
        actors = "inline actors" if self.inline_actors else f"{self.actors} actor process(es)"
        return f"{self.executors} executor(s), {actors}"


def is_resolved(engine: EngineConfig) -> bool:
    keys = (engine.executors, engine.actors, engine.inline_actors, engine.learner_threads, engine.micro_batch)
    return AUTO not in keys


def choose_learner_threads(engine: EngineConfig, machine: Machine, image_model: bool = True) -> int:
    """``engine.learner_threads``: as given, or chosen for ``machine`` (see the field's doc) and the devices
    ``engine`` placed; ``image_model``: the run's policy is a built-in CNN (an MLP's step is too small to split:
    2 threads ran Hopper 5x slower)."""
    if not isinstance(engine.learner_threads, str):  # given: a number, not "auto"
        return engine.learner_threads
    if not image_model or engine.device == "cuda":
        return 1  # too little to split, or the GPU computes and a thread feeds it
    if machine.cores <= SHARED_LEARNER_CORES:  # measured on 2 cores: sharing the executors' cores pays
        return max(1, machine.cores // engine.learners)
    # not measured: a CNN step scales sublinearly past a few threads, and the executors need the rest
    return max(2, min(MAX_LEARNER_THREADS, machine.cores // (4 * engine.learners)))


def choose_layout(engine: EngineConfig, machine: Machine, agents: int = 1) -> Layout:
    """The layout for ``engine`` (its devices placed) on ``machine``: explicit keys kept, "auto" ones chosen by the
    rules above. ``agents``: rows per env (a multi-agent env's rows stay in one executor, so there are envs / agents
    to share)."""
    units = max(1, engine.envs // agents)
    if engine.serial:  # "auto" (the only string these keys take) gives 1 executor and 1 actor, not inline
        return Layout(
            engine.executors if not isinstance(engine.executors, str) else 1,
            engine.actors if not isinstance(engine.actors, str) else 1,
            engine.inline_actors if not isinstance(engine.inline_actors, str) else False,
        )
    gpu = engine.actor_device == "cuda"  # the actor processes drive a GPU
    inline = engine.inline_actors
    if isinstance(inline, str):  # "auto": an explicit actors count asks for actor processes, as it did before "auto"
        inline = not gpu and isinstance(engine.actors, str)
    if inline:
        executors = engine.executors if not isinstance(engine.executors, str) else engine.actors
        if isinstance(executors, str):  # both "auto"
            executors = _balanced(machine.cores - _learner_cores(engine, machine), units)
        return Layout(executors, engine.actors if not isinstance(engine.actors, str) else executors, True)
    actors = engine.actors
    if isinstance(actors, str):  # "auto"
        actors = min(2 if gpu and machine.cores >= MANY_CORES else 1, engine.envs)
    executors = engine.executors
    if isinstance(executors, str):  # "auto"
        # actor processes on a GPU each drive it from a core of their own; on a CPU they share like the learner
        reserved = (
            actors + engine.learners
            if gpu
            else _learner_cores(engine, machine)
            + (0 if machine.cores <= SHARED_LEARNER_CORES else actors * engine.actor_threads)
        )
        executors = _balanced(machine.cores - reserved, units)
    return Layout(executors, actors, False)


def _learner_cores(engine: EngineConfig, machine: Machine) -> int:
    """Cores kept for the learners' threads: none on a small machine, where sharing measured best."""
    if machine.cores <= SHARED_LEARNER_CORES:
        return 0
    threads = (
        engine.learner_threads
        if not isinstance(engine.learner_threads, str)
        else choose_learner_threads(engine, machine)
    )
    return engine.learners * threads


def _balanced(cores: int, envs: int) -> int:
    """The fewest executors (at most ``cores``, envs and MAX_EXECUTORS) whose busiest one steps as few envs."""
    most = max(1, min(cores, envs, MAX_EXECUTORS))
    busiest = math.ceil(envs / most)
    return math.ceil(envs / busiest)


def choose_micro_batch(engine: EngineConfig, machine: Machine, image_model: bool = True) -> int:
    """``engine.micro_batch``: as given, or chosen for where ``engine`` placed the actors and the model (see the
    module's doc); ``image_model``: the run's policy is a built-in image model."""
    if not isinstance(engine.micro_batch, str):  # given: a number, not "auto"
        return engine.micro_batch
    if engine.actor_device == "cuda":
        rows = -(-engine.envs // engine.learners)  # a learner's envs: the most one lockstep batch holds
        return min(MAX_GPU_MICRO_BATCH, -(-rows // 8) * 8)
    return CPU_IMAGE_MICRO_BATCH if image_model else CPU_MICRO_BATCH


def resolve_layout(
    config: Config,
    machine: Machine | None = None,
    image_model: bool = True,
    agents: int = 1,
    split_learner: bool | None = None,
) -> Config:
    """``config``, its devices placed (``fastrl.devices.resolve_devices``), with its "auto" layout keys chosen for
    ``machine`` (default: this one), checked again; ``image_model``: whether the run's policy is a built-in CNN
    (``choose_micro_batch``, and ``choose_learner_threads`` unless ``split_learner`` says whether its step is
    worth threads: any convolutional model's is); ``agents``: the env's agents, each a row (``choose_layout``).

    A config without "auto" keys comes back unchanged (the same object).
    """
    engine = config.engine
    if AUTO in (engine.device, engine.actor_device):
        raise ValueError("resolve_layout: the devices are placed first (fastrl.devices.resolve_devices)")
    if is_resolved(engine):
        return config
    machine = machine or Machine.detect()
    layout = choose_layout(engine, machine, agents)
    splits = image_model if split_learner is None else split_learner
    engine = dataclasses.replace(
        engine,
        executors=layout.executors,
        actors=layout.actors,
        inline_actors=layout.inline_actors,
        learner_threads=choose_learner_threads(engine, machine, splits),
        micro_batch=choose_micro_batch(engine, machine, image_model),
    )
    resolved = dataclasses.replace(config, engine=engine)
    validate(resolved)  # the cross-key checks (executors <= envs, inline needs actors = executors) on the numbers
    log.info(
        "process layout (engine.* = 'auto' on %d cores, %s): %s, %d learner thread(s), micro-batches of %d rows; "
        "learners on %s, actors on %s",
        machine.cores,
        "CUDA" if machine.cuda else "no CUDA",
        layout.describe(),
        engine.learner_threads,
        engine.micro_batch,
        engine.device,
        engine.actor_device,
    )
    return resolved
