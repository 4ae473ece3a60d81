"""``fastrl eval``: play a trained policy for a few episodes and report its returns.

The target is a run directory, its ``checkpoints`` folder or a checkpoint file. The checkpoint
gives everything needed: ``config`` (the resolved run config: env and model) and ``model`` (the
parameters). ``params`` picks which parameters of a run: ``"auto"`` the target's own checkpoint;
for ``gala`` runs (several learners) ``"average"`` the top-level checkpoint, which holds the
average of the learners' parameters and a ``gala`` key, and ``"learner-<i>"`` (or ``"<i>"``)
learner i's own ``checkpoints/learner-<i>/latest.pt``.

One env, stepped with the executor's protocol (``reset(seed, out)``, ``step(action, prev, out)``);
the return is the sum of raw rewards (the score, unclipped) until ``episode_over``. Episode i's
reset seed is the i-th draw of a stream seeded with ``seed``, and sampled actions draw their
uniform numbers from a second stream, so the same seed gives the same returns, and greedy and
sampled evaluations start from the same episodes.

``video``: a ``.mp4`` or ``.gif`` file that records the episodes as they are played, one
frame after each reset and each agent step (``fastrl.video``).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fastrl.checkpoint import LATEST, checkpoint_file
from fastrl.config import Config, ConfigError, config_from_dict

RESET_SEED_BOUND = 2**31 - 1  # as the executor draws them
_LEARNER = re.compile(r"^learner-(\d+)$")
_PARAMS_ALLOWED = "'auto', 'average' or 'learner-<i>' (or just '<i>')"


def run_dir_of(path: str | Path) -> Path | None:
    """The run directory a target belongs to, or None (a checkpoint file outside any run).

    A run directory holds ``checkpoints/``; a top-level checkpoint is ``RUN/checkpoints/<file>``
    and a gala learner's is ``RUN/checkpoints/learner-<i>/<file>``.
    """
    path = Path(path)
    if path.is_dir():
        if (path / "checkpoints").is_dir():
            return path
        folder = path
    else:
        folder = path.parent
    if folder.name == "checkpoints":
        return folder.parent
    if _LEARNER.match(folder.name) and folder.parent.name == "checkpoints":
        return folder.parent.parent
    return None


def learner_index(params: str) -> int | None:
    """``"learner-3"`` or ``"3"`` -> 3; anything else -> None."""
    text = params.strip()
    m = _LEARNER.match(text)
    if m:
        return int(m[1])
    if text.isdigit():
        return int(text)
    return None


def learners_of(run_dir: Path) -> list[int]:
    """The learners with a checkpoint of their own in a (gala) run, sorted."""
    folder = run_dir / "checkpoints"
    if not folder.is_dir():
        return []
    found = (_LEARNER.match(p.name) for p in folder.iterdir() if (p / LATEST).is_file())
    return sorted(int(m[1]) for m in found if m)


def resolve_checkpoint(target: str | Path, params: str | int = "auto") -> tuple[Path, str]:
    """-> (the checkpoint file to evaluate, ``"auto"``, ``"average"`` or ``"learner-<i>"``).

    Once the file is loaded, ``"auto"`` becomes what it holds and ``"average"`` is checked
    (the file must carry a ``gala`` key).
    """
    if isinstance(params, (int, np.integer)) and not isinstance(params, bool):
        params = str(params)  # learner i
    if not isinstance(params, str):
        raise ConfigError(f"params = {params!r}: expected {_PARAMS_ALLOWED}")
    target = Path(target)
    if not target.exists():
        raise ConfigError(f"nothing to evaluate at {str(target)!r}: no such run directory or checkpoint file")
    own = checkpoint_file(target)
    run_dir = run_dir_of(target)
    if params == "auto":
        if not own.is_file():
            raise ConfigError(f"nothing to evaluate at {str(target)!r}: no checkpoint {str(own)!r}")
        return own, "auto"
    if params == "average":
        if own.is_file() and not _LEARNER.match(own.parent.name):  # the target is a top-level checkpoint
            return own, "average"
        if run_dir is None or not (run_dir / "checkpoints" / LATEST).is_file():
            raise ConfigError(f"--params average: {str(target)!r} is not in a run directory with checkpoints/{LATEST}")
        return run_dir / "checkpoints" / LATEST, "average"
    index = learner_index(params)
    if index is None:
        raise ConfigError(f"params = {params!r} is not one of {_PARAMS_ALLOWED}")
    name = f"learner-{index}"
    if own.is_file() and own.parent.name == name:  # the target is one of this learner's own checkpoints
        return own, name
    if run_dir is None:
        raise ConfigError(f"--params {params}: {str(target)!r} is not in a run directory (one holding checkpoints/)")
    path = run_dir / "checkpoints" / name / LATEST
    if not path.is_file():
        learners = learners_of(run_dir)
        if learners:
            have = ", ".join(f"learner-{i}" for i in learners)
            raise ConfigError(f"--params {params}: run {str(run_dir)!r} has no {name} checkpoint ({path}); "
                              f"its learners are {have}")
        raise ConfigError(f"--params {params}: run {str(run_dir)!r} has one learner (no checkpoints/learner-<i>/); "
                          "--params learner-<i> applies to gala runs")
    return path, name


def _load(path: Path, which: str) -> tuple[dict, Config, str]:
    from fastrl.checkpoint import load_checkpoint

    try:
        checkpoint = load_checkpoint(path)
    except Exception as exc:
        raise ConfigError(f"cannot read checkpoint {str(path)!r}: {type(exc).__name__}: {exc}") from None
    if not isinstance(checkpoint, dict) or not all(isinstance(checkpoint.get(k), dict) for k in ("model", "config")):
        raise ConfigError(f"checkpoint {str(path)!r} holds no 'model' parameters and 'config' "
                          "(not a fastrl checkpoint?)")
    gala = checkpoint.get("gala")
    if which == "average" and gala is None:
        raise ConfigError(f"checkpoint {str(path)!r}: this run has one learner; --params average applies to gala runs")
    if which == "auto":
        which = "average" if gala is not None else "model"
        if _LEARNER.match(path.parent.name):
            which = path.parent.name
    try:
        config = config_from_dict(checkpoint["config"])
    except ConfigError as exc:
        raise ConfigError(f"checkpoint {str(path)!r}: its config cannot be used: {exc}") from None
    return checkpoint, config, which


def _check(episodes, seed, greedy, max_steps) -> None:
    def whole(value) -> bool:
        return isinstance(value, (int, np.integer)) and not isinstance(value, bool)

    if not whole(episodes) or episodes < 1:
        raise ConfigError(f"episodes = {episodes!r}: expected an int >= 1")
    if not whole(seed) or seed < 0:
        raise ConfigError(f"seed = {seed!r}: expected an int >= 0")
    if not isinstance(greedy, bool):
        raise ConfigError(f"greedy = {greedy!r}: expected True or False")
    if max_steps is not None and (not whole(max_steps) or max_steps < 1):
        raise ConfigError(f"max_steps = {max_steps!r}: expected None (each episode runs to its end) or an int >= 1")


def _policy(config: Config, state_dict: dict, path: Path):
    """The run's policy network, built as the actors build it, with the checkpoint's parameters."""
    import torch

    from fastrl.envs import probe_env
    from fastrl.models.policy import build_policy

    try:
        info = probe_env(config.env)
        with torch.random.fork_rng(devices=[]):  # initialisation draws: leave the caller's RNG alone
            model = build_policy(info, config, device="cpu")  # eval plays on the CPU
    except ValueError as exc:  # an env id or model that no longer resolves here
        raise ConfigError(f"checkpoint {str(path)!r}: {exc}") from None
    try:
        model.load_state_dict(state_dict)
    except RuntimeError as exc:
        raise ConfigError(f"checkpoint {str(path)!r}: its parameters do not fit model {config.model.name!r}: "
                          f"{exc}") from None
    return model.eval(), info


@dataclass(frozen=True)
class TrainedPolicy:
    """A checkpoint's policy, rebuilt as ``fastrl eval`` plays it; ``fastrl.load_policy`` returns its model."""

    model: Any  # torch.nn.Module in eval mode, the checkpoint's parameters loaded
    env_info: Any  # the checkpoint's env: observation shape and dtype, number of actions
    config: Config  # the checkpoint's own config
    checkpoint: dict
    path: Path  # the checkpoint file
    params: str  # "model" (one learner), "average" or "learner-<i>"


