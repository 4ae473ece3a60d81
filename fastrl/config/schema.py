"""The run configuration's schema: one typed dataclass per section, every field with its
documentation and its validation rules in ``metadata`` (``fastrl config`` and the generated
``docs/config-reference.md`` print them; ``fastrl.tables`` enforces them as a config is read).
``"auto"`` (``AUTO``) in engine.executors, actors, inline_actors and the like: chosen for the machine when a run
starts (``fastrl.process.auto_layout``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from fastrl.config.validation import resolve_derived_defaults
from fastrl.errors import ConfigError
from fastrl.modes import GALA_BASES, MODES
from fastrl.tables import AUTO
from fastrl.tables import documented_field as _f


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
class AtariConfig:
    """The Atari preprocessing protocol (used only for ALE env ids)."""

    frame_skip: int = _f(4, "emulator frames per agent step; the last two are max-pooled", min=1, max=1000)
    size: int = _f(84, "observations are size x size grayscale, area-resized", min=8, max=1024)
    stack: int = _f(4, "number of stacked frames in one observation", min=1, max=64)
    noop_max: int = _f(30, "up to this many no-op actions after each reset (0 disables)", min=0)
    fire_reset: bool = _f(True, "press FIRE after reset in games whose action set has FIRE")
    episodic_life: bool = _f(False, "a lost life ends the episode for learning (not for the score)")
    clip_rewards: bool = _f(True, "learn from sign(reward); the logged return is the raw score")
    repeat_action_probability: float = _f(
        -1.0, "sticky actions; -1 picks from the id (0.25 for v5 ids, 0 for NoFrameskip-v4)", min=-1.0, max=1.0
    )
    full_action_space: bool = _f(False, "use all 18 actions instead of the game's minimal set")
    max_episode_frames: int = _f(108_000, "truncate an episode after this many emulator frames", min=1)
    mirror_players: bool = _f(
        False,
        "multi-player games (pettingzoo.atari ids): every player after the first sees the screen flipped "
        "left-right, so each sees itself on the first player's side (Pong: the right) and one policy serves all",
    )


@dataclass
class EnvConfig:
    id: str = _f(
        "PongNoFrameskip-v4", "a gymnasium id, an ALE id (ALE/Pong-v5, PongNoFrameskip-v4) or 'package.module:factory'"
    )
    kwargs: dict = _f({}, "keyword arguments for gymnasium.make or the factory")
    backend: str = _f(
        AUTO,
        "the env backend that makes the envs (fastrl.envs.registry): 'auto', the first registered one that "
        "claims env.id ('factory', 'atari', 'minigrid', 'gymnasium'); or one by name, e.g. 'ale_vector' "
        "(ale-py's AtariVectorEnv: each executor's env group stepped together by C++ threads; sync and hts "
        "only, no exact resume; docs/extending.md)",
    )
    atari: AtariConfig = _f(AtariConfig(), "Atari preprocessing")
    on_error: str = _f(
        "raise",
        "an exception (or an invalid observation/reward) from an env: 'raise' ends the run naming the env; "
        "'reset' resets that env, ends its partial episode (done, no bootstrap across it), counts it and goes on",
        choices=("raise", "reset"),
    )


@dataclass
class EngineConfig:
    mode: str = _f(
        "sync",
        "how rollout and learning interleave: 'sync' (lockstep, lag 0), 'hts' (two storages, lag 1), "
        "'async' (IMPALA: no barrier, measured lag; nondeterministic by nature), "
        "'gala' (engine.learners agents, each sync or hts on its share of the envs, gossiping parameters)",
        choices=tuple(MODES),
    )
    envs: int = _f(16, "total number of environments", min=1, max=1 << 20)
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
        "learner processes: 1, or the number of gala agents (each owns engine.envs / learners envs; "
        "per rank under torchrun, where one per rank is a gala too)",
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
class AlgoConfig:
    name: str = _f(
        AUTO,
        "learning algorithm: 'a2c' (sync, hts, gala), 'ppo' (sync, hts), 'impala' (async: V-trace); "
        "'none' collects without learning (benchmarks); 'package.module:NAME', an algorithm another package "
        "registered (docs/extending.md); 'auto': the mode's: ppo in sync and hts, impala in async, a2c in gala",
    )
    options: dict = _f(
        {},
        "the algorithm's own hyper-parameters, as its registration names them (a plug-in's; the built-ins "
        "take none): checked against them when the run starts",
    )
    lr: float = _f(5e-4, "learning rate (the start of algo.lr_schedule)", min_exclusive=0.0)
    optimizer: str = _f(
        "adam",
        "optimizer; 'rmsprop_tf' is RMSprop as TensorFlow and openai/baselines compute it (square average "
        "starts at 1, eps inside the square root; sb3's RMSpropTFLike), 'rmsprop' is torch's; 'radam': Adam with "
        "its warm-up rectified (Liu et al. 2020; PQN's)",
        choices=("rmsprop", "rmsprop_tf", "adam", "radam", "sgd"),
    )
    lr_schedule: str = _f(
        "linear",
        "'constant', or 'linear': lr -> lr_final over lr_anneal_frames, then held (the defaults: to 0 over "
        "run.total_frames, as the PPO and A2C papers), from the learner's frame counter, so runs and resumes stay "
        "deterministic",
        choices=("constant", "linear"),
    )
    lr_final: float = _f(0.0, "algo.lr_schedule = 'linear': the learning rate it ends at", min=0.0)
    lr_anneal_frames: int = _f(
        0, "algo.lr_schedule = 'linear': frames to go from lr to lr_final (0: run.total_frames)", min=0
    )
    lr_anneal_start: int = _f(
        0,
        "algo.lr_schedule = 'linear': frames the learning rate is held at lr before its anneal begins (the anneal "
        "then takes lr_anneal_frames, or what is left of run.total_frames)",
        min=0,
    )
    lr_cooldown_start: int = _f(
        0,
        "frames after which the learning rate (as algo.lr_schedule gives it) is scaled down, linearly to "
        "lr_cooldown_factor over lr_cooldown_frames and held: a late cooldown that leaves every update before it "
        "bit-identical (0: none)",
        min=0,
    )
    lr_cooldown_frames: int = _f(500_000, "algo.lr_cooldown_start: frames the cooldown takes", min=1)
    lr_cooldown_factor: float = _f(
        0.2, "algo.lr_cooldown_start: the multiplier of the learning rate at the cooldown's end", min=0.0, max=1.0
    )
    eps: float = _f(1e-5, "optimizer epsilon (rmsprop_tf: under the square root)", min_exclusive=0.0)
    rms_alpha: float = _f(0.99, "RMSprop smoothing constant (rmsprop, rmsprop_tf)", min=0.0, max=1.0)
    gamma: float = _f(0.99, "discount", min=0.0, max=1.0)
    entropy_coef: float = _f(0.01, "entropy bonus weight (the start of algo.entropy_schedule)", min=0.0)
    entropy_schedule: str = _f(
        "constant",
        "'constant', or 'linear': entropy_coef -> entropy_final over entropy_anneal_frames, then held, from the "
        "learner's frame counter (deterministic, resumed exactly): explore while nothing is learned, sharpen after",
        choices=("constant", "linear"),
    )
    entropy_final: float = _f(0.0, "algo.entropy_schedule = 'linear': the bonus weight it ends at", min=0.0)
    entropy_anneal_frames: int = _f(
        0,
        "algo.entropy_schedule = 'linear': frames to go from entropy_coef to entropy_final (0: run.total_frames)",
        min=0,
    )
    entropy_anneal_start: int = _f(
        0,
        "algo.entropy_schedule = 'linear': frames the bonus is held at entropy_coef before its anneal begins (the "
        "anneal then takes entropy_anneal_frames, or what is left of run.total_frames): explore through the take-off, "
        "sharpen only after it; every update before it is the constant bonus's, bit for bit",
        min=0,
    )
    value_coef: float = _f(0.5, "value loss weight", min=0.0)
    max_grad_norm: float = _f(0.5, "global gradient-norm clip (0 disables)", min=0.0)
    epochs: int = _f(3, "ppo: passes over each storage per update", min=1, max=1000)
    minibatches: int = _f(4, "ppo: minibatches per epoch (the envs x rollout steps split evenly)", min=1)
    clip: float = _f(
        0.1, "ppo: clip range of the probability ratio (the start of algo.clip_schedule)", min_exclusive=0.0
    )
    clip_schedule: str = _f(
        "constant",
        "ppo: 'constant', or 'linear': clip -> clip_final over clip_anneal_frames, then held, from the learner's "
        "frame counter (deterministic, resumed exactly): large policy steps while little is learned, small after",
        choices=("constant", "linear"),
    )
    clip_final: float = _f(0.1, "algo.clip_schedule = 'linear': the clip range it ends at", min_exclusive=0.0)
    clip_anneal_frames: int = _f(
        0, "algo.clip_schedule = 'linear': frames to go from clip to clip_final (0: run.total_frames)", min=0
    )
    value_clip: float = _f(
        1.0,
        "ppo: clip range of the value change around the pre-update value, in units of the returns' running std "
        "when algo.normalize_returns (0 disables)",
        min=0.0,
    )
    target_kl: float = _f(
        0.0,
        "ppo: an update's epochs stop at the first minibatch whose approximate KL from the policy that acted "
        "exceeds 1.5 x target_kl, before its step (stable-baselines3's rule; in hts that policy is one version "
        "behind); 0: every epoch runs. Steps shrink only where they are large; 'epochs_done' in the metrics",
        min=0.0,
    )
    gae_lambda: float = _f(0.95, "ppo: GAE lambda (1 gives n-step returns minus V)", min=0.0, max=1.0)
    normalize_advantages: bool = _f(True, "ppo: standardize advantages per minibatch")
    normalize_returns: bool | str = _f(
        AUTO,
        "ppo: the value head predicts returns in units of their running mean and std (sample-factory's "
        "normalize_returns); the value loss and value clip are measured in those units; built-in models only; "
        "'auto': on for PPO with a built-in model, off otherwise",
        auto=True,
    )
    normalize_rewards: bool = _f(
        False,
        "train on rewards divided by the running std of each env's discounted return (gymnasium's "
        "NormalizeReward as CleanRL uses it, SB3's VecNormalize norm_reward), computed by the learner; the slots, "
        "episode returns and metrics keep the raw rewards; the statistics and accumulators are checkpointed",
    )
    reward_clip: float = _f(
        10.0,
        "algo.normalize_rewards: the scaled rewards are clipped to +-this (inf: no clip)",
        min_exclusive=0.0,
        allow_inf=True,
    )
    batch_slots: int = _f(
        32,
        "impala: full trajectory slots per learner batch; the run allocates engine.envs + 2 x this slots, "
        "so envs rarely wait for a free slot while the learner holds one batch and the next fills",
        min=1,
        max=1 << 16,
    )
    rho_bar: float = _f(
        1.0,
        "impala: V-trace truncation of the importance weight in the targets and advantages",
        min_exclusive=0.0,
        allow_inf=True,
    )
    c_bar: float = _f(1.0, "impala: V-trace truncation of the trace coefficients", min_exclusive=0.0, allow_inf=True)
    vtrace_lambda: float = _f(1.0, "impala: V-trace lambda (mixes in TD(lambda) traces)", min=0.0, max=1.0)


@dataclass
class GalaConfig:
    """GALA (Assran et al. 2019): engine.learners agents that mix parameters after each local update."""

    mixing: str = _f(
        "ring",
        "'ring': each agent averages its parameters with its in-peer's last message (directed ring, non-blocking); "
        "'allreduce': gradients averaged over all agents every update (one big A2C, learners stay identical); "
        "'none': independent agents",
        choices=("ring", "allreduce", "none"),
    )
    base: str = _f("sync", "each agent's schedule on its envs: 'sync' (A2C) or 'hts' (HTS-RL)", choices=GALA_BASES)
    max_staleness: int = _f(
        8,
        "tau': an agent blocks only when more than this many of its updates passed without a new message from its "
        "in-peer (ring); a faster agent runs at most tau'+1 updates per update of its in-peer",
        min=0,
        max=1 << 20,
    )
    deterministic: bool = _f(
        False,
        "fixed gossip schedule: update k mixes the in-peer's message of update k (a sender waits until it is read), "
        "so the run is bit-reproducible across executor/actor counts",
    )


@dataclass
class SelfPlayConfig:
    """Multi-agent envs (PettingZoo, docs/multi-agent.md): who plays the agents other than the learning policy."""

    opponents: str = _f(
        "shared",
        "'shared': every agent is the learning policy and every agent's row learns (parameter sharing); 'pool': "
        "in each env one seat learns (env e's agent e mod k, so every seat in turn) and the other seats are "
        "played by snapshots of the policy from a pool, drawn at each rollout (sync and hts, one learner)",
        choices=("shared", "pool"),
    )
    pool_size: int = _f(8, "'pool': snapshots kept (the oldest leaves when a new one comes)", min=1, max=256)
    snapshot_every: int = _f(10, "'pool': updates between snapshots of the learning policy", min=1)
    sampling: str = _f(
        "uniform",
        "'pool': each env's opponent at each rollout: 'uniform' over the pool, 'latest' (the newest snapshot) or "
        "'rating': weighted (1 - p)^2 by p, the learner's Elo-expected score against it (the opponents it beats "
        "least, most often)",
        choices=("uniform", "latest", "rating"),
    )
    random_share: float = _f(
        0.0,
        "'pool': the share of each rollout's games whose opponent is a uniformly random legal player instead of a "
        "snapshot (drawn per env from the run seed's stream): games the policy's own past selves would never "
        "play, so one line of play both seats repeat cannot take over",
        min=0.0,
        max=1.0,
    )
    scripted: str = _f(
        "",
        "'pool': a scripted player for selfplay.scripted_share of the games: 'connect_four_lookahead' (wins if it "
        "can, blocks if it must, else random; connect_four_v3) or a model name or 'package.module:factory' whose "
        "network maps the observation rows to fixed logits (fastrl.models.scripted); never trained",
    )
    scripted_share: float = _f(
        0.0,
        "'pool': the share of each rollout's games whose opponent is selfplay.scripted instead of a snapshot "
        "(drawn per env with random_share's draw; random_share + scripted_share <= 1): a player that punishes "
        "what self-play alone never meets, such as a missed block",
        min=0.0,
        max=1.0,
    )
    elo_k: float = _f(16.0, "the Elo ratings' step: rating change per game = elo_k x (score - expected)", min=0.0)


@dataclass
class MultiAgentConfig:
    """Multi-agent envs (PettingZoo, docs/multi-agent.md): which policy plays each agent."""

    policies: dict = _f(
        {},
        "agent -> policy name, for every agent of the env ({}: one policy shared by every agent). Each named "
        "policy has its own parameters, optimizer and statistics, learned from its agents' rows alone (sync "
        "and hts, one learner); the first learning policy in the env's agent order is the run's own (its "
        "checkpoint's 'model', what eval and export play)",
    )
    frozen: dict = _f(
        {},
        "policy name -> a checkpoint (a run directory or a .pt file) whose parameters play that policy's agents "
        "and never learn (the run's model; only the tensors are read)",
    )


@dataclass
class ModelConfig:
    name: str = _f(
        "auto",
        "'auto', 'mlp', 'board' (3x3 convolutions over a Dict's board planes, e.g. connect_four_v3), 'nature', "
        "'shallow', 'impala', 'multi' (Dict observations with an image), "
        "'random' (uniform) or 'package.module:factory'",
    )
    hidden: list[int] = _f(
        [64, 64], "hidden layer sizes of the mlp (and of multi's vector part)", item_range=(1, 1 << 16)
    )
    kwargs: dict = _f({}, "keyword arguments for a custom model factory")
    precision: str = _f(
        "auto",
        "'fp32', or 'bf16' (convolutions and FC in bfloat16, heads and parameters in float32; built-in CNNs only); "
        "'auto': bf16 for the built-in CNNs on a CPU with AMX-BF16 (3x faster training there), fp32 otherwise",
        choices=("auto", "fp32", "bf16"),
    )
    tf32: bool = _f(
        False,
        "CUDA: matrix products and convolutions in TF32 on tensor cores (10-bit mantissa inputs); off: fp32 "
        "arithmetic as on the CPU (torch itself leaves TF32 on for cuDNN's convolutions unless told)",
    )
    compile_mode: str = _f(
        AUTO,
        "model.compile's torch.compile mode: 'default', 'reduce-overhead' (CUDA graphs: each fixed shape replayed "
        "as one launch; CUDA only), 'max-autotune' (also times kernel choices at start-up); 'auto': 'default' on "
        "the CPU; on CUDA the actors replay CUDA graphs ('reduce-overhead': their forward 7.9x faster on an H200) "
        "and the learner stays eager (compiling measured no faster there)",
        choices=(AUTO, "default", "reduce-overhead", "max-autotune"),
    )
    normalize_obs: bool | str = _f(
        AUTO,
        "normalise observations per element by running mean and std, clipped to +-5 (sample-factory's "
        "normalize_input); the statistics are model buffers: published, checkpointed, resumed; built-in models "
        "only; 'auto': on for the built-in models, off for 'random' and custom ones (which normalise their own "
        "inputs)",
        auto=True,
    )
    compile: bool | str = _f(
        AUTO,
        "torch.compile the policy's forward and backward in actors and learners (in place: checkpoints and "
        "load_policy are the eager model's); 'auto': on for the built-in image models in runs of 1M frames or "
        "more, where it measured faster (fastrl/models/compiling.py; on CUDA not for lstm models), off elsewhere",
        auto=True,
    )
    lstm: int = _f(
        0,
        "hidden size H of an LSTM core between the model's encoder and its heads (0: feed-forward); each env's "
        "state is kept in the slots and the learner replays every rollout from its first state; built-in models only",
        min=0,
        max=1 << 14,
    )


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
        False, "also log every metrics.jsonl scalar to Weights & Biases (needs `pip install 'fastrl[wandb]'`)"
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


@dataclass
class Config:
    env: EnvConfig = _f(EnvConfig(), "environment")
    engine: EngineConfig = _f(EngineConfig(), "processes and buffers")
    algo: AlgoConfig = _f(AlgoConfig(), "learning algorithm")
    gala: GalaConfig = _f(GalaConfig(), "gala mode: gossip between learners")
    selfplay: SelfPlayConfig = _f(SelfPlayConfig(), "multi-agent envs: opponents from a pool of snapshots")
    multiagent: MultiAgentConfig = _f(MultiAgentConfig(), "multi-agent envs: named policies per agent")
    model: ModelConfig = _f(ModelConfig(), "policy network")
    run: RunConfig = _f(RunConfig(), "seed, budget, logging")
    reliability: ReliabilityConfig = _f(ReliabilityConfig(), "timeouts and the watchdog")
    dist: DistConfig = _f(DistConfig(), "many machines: torch.distributed between ranks launched by torchrun")

    def __post_init__(self) -> None:
        resolve_derived_defaults(self)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
