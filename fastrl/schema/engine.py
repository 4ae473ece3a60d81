"""The sections of how a run is carried out: its processes and buffers (``engine``), its seed, budget and
logging (``run``), its timeouts (``reliability``) and its ranks (``dist``).
Keys that may be ``"auto"`` are resolved for the machine when a run starts (``fastrl.process.auto_layout``);
``resolved_int`` and ``resolved_bool`` read them after that."""

from __future__ import annotations

from dataclasses import dataclass

from fastrl.errors import ConfigError
from fastrl.registry import registered_names, registered_summaries
from fastrl.tables import AUTO
from fastrl.tables import documented_field as _f

# the int queues between processes hold 2**18 messages (4 MiB of 16-byte records, measured); an env may have two
# rollouts' "done" in flight (run-ahead), so 2**17 envs fill one at the worst (fastrl.sampling.channels)
QUEUE_MESSAGES = 1 << 18
MAX_ENVS = QUEUE_MESSAGES // 2


def resolved_int(value: int | str, key: str) -> int:
    """A key that may be ``"auto"`` in a config, read where the run's layout has resolved it
    (``fastrl.process.auto_layout``): its number, or an error naming the key if it was never resolved."""
    if isinstance(value, str):
        raise ConfigError(f"{key} = {value!r} was not resolved before it was used (fastrl.process.auto_layout)")
    return value


def resolved_bool(value: bool | str, key: str) -> bool:
    """As ``resolved_int``, for a true/false key that may be ``"auto"``."""
    if isinstance(value, str):
        raise ConfigError(f"{key} = {value!r} was not resolved before it was used (fastrl.process.auto_layout)")
    return value


@dataclass
class EngineConfig:
    mode: str = _f(
        "sync",
        lambda: f"how rollout and learning interleave: {registered_summaries('mode')}",
        choices=lambda: registered_names("mode"),  # fastrl.modes.MODES: sync, hts, async and the layers' modes
    )
    envs: int = _f(
        16,
        "total number of environments (at most 131072: every env may have two rollouts' messages in a queue "
        "between processes, which holds 262144; fastrl.sampling.channels)",
        min=1,
        max=MAX_ENVS,
    )
    executors: int | str = _f(
        AUTO,
        "processes that step the envs (envs are split evenly); 'auto': from the cores and GPU present "
        "(docs/tuning.md), resolved before the run starts and written to its config.toml",
        min=1,
        auto=True,
    )
    actors: int | str = _f(
        AUTO,
        "processes that run the policy forward; 'auto': one per executor with inline actors (CPU), "
        "else 1 on a GPU (2 with 16 or more cores)",
        min=1,
        auto=True,
    )
    learners: int = _f(
        1,
        "learner processes: 1, or, in a mode of many learners, their number (each owns engine.envs / learners "
        "envs; per rank under torchrun)",
        min=1,
        max=256,
    )
    rollout: int = _f(64, "steps per env per rollout (T); in hts also the barrier interval alpha", min=1, max=1 << 20)
    inline_actors: bool | str = _f(
        AUTO,
        "run each executor's policy forward inside the executor (engine.actors must equal engine.executors); "
        "no queue round trip per step: best on CPU-only machines with few cores; 'auto': true without a GPU",
        auto=True,
    )
    env_groups: int = _f(
        2, "an executor announces its envs in this many groups, so stepping one overlaps inference of another", min=1
    )
    reset_ahead: bool | str = _f(
        AUTO,
        "an executor about to wait resets a spare instance of one of its envs with that env's next seed, which takes "
        "the env's place when its episode ends: slow resets (Crafter's world) move into idle time; results are the "
        "same bits either way; only envs whose reset seed alone fixes the episode (resets_from_seed); 'auto': where "
        "an executor's first resets took 5 ms or more and its waits leave its core idle (no CPU learner beside "
        "the executors: a sampling-only run, a CUDA learner, or more cores than executors, actors and learner "
        "threads)",
        auto=True,
    )
    micro_batch: int | str = _f(
        AUTO,
        "actor forward micro-batch: every forward the actors run has exactly this many rows (the last chunk "
        "padded), which keeps each row's output batch-invariant (models/microbatch.py); 'auto': on the CPU 8 for "
        "the built-in image models and 16 for others (8 held for the CNNs on every CPU measured, 16 for the MLP), "
        "on a GPU a learner's envs rounded up to a multiple of 8 (at most 1024), one forward per batch; never the "
        "process layout's, so runs stay bit-identical across layouts",
        min=8,
        max=1 << 16,
        multiple_of=8,
        auto=True,
    )
    core_rotation_s: float = _f(
        0.0,
        "Linux: every this many seconds each executor moves to the next CPU it may use, so rollout barriers "
        "wait for the average core rather than the slowest (cores differ: hybrid CPUs, shared VMs); 0 = off",
        min=0.0,
    )
    serial: bool = _f(False, "run executors, actors and learner in this one process (debugging, profiling)")
    keep_freed_memory: bool = _f(
        True,
        "Linux with glibc: worker processes keep the memory they free for their next allocations instead of "
        "handing it back to the OS, so a training step does not fault its activations in afresh (the default "
        "job's learner took ~16,700 page faults a second; fastrl/process/malloc.py); never changes a run's bits",
    )
    start_method: str = _f(
        "forkserver",
        "how worker processes start: 'forkserver', forked from a server that imported torch once and serves "
        "every run of the process (where the OS has one; else spawned), or 'spawn', each a fresh interpreter "
        "importing torch (~1.6 s of CPU a worker; docs/architecture.md#starting-workers)",
        choices=("forkserver", "spawn"),
    )
    actor_threads: int = _f(1, "torch threads per actor process", min=1, max=1024)
    learner_threads: int | str = _f(
        AUTO,
        "torch threads in each learner; 'auto', for the built-in CNNs on the CPU: every core on machines of up "
        "to 4 cores, shared with the executors, which wait while a CPU learner learns (2 threads ran Pong PPO 1.8x "
        "faster than 1 on 2 cores), a quarter of the cores per learner (2-8) above that; 1 for other models (2 "
        "threads ran Hopper's MLP 5x slower) and with CUDA",
        min=1,
        max=1024,
        auto=True,
    )
    device: str = _f(
        AUTO,
        "where the learners compute: 'cpu', 'cuda' (under torchrun the GPU of the rank's LOCAL_RANK), or 'auto': "
        "CUDA where torch sees a GPU, else the CPU; resolved before the run starts and written to its config.toml",
        choices=("cpu", "cuda", AUTO),
    )
    actor_device: str = _f(
        AUTO,
        "where the actor processes run the policy forward: 'cpu', 'cuda', or 'auto': engine.device's, except "
        "with inline actors, which run inside the executors on the CPU (executors never hold a CUDA context); "
        "'cpu' with a CUDA learner suits few envs per core",
        choices=("cpu", "cuda", AUTO),
    )
    deterministic_cuda: bool = _f(
        True,
        "CUDA processes use cuDNN's deterministic kernels without autotuning and "
        "torch.use_deterministic_algorithms (docs/gpu.md: what repeats bit for bit on a GPU); false lets cuDNN "
        "time and pick the fastest kernels",
    )
    step_delay_s: float = _f(0.0, "testing: max random sleep injected after each env step", min=0.0)