def load_trained(target: str | Path, params: str | int = "auto") -> TrainedPolicy:
    """Resolve ``target`` and ``params`` as ``evaluate`` does and rebuild that checkpoint's policy.

    Raises ``ConfigError`` for bad input (no such path or checkpoint, unknown ``params``, a file
    that is not a fastrl checkpoint, an env or model that no longer resolves here).
    """
    path, which = resolve_checkpoint(target, params)
    checkpoint, config, which = _load(path, which)
    model, info = _policy(config, checkpoint["model"], path)
    return TrainedPolicy(model, info, config, checkpoint, path, which)


def evaluate(
    target: str | Path,
    episodes: int = 10,
    params: str | int = "auto",
    seed: int = 0,
    greedy: bool = False,
    max_steps: int | None = None,
    video: str | Path | None = None,
) -> dict:
    """Play ``episodes`` episodes with a trained policy; returns the scores.

    ``target``: a run directory, its ``checkpoints`` folder or a checkpoint file. ``params``:
    ``"auto"`` (the target's checkpoint), ``"average"`` (a gala run's averaged parameters) or
    ``"learner-<i>"``/``"<i>"``/``i`` (gala learner i's). Actions are sampled from the policy's softmax
    (as in training) or, with ``greedy``, its argmax (a Gaussian's mean, for Box actions). ``max_steps`` cuts an episode after that
    many agent steps (counted in ``truncated``). ``video``: a ``.mp4``/``.gif`` path to record
    the episodes into (Atari: the emulator's colour screen; other envs: ``render_mode="rgb_array"``);
    it needs the ``fastrl[video]`` extra; the result then also holds ``video`` and ``video_frames``.

    Returns ``{"checkpoint", "params", "env_id", "frames", "episodes", "greedy", "seed",
    "return_mean", "return_std", "return_min", "return_max", "length_mean", "truncated",
    "returns", "lengths"}``. Raises ``ConfigError`` for bad input.
    """
    import torch

    _check(episodes, seed, greedy, max_steps)
    if video is not None:
        from fastrl.video import check_video_path

        video = check_video_path(video)
    path, which = resolve_checkpoint(target, params)
    checkpoint, config, which = _load(path, which)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model, info = _policy(config, checkpoint["model"], path)
        recorder = None
        env = _make_env(config, video is not None)
        try:
            if video is not None:
                from fastrl.video import Recorder

                recorder = Recorder(video, env)
            returns, lengths, truncated = _play(env, model, info, episodes, seed, greedy, max_steps, recorder)
        finally:
            if recorder is not None:
                recorder.close()
            env.close()
    finally:
        torch.set_num_threads(threads)
    returns_a = np.asarray(returns, np.float64)
    recorded = {} if recorder is None else {"video": str(video), "video_frames": recorder.frames}
    return {
        "checkpoint": str(path),
        "params": which,
        "env_id": config.env.id,
        "frames": checkpoint.get("frames"),
        "episodes": episodes,
        "greedy": greedy,
        "seed": seed,
        "return_mean": float(returns_a.mean()),
        "return_std": float(returns_a.std()),
        "return_min": float(returns_a.min()),
        "return_max": float(returns_a.max()),
        "length_mean": float(np.mean(lengths)),
        "truncated": truncated,
        "returns": returns,
        "lengths": lengths,
        **recorded,
    }


