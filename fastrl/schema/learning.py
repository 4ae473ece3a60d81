"""The sections of what is learned: the environment (``env``, its Atari protocol ``env.atari``), the learning
algorithm (``algo``) and the policy network (``model``)."""

from __future__ import annotations

from dataclasses import dataclass

from fastrl.tables import AUTO
from fastrl.tables import documented_field as _f


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
        "claims env.id ('factory', 'atari', 'minigrid', 'gymnasium'); or one by name: 'ale_vector' "
        "(ale-py's AtariVectorEnv) or 'envpool' (envpool's tasks and fastrl's Atari ids; pip install "
        "'fastrl-engine[envpool]'), each executor's env group stepped together by C++ threads; sync and hts only, no "
        "exact resume; docs/extending.md",
    )
    atari: AtariConfig = _f(AtariConfig(), "Atari preprocessing")
    on_error: str = _f(
        "raise",
        "an exception (or an invalid observation/reward) from an env: 'raise' ends the run naming the env; "
        "'reset' resets that env, ends its partial episode (done, no bootstrap across it), counts it and goes on",
        choices=("raise", "reset"),
    )


@dataclass
class AlgoConfig:
    name: str = _f(
        AUTO,
        "learning algorithm: 'ppo' (sync, hts), 'a2c' (sync, hts, and each agent of a mode of many learners), "
        "'impala' (async: V-trace), 'pqn' (sync); 'none' collects without learning (benchmarks); "
        "'package.module:NAME', an algorithm another package registered (docs/extending.md); 'auto': the mode's: "
        "ppo in sync and hts, impala in async, a2c in a mode of many learners",
    )
    options: dict = _f(
        {},
        "the algorithm's own hyper-parameters, as its registration names them (ppo's, impala's and pqn's: "
        "algo.options.KEY, listed with their algorithm; a plug-in's: its docs), checked against them as the config "
        "is read (a plug-in's when its run starts)",
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
    # PPO's and PQN's both (an algorithm registered with epochs=True): the shared minibatch plan's
    # (fastrl.algos.minibatches), which the benches read too
    epochs: int = _f(3, "ppo, pqn: passes over each storage per update", min=1, max=1000)
    minibatches: int = _f(4, "ppo, pqn: minibatches per epoch (the envs x rollout steps split evenly)", min=1)
    normalize_returns: bool | str = _f(
        AUTO,
        "ppo: the value head predicts returns in units of their running mean and std (sample-factory's "
        "normalize_returns); the value loss and value clip are measured in those units. impala: PopArt, the same "
        "statistics of the V-trace targets, the value head rescaled to keep its outputs when they move, the value "
        "error and advantages in units of their std. Built-in models only; 'auto': on for PPO and IMPALA with a "
        "built-in model, off otherwise",
        auto=True,
    )
    # the async mode's batch, not IMPALA's alone: it also sizes the run's slots (fastrl.process.run_plan), so any
    # algorithm that learns in async takes it
    batch_slots: int = _f(
        32,
        "async (impala): full trajectory slots per learner batch; the run allocates engine.envs + 2 x this slots, "
        "so envs rarely wait for a free slot while the learner holds one batch and the next fills",
        min=1,
        max=1 << 16,
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
