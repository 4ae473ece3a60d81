"""Typed run configuration: TOML files and ``--set key=value`` overrides into dataclasses.

Every field carries its documentation and its allowed values in ``metadata`` so that
validation errors can name the key, the bad value and what is allowed, before any
worker starts.
"""
from __future__ import annotations

import dataclasses
import difflib
import math
import os
import sys
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI (a dependency there)
    import tomli as tomllib

from fastrl.modes import ALGORITHMS, GALA_BASES, MODES, algorithm_error

# The job `fastrl train` runs with no CONFIG (and fastrl.train() with none): a copy of
# configs/pong_sync.toml shipped in the package (tests/test_config.py keeps the two equal).
# The dataclass defaults below are what every config file starts from, not a job of their own.
DEFAULT_JOB = Path(__file__).with_name("default_job.toml")
AUTO = "auto"  # engine.executors / actors / inline_actors: chosen for the machine (process/auto_layout.py)
INT64_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A configuration value or key that cannot be used; the message says which and why."""


def _f(default: Any, doc: str, **rules: Any) -> Any:
    """A dataclass field with its documentation and validation rules in metadata."""
    if isinstance(default, (list, dict)) or dataclasses.is_dataclass(default):
        factory = (lambda d=default: type(d)(d)) if not dataclasses.is_dataclass(default) else type(default)
        return field(default_factory=factory, metadata={"doc": doc, **rules})
    return field(default=default, metadata={"doc": doc, **rules})


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


@dataclass
class EnvConfig:
    id: str = _f("PongNoFrameskip-v4", "a gymnasium id, an ALE id (ALE/Pong-v5, PongNoFrameskip-v4) or 'package.module:factory'")
    kwargs: dict = _f({}, "keyword arguments for gymnasium.make or the factory")
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
        "hts",
        "how rollout and learning interleave: 'sync' (lockstep, lag 0), 'hts' (two storages, lag 1), "
        "'async' (IMPALA: no barrier, measured lag; nondeterministic by nature), "
        "'gala' (engine.learners agents, each sync or hts on its share of the envs, gossiping parameters)",
        choices=tuple(MODES),
    )
    envs: int = _f(16, "total number of environments", min=1, max=1 << 20)
    executors: int | str = _f(
        AUTO, "processes that step the envs (envs are split evenly); 'auto': from the cores and GPU present "
        "(README, 'Tuning on a given machine'), resolved before the run starts and written to its config.toml",
        min=1, auto=True,
    )
    actors: int | str = _f(
        AUTO, "processes that run the policy forward; 'auto': one per executor with inline actors (CPU), "
        "else 1 on a GPU (2 with 16 or more cores)", min=1, auto=True,
    )
    learners: int = _f(1, "learner processes: 1, or the number of gala agents (each owns engine.envs / learners envs; "
                       "per rank under torchrun, where one per rank is a gala too)",
                       min=1, max=256)
    rollout: int = _f(5, "steps per env per rollout (T); in hts also the barrier interval alpha", min=1, max=1 << 20)
    inline_actors: bool | str = _f(
        AUTO,
        "run each executor's policy forward inside the executor (engine.actors must equal engine.executors); "
        "no queue round trip per step: best on CPU-only machines with few cores; 'auto': true without a GPU",
        auto=True,
    )
    env_groups: int = _f(
        2, "an executor announces its envs in this many groups, so stepping one overlaps inference of another", min=1
    )
    micro_batch: int = _f(
        16,
        "actor forward micro-batch; a fixed size keeps results batch-invariant: 16 or more holds on every CPU "
        "measured, 8 holds for the CNNs but not for the MLP on AVX-512 Xeons (models/microbatch.py); make it the "
        "envs one actor forwards at once (8: Pong's 16 envs on 2 executors with inline actors, README 'Tuning')",
        min=8,
        max=1 << 16,
        multiple_of=8,
    )
    core_rotation_s: float = _f(
        0.0,
        "Linux: every this many seconds each executor moves to the next CPU it may use, so rollout barriers "
        "wait for the average core rather than the slowest (cores differ: hybrid CPUs, shared VMs); 0 = off",
        min=0.0,
    )
    serial: bool = _f(False, "run executors, actors and learner in this one process (debugging, profiling)")
    actor_threads: int = _f(1, "torch threads per actor process", min=1, max=1024)
    learner_threads: int | str = _f(
        AUTO, "torch threads in each learner; 'auto', for the built-in CNNs on the CPU: every core on machines of up "
        "to 4 cores, shared with the executors, which wait while a CPU learner learns (2 threads ran Pong PPO 1.8x "
        "faster than 1 on 2 cores), a quarter of the cores per learner (2-8) above that; 1 for other models (2 "
        "threads ran Hopper's MLP 5x slower) and with CUDA", min=1, max=1024, auto=True,
    )
    device: str = _f("cpu", "device for actors and learner", choices=("cpu", "cuda", "auto"))
    step_delay_s: float = _f(0.0, "testing: max random sleep injected after each env step", min=0.0)


@dataclass
class AlgoConfig:
    name: str = _f(
        "a2c",
        "learning algorithm: 'a2c' (sync, hts), 'ppo' (sync, hts), 'impala' (async: V-trace); "
        "'none' collects without learning (benchmarks)",
        choices=ALGORITHMS,
    )
    lr: float = _f(7e-4, "learning rate", min_exclusive=0.0)
    optimizer: str = _f(
        "rmsprop",
        "optimizer; 'rmsprop_tf' is RMSprop as TensorFlow and openai/baselines compute it (square average "
        "starts at 1, eps inside the square root; sb3's RMSpropTFLike), 'rmsprop' is torch's",
        choices=("rmsprop", "rmsprop_tf", "adam", "sgd"),
    )
    lr_schedule: str = _f(
        "constant",
        "'constant', or 'linear': lr x (1 - frames / run.total_frames) at each update (PPO and A2C papers), "
        "from the learner's frame counter, so runs and resumes stay deterministic",
        choices=("constant", "linear"),
    )
    eps: float = _f(1e-5, "optimizer epsilon (rmsprop_tf: under the square root)", min_exclusive=0.0)
    rms_alpha: float = _f(0.99, "RMSprop smoothing constant (rmsprop, rmsprop_tf)", min=0.0, max=1.0)
    gamma: float = _f(0.99, "discount", min=0.0, max=1.0)
    entropy_coef: float = _f(0.01, "entropy bonus weight", min=0.0)
    value_coef: float = _f(0.5, "value loss weight", min=0.0)
    max_grad_norm: float = _f(0.5, "global gradient-norm clip (0 disables)", min=0.0)
    epochs: int = _f(4, "ppo: passes over each storage per update", min=1, max=1000)
    minibatches: int = _f(4, "ppo: minibatches per epoch (the envs x rollout steps split evenly)", min=1)
    clip: float = _f(0.2, "ppo: clip range of the probability ratio", min_exclusive=0.0)
    value_clip: float = _f(0.0, "ppo: clip range of the value change around the pre-update value (0 disables)", min=0.0)
    gae_lambda: float = _f(0.95, "ppo: GAE lambda (1 gives n-step returns minus V)", min=0.0, max=1.0)
    normalize_advantages: bool = _f(True, "ppo: standardize advantages per minibatch")
    normalize_returns: bool = _f(
        False, "ppo: the value head predicts returns in units of their running mean and std (sample-factory's "
        "normalize_returns); the value loss and value clip are measured in those units; built-in models only",
    )
    normalize_rewards: bool = _f(
        False, "train on rewards divided by the running std of each env's discounted return (gymnasium's "
        "NormalizeReward as CleanRL uses it, SB3's VecNormalize norm_reward), computed by the learner; the slots, "
        "episode returns and metrics keep the raw rewards; the statistics and accumulators are checkpointed",
    )
    reward_clip: float = _f(
        10.0, "algo.normalize_rewards: the scaled rewards are clipped to +-this (inf: no clip)", min_exclusive=0.0, allow_inf=True,
    )
    batch_slots: int = _f(
        32, "impala: full trajectory slots per learner batch; the run allocates engine.envs + 2 x this slots, "
        "so envs rarely wait for a free slot while the learner holds one batch and the next fills", min=1, max=1 << 16,
    )
    rho_bar: float = _f(1.0, "impala: V-trace truncation of the importance weight in the targets and advantages",
                        min_exclusive=0.0, allow_inf=True)
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
        min=0, max=1 << 20,
    )
    deterministic: bool = _f(
        False,
        "fixed gossip schedule: update k mixes the in-peer's message of update k (a sender waits until it is read), "
        "so the run is bit-reproducible across executor/actor counts",
    )


@dataclass
class ModelConfig:
    name: str = _f("auto", "'auto', 'mlp', 'nature', 'shallow', 'impala', 'multi' (Dict observations with an image), 'random' (uniform) or 'package.module:factory'")
    hidden: list[int] = _f([64, 64], "hidden layer sizes of the mlp (and of multi's vector part)", item_range=(1, 1 << 16))
    kwargs: dict = _f({}, "keyword arguments for a custom model factory")
    precision: str = _f(
        "auto",
        "'fp32', or 'bf16' (convolutions and FC in bfloat16, heads and parameters in float32; built-in CNNs only); "
        "'auto': bf16 for the built-in CNNs on a CPU with AMX-BF16 (3x faster training there), fp32 otherwise",
        choices=("auto", "fp32", "bf16"),
    )
    normalize_obs: bool = _f(
        False,
        "normalise observations per element by running mean and std, clipped to +-5 (sample-factory's "
        "normalize_input); the statistics are model buffers: published, checkpointed, resumed; built-in models only",
    )
    compile: bool | str = _f(
        AUTO,
        "torch.compile the policy's forward and backward in actors and learners (in place: checkpoints and "
        "load_policy are the eager model's); 'auto': on for the built-in image models on the CPU in runs of "
        "1M frames or more, where it measured faster (fastrl/models/compiling.py), off elsewhere",
        auto=True,
    )
    lstm: int = _f(
        0, "hidden size H of an LSTM core between the model's encoder and its heads (0: feed-forward); each env's "
        "state is kept in the slots and the learner replays every rollout from its first state; built-in models only",
        min=0, max=1 << 14,
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
        600.0, "seconds between periodic checkpoints (taken at the next rollout barrier; inf disables)",
        min_exclusive=0.0, allow_inf=True,
    )
    checkpoint_interval_frames: int = _f(0, "env frames between periodic checkpoints (0 disables)", min=0)
    keep_checkpoints: int = _f(3, "numbered checkpoints kept in RUN_DIR/checkpoints besides latest.pt", min=1)
    tensorboard: bool = _f(
        True, "write TensorBoard event files to RUN_DIR/tb (main process only): every metrics.jsonl scalar, "
        "the episode returns as a histogram; view with `tensorboard --logdir RUN_DIR/tb`",
    )
    wandb: bool = _f(False, "also log every metrics.jsonl scalar to Weights & Biases (needs `pip install 'fastrl[wandb]'`)")
    wandb_project: str = _f("fastrl", "run.wandb: the W&B project")
    wandb_name: str = _f("", "run.wandb: the W&B run name ('' = the run directory's name)")


@dataclass
class ReliabilityConfig:
    queue_timeout_s: float = _f(10.0, "a queue operation taking longer than this is a fault", min_exclusive=0.0)
    startup_timeout_s: float = _f(120.0, "workers must be ready within this", min_exclusive=0.0)
    watchdog_s: float = _f(
        60.0, "a worker without a heartbeat for this long (a hung env step, a wedged queue) ends the run; inf disables",
        min_exclusive=0.0, allow_inf=True,
    )
    shutdown_timeout_s: float = _f(
        30.0, "on Ctrl-C/SIGTERM or a fault: how long to wait for the next barrier and the learner's checkpoint",
        min_exclusive=0.0,
    )


@dataclass
class DistConfig:
    """Read only when ``torchrun`` launched the run (README, "Many machines"): each rank is a whole engine."""

    backend: str = _f(
        "auto", "torch.distributed backend between the ranks' learners: 'gloo' (CPU tensors), 'nccl' (CUDA "
        "learners), 'auto': nccl when engine.device is CUDA, else gloo", choices=("auto", "gloo", "nccl"),
    )
    timeout_s: float = _f(
        60.0, "a rank that does not answer a collective (or the rendezvous store) within this is a fault: every "
        "rank ends, naming it", min_exclusive=0.0,
    )
    bucket_mb: float = _f(
        1.0, "gradients are all-reduced in buckets of about this many MB, each started as soon as backward has "
        "made it, so the exchange overlaps the rest of backward (DDP's bucketing); 0: one all-reduce after "
        "backward", min=0.0,
    )


@dataclass
class Config:
    env: EnvConfig = _f(EnvConfig(), "environment")
    engine: EngineConfig = _f(EngineConfig(), "processes and buffers")
    algo: AlgoConfig = _f(AlgoConfig(), "learning algorithm")
    gala: GalaConfig = _f(GalaConfig(), "gala mode: gossip between learners")
    model: ModelConfig = _f(ModelConfig(), "policy network")
    run: RunConfig = _f(RunConfig(), "seed, budget, logging")
    reliability: ReliabilityConfig = _f(ReliabilityConfig(), "timeouts and the watchdog")
    dist: DistConfig = _f(DistConfig(), "many machines: torch.distributed between ranks launched by torchrun")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# ---------------------------------------------------------------- building from dicts


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Check ``value`` against the annotation ``tp``; ints are accepted for floats."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        for option in typing.get_args(tp):
            try:
                return _coerce(value, option, key)
            except ConfigError:
                pass
        raise ConfigError(f"{key} = {value!r}: expected {tp}")
    if tp is type(None):
        if value is None:
            return None
        raise ConfigError(f"{key} = {value!r}: expected nothing")
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{key} = {value!r}: expected a list")
        (item_tp,) = typing.get_args(tp)
        return [_coerce(v, item_tp, f"{key}[{i}]") for i, v in enumerate(value)]
    if tp is dict or origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key} = {value!r}: expected a table")
        return dict(value)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        if abs(value) > INT64_MAX:
            raise ConfigError(f"{key} = {value!r}: out of range")
        return float(value)
    if tp in (int, float, str, bool):
        if type(value) is not tp:
            raise ConfigError(f"{key} = {value!r}: expected {_type_name(tp)}, got {type(value).__name__}")
        if tp is int and not -INT64_MAX <= value <= INT64_MAX:
            raise ConfigError(f"{key} = {value}: out of range (a 64-bit integer)")
        if tp is str:
            _check_text(value, key)
        return value
    raise ConfigError(f"{key}: unsupported annotation {tp}")


def _check_text(value: str, key: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(f"{key} = {value!r}: not valid Unicode text") from None


def _check_toml_value(value: Any, key: str) -> None:
    """Free-form tables (``kwargs``) must hold what a TOML file can: the run dir's config.toml repeats the run."""
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise ConfigError(f"{key}: keys must be strings, got {k!r}")
            _check_text(k, key)
            _check_toml_value(v, f"{key}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_toml_value(v, f"{key}[{i}]")
    elif not isinstance(value, (bool, int, float, str)):
        raise ConfigError(f"{key} = {value!r}: only strings, numbers, booleans, lists and tables are allowed")
    elif isinstance(value, int) and not -INT64_MAX <= value <= INT64_MAX:
        raise ConfigError(f"{key} = {value}: out of range (a 64-bit integer)")
    elif isinstance(value, str):
        _check_text(value, key)


def _check_rules(value: Any, meta: dict, key: str) -> None:
    if isinstance(value, float) and (math.isnan(value) or (math.isinf(value) and not meta.get("allow_inf"))):
        raise ConfigError(f"{key} = {value!r}: must be a finite number")
    if isinstance(value, dict):
        _check_toml_value(value, key)
    if isinstance(value, list) and "item_range" in meta:
        low, high = meta["item_range"]
        for i, item in enumerate(value):
            if not low <= item <= high:
                raise ConfigError(f"{key}[{i}] = {item!r}: must be between {low} and {high}")
    allowed = meta.get("choices")
    if allowed is not None and value not in allowed:
        raise ConfigError(f"{key} = {value!r}: allowed values are {', '.join(map(repr, allowed))}")
    if "multiple_of" in meta and value % meta["multiple_of"]:
        raise ConfigError(f"{key} = {value!r}: must be a multiple of {meta['multiple_of']}")
    if "min" in meta and value < meta["min"]:
        raise ConfigError(f"{key} = {value!r}: must be >= {meta['min']}")
    if "max" in meta and value > meta["max"]:
        raise ConfigError(f"{key} = {value!r}: must be <= {meta['max']}")
    if "min_exclusive" in meta and not value > meta["min_exclusive"]:
        raise ConfigError(f"{key} = {value!r}: must be > {meta['min_exclusive']}")


def _build(cls: type, data: dict, prefix: str) -> Any:
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key in data:
        if key not in fields:
            where = f"{prefix}{key}"
            close = difflib.get_close_matches(key, list(fields), n=1)
            hint = f"; did you mean '{prefix}{close[0]}'?" if close else f"; known keys: {', '.join(fields)}"
            raise ConfigError(f"unknown config key '{where}'{hint}")
    kwargs = {}
    for name, f in fields.items():
        if name not in data:
            continue
        key, tp, value = f"{prefix}{name}", hints[name], data[name]
        if dataclasses.is_dataclass(tp):
            if not isinstance(value, dict):
                raise ConfigError(f"{key}: expected a table, got {value!r}")
            kwargs[name] = _build(tp, value, f"{key}.")
        elif f.metadata.get("auto"):
            kwargs[name] = _coerce_auto(value, tp, dict(f.metadata), key)
        else:
            kwargs[name] = _coerce(value, tp, key)
            _check_rules(kwargs[name], dict(f.metadata), key)
    return cls(**kwargs)


def _coerce_auto(value: Any, tp: Any, meta: dict, key: str) -> Any:
    """``"auto"`` as it is (resolved when a run starts), else a value of the key's concrete type and rules."""
    if value == AUTO:
        return AUTO
    concrete = next(t for t in typing.get_args(tp) if t is not str)
    allowed = "true, false or 'auto'" if concrete is bool else f"an int >= {meta.get('min', 1)} or 'auto'"
    try:
        value = _coerce(value, concrete, key)
    except ConfigError:
        raise ConfigError(f"{key} = {value!r}: allowed values are {allowed}") from None
    _check_rules(value, meta, key)
    return value


def _merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def parse_override(text: str) -> dict:
    """``a.b.c=value`` -> ``{"a": {"b": {"c": value}}}``; the value is read as TOML, else as a string."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected key=value, e.g. engine.envs=8")
    dotted, raw = text.split("=", 1)
    parts = [p.strip() for p in dotted.strip().split(".")]
    if not all(parts):
        raise ConfigError(f"--set {text!r}: empty key part")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    out: dict = {parts[-1]: value}
    for part in reversed(parts[:-1]):
        out = {part: out}
    return out


def apply_overrides(data: dict, overrides: list[str] | tuple[str, ...]) -> dict:
    for text in overrides:
        data = _merge(data, parse_override(text))
    return data


def config_from_dict(data: dict) -> Config:
    config = _build(Config, data, "")
    validate(config)
    return config


def load_config(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """Read a TOML file (or the defaults) and apply ``key=value`` overrides, then validate."""
    data: dict = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file {str(path)!r} does not exist")
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    return config_from_dict(apply_overrides(data, overrides))


def validate(config: Config) -> None:
    """Checks that involve more than one key."""
    engine = config.engine
    # keys still 'auto' are checked again once resolved (process/auto_layout.py), before the run starts
    if engine.executors != AUTO and engine.executors > engine.envs:
        raise ConfigError(f"engine.executors = {engine.executors} is more than engine.envs = {engine.envs}")
    if engine.actors != AUTO and engine.actors > engine.envs:
        raise ConfigError(f"engine.actors = {engine.actors} is more than engine.envs = {engine.envs}")
    layout_known = AUTO not in (engine.actors, engine.executors)
    if engine.inline_actors is True and layout_known and engine.actors != engine.executors:
        raise ConfigError(
            f"engine.inline_actors = true runs one actor inside each executor: set engine.actors = engine.executors "
            f"(now {engine.actors} and {engine.executors})"
        )
    name = config.algo.name
    wrong_algorithm = algorithm_error(engine.mode, name)
    if wrong_algorithm:
        raise ConfigError(wrong_algorithm)
    if config.algo.normalize_returns and name != "ppo":
        raise ConfigError(f"algo.normalize_returns = true is implemented for algo.name = 'ppo', not {name!r}")
    if config.algo.normalize_rewards and name == "none":
        raise ConfigError("algo.normalize_rewards = true needs a learning algorithm: algo.name = 'none' trains on no reward")
    if config.algo.name == "ppo" and config.algo.minibatches > engine.envs * engine.rollout:
        raise ConfigError(
            f"algo.minibatches = {config.algo.minibatches} is more than the {engine.envs * engine.rollout} steps "
            f"of a storage (engine.envs x engine.rollout)"
        )
    if config.algo.name == "ppo" and config.model.lstm and config.algo.minibatches > engine.envs:
        raise ConfigError(
            f"algo.minibatches = {config.algo.minibatches} is more than engine.envs = {engine.envs}: with model.lstm "
            f"a minibatch is whole envs' rollouts (replayed from their first state), so at most one per env"
        )
    if engine.mode == "gala":
        _validate_gala(config)
    elif engine.learners != 1:
        raise ConfigError(f"engine.learners = {engine.learners} needs engine.mode = 'gala' (the other modes have one learner)")


LAUNCH_KEYS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")  # what torchrun tells every process it starts


def launch_size(environ: Mapping[str, str] = os.environ) -> int:
    """The ranks torchrun started (1 without it): a run's input like its config (``fastrl.process.ranks``)."""
    return int(environ.get("WORLD_SIZE", 1)) if all(key in environ for key in LAUNCH_KEYS) else 1


def _validate_gala(config: Config) -> None:
    engine = config.engine
    if engine.learners * launch_size() < 2:
        raise ConfigError("engine.mode = 'gala' needs engine.learners >= 2 (the number of gossiping agents; under "
                          "torchrun engine.learners is per rank, and one per rank is enough)")
    if engine.envs % engine.learners:
        raise ConfigError(f"engine.envs = {engine.envs} must be a multiple of engine.learners = {engine.learners}: "
                          "each gala agent owns an equal share of the envs")
    if engine.serial:
        raise ConfigError("engine.serial = true cannot run gala: its learners wait on each other's messages, "
                          "so they need processes of their own")


def field_docs(cls: type = Config, prefix: str = "") -> list[tuple[str, Any, str]]:
    """(key, default, documentation) for every leaf key, for the README and ``fastrl config``."""
    rows = []
    for f in dataclasses.fields(cls):
        tp = typing.get_type_hints(cls)[f.name]
        if dataclasses.is_dataclass(tp):
            rows += field_docs(tp, f"{prefix}{f.name}.")
        else:
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            rows.append((f"{prefix}{f.name}", default, f.metadata.get("doc", "")))
    return rows