def _make_env(config: Config, rendering: bool):
    """The run's env; to record a video, a non-Atari env is made with ``render_mode="rgb_array"``."""
    from fastrl.envs import make_env

    if not rendering:
        return make_env(config.env)
    from fastrl.envs.atari import is_atari_id
    from fastrl.video import video_env_config

    env_config = video_env_config(config.env, is_atari_id(config.env.id))
    try:
        return make_env(env_config)
    except TypeError as exc:  # a factory that takes no render_mode
        raise ConfigError(f"env {config.env.id!r} cannot be made with render_mode='rgb_array' to record a video: "
                          f"{exc}") from None


def _play(env, model, info, episodes: int, seed: int, greedy: bool, max_steps: int | None, record=None):
    """``record()``, when given, is called after every reset and every step (a video's frames)."""
    import torch

    from fastrl.models.distributions import distribution_for
    from fastrl.models.recurrent import hidden_size

    distribution = distribution_for(info.action)  # as the actors sample, from one uniform per action dimension
    reset_stream, action_stream = np.random.SeedSequence(seed).spawn(2)
    reset_rng, action_rng = np.random.default_rng(reset_stream), np.random.default_rng(action_stream)
    obs = np.zeros((2, *info.obs_shape), info.obs_dtype)  # current and next: step(action, prev, out)
    batch = torch.from_numpy(obs)
    recurrent = hidden_size(model)  # a recurrent policy carries its state through the episode, from zeros
    limit = math.inf if max_steps is None else max_steps
    returns: list[float] = []
    lengths: list[int] = []
    truncated = 0
    with torch.inference_mode():
        for _ in range(episodes):
            env.reset(int(reset_rng.integers(RESET_SEED_BOUND)), obs[0])
            if record is not None:
                record()
            current, total, length, over = 0, 0.0, 0, False
            hidden = torch.zeros((1, recurrent))
            while not over and length < limit:
                if recurrent:
                    head, _, hidden = model(batch[current : current + 1], hidden)
                else:
                    head, _ = model(batch[current : current + 1])
                action = _action(distribution, head, greedy, action_rng)
                _, raw, _, over = env.step(action, obs[current], obs[1 - current])
                if record is not None:
                    record()
                current = 1 - current
                total += float(raw)
                length += 1
            truncated += not over
            returns.append(total)
            lengths.append(length)
    return returns, lengths, truncated


def _action(distribution, head, greedy: bool, rng: np.random.Generator):
    """One row's action as the env adapter takes it: an int (Discrete) or a flat array (MultiDiscrete, Box)."""
    spec = distribution.spec
    if greedy:
        chosen = distribution.greedy(head.float())[0].numpy()
    else:
        u = np.array([rng.random()]) if spec.slot_shape == () else rng.random((1, spec.dims))
        chosen = distribution.sample(head.float().numpy(), u)[0][0]
    return int(chosen) if spec.slot_shape == () else np.asarray(chosen, spec.slot_dtype)