@dataclass
class RunConfig:
    seed: int = _f(0, "run seed; every env's stream derives from (seed, env index)", min=0)
    total_frames: int = _f(10_000_000, "stop after this many env frames (agent steps x frame skip)", min=1)
    max_seconds: float = _f(
        float("inf"), "stop after this many seconds of training (start-up excluded)", min_exclusive=0.0, allow_inf=True
    )
    target_return: float = _f(
        float("inf"), "stop early once the mean return of recent episodes reaches this", allow_inf=True
    )
    dir: str = _f("runs", "parent folder of run directories")
    log_interval_s: float = _f(5.0, "seconds between metrics.jsonl lines", min_exclusive=0.0)
    progress: bool = _f(True, "show a live one-line progress display")
    return_window: int = _f(100, "episodes averaged for the logged mean return", min=1)
    checkpoint_interval_s: float = _f(
        600.0,
        "seconds between periodic checkpoints (taken at the next rollout barrier; inf disables)",
        min_exclusive=0.0,
        allow_inf=True,
    )
    checkpoint_interval_frames: int = _f(0, "env frames between periodic checkpoints (0 disables)", min=0)
    keep_checkpoints: int = _f(3, "numbered checkpoints kept in RUN_DIR/checkpoints besides latest.pt", min=1)
    tensorboard: bool = _f(
        True,
        "write TensorBoard event files to RUN_DIR/tb (main process only): every metrics.jsonl scalar, "
        "the episode returns as a histogram; view with `tensorboard --logdir RUN_DIR/tb`",
    )
    wandb: bool = _f(
        False, "also log every metrics.jsonl scalar to Weights & Biases (needs `pip install 'fastrl-engine[wandb]'`)"
    )
    wandb_project: str = _f("fastrl", "run.wandb: the W&B project")
    wandb_name: str = _f("", "run.wandb: the W&B run name ('' = the run directory's name)")


@dataclass
class ReliabilityConfig:
    queue_timeout_s: float = _f(10.0, "a queue operation taking longer than this is a fault", min_exclusive=0.0)
    startup_timeout_s: float = _f(120.0, "workers must be ready within this", min_exclusive=0.0)
    watchdog_s: float = _f(
        60.0,
        "a worker without a heartbeat for this long (a hung env step, a wedged queue) ends the run; inf disables",
        min_exclusive=0.0,
        allow_inf=True,
    )
    finite_checks: str = _f(
        AUTO,
        "when a learner checks its losses, gradient norms and parameters for NaN and inf: 'step', after every "
        "optimizer step (a bad step is never applied), or 'update', once per update without waiting for the GPU at "
        "every minibatch (a bad update is rolled back whole: parameters and optimizer state); 'auto': 'step' on "
        "the CPU, 'update' on CUDA",
        choices=(AUTO, "step", "update"),
    )
    shutdown_timeout_s: float = _f(
        30.0,
        "on Ctrl-C/SIGTERM or a fault: how long to wait for the next barrier and the learner's checkpoint",
        min_exclusive=0.0,
    )


@dataclass
class DistConfig:
    """Read only when ``torchrun`` launched the run (docs/many-machines.md): each rank is a whole engine."""

    backend: str = _f(
        "auto",
        "torch.distributed backend between the ranks' learners: 'gloo' (CPU tensors), 'nccl' (CUDA "
        "learners), 'auto': nccl when engine.device is CUDA and each learner of a rank has a GPU of its own, "
        "else gloo",
        choices=("auto", "gloo", "nccl"),
    )
    timeout_s: float = _f(
        60.0,
        "a rank that does not answer a collective (or the rendezvous store) within this is a fault: every "
        "rank ends, naming it",
        min_exclusive=0.0,
    )
    bucket_mb: float = _f(
        1.0,
        "gradients are all-reduced in buckets of about this many MB, each started as soon as backward has "
        "made it, so the exchange overlaps the rest of backward (DDP's bucketing); 0: one all-reduce after "
        "backward",
        min=0.0,
    )
