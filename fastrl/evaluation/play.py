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
frame after each reset and each agent step (``fastrl.evaluation.video``).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from fastrl.config import Config, ConfigError
from fastrl.evaluation.targets import load_checkpoint_of, resolve_checkpoint
from fastrl.evaluation.trained_policy import rebuild_policy

RESET_SEED_BOUND = 2**31 - 1  # as the executor draws them


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


def evaluate(
    target: str | Path,
    episodes: int = 10,
    params: str | int = "auto",
    seed: int = 0,
    greedy: bool = False,
    max_steps: int | None = None,
    video: str | Path | None = None,
    trust_code: bool = False,
    env_id: str | None = None,
) -> dict:
    """Play ``episodes`` episodes with a trained policy; returns the scores.

    ``target``: a run directory, its ``checkpoints`` folder or a checkpoint file. ``params``:
    ``"auto"`` (the target's checkpoint), ``"average"`` (a gala run's averaged parameters) or
    ``"learner-<i>"``/``"<i>"``/``i`` (gala learner i's) or ``"policy-<name>"`` (a named policy of
    ``multiagent.policies``). Actions are sampled from the policy's softmax
    (as in training) or, with ``greedy``, its argmax (a Gaussian's mean, for Box actions). ``max_steps``
    cuts an episode after that many agent steps (counted in ``truncated``). ``video``: a
    ``.mp4``/``.gif`` path to record the episodes into (Atari: the emulator's colour screen; other envs:
    ``render_mode="rgb_array"``); it needs the ``fastrl-engine[video]`` extra; the result then also holds
    ``video`` and ``video_frames``. ``trust_code``: import and call a ``module:factory`` env or model the
    checkpoint's config names (refused otherwise: the checkpoint may be someone else's). ``env_id``: play
    on another env, made with the run's other env settings (``env.atari``...), whose rows are the trained
    env's (the same observation shape and dtype, the same actions): a policy trained by self-play on
    ``pettingzoo.atari:pong_v3`` played as the one player of ``PongNoFrameskip-v4``; refused where they differ.

    Returns ``{"checkpoint", "params", "env_id", "frames", "episodes", "greedy", "seed",
    "return_mean", "return_std", "return_min", "return_max", "length_mean", "truncated",
    "returns", "lengths"}``. Raises ``ConfigError`` for bad input.
    """
    import torch

    _check(episodes, seed, greedy, max_steps)
    if video is not None:
        from fastrl.evaluation.video import check_video_path

        video = check_video_path(video)
    path, which = resolve_checkpoint(target, params)
    checkpoint, config, which = load_checkpoint_of(path, which, trust_code)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model, info = rebuild_policy(config, checkpoint["model"], path)
        recorder = None
        if env_id is not None:
            config = _on_env(config, env_id)
        env = _make_env(config, video is not None)
        if env_id is not None:
            _check_same_rows(env, info, env_id, path)
        try:
            if video is not None:
                from fastrl.evaluation.video import Recorder

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
        "env_id": config.env.id,  # the env played (env_id where given)
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


def _on_env(config: Config, env_id: str) -> Config:
    """The run's config with ``env.id = env_id`` (its own kwargs and backend dropped: they were the other env's)."""
    import dataclasses

    if not isinstance(env_id, str) or not env_id.strip():
        raise ConfigError(f"env_id = {env_id!r}: expected an env id such as 'PongNoFrameskip-v4'")
    env = dataclasses.replace(config.env, id=env_id, kwargs={}, backend="auto")
    return dataclasses.replace(config, env=env)


def _check_same_rows(env, info, env_id: str, path: Path) -> None:
    """The other env must give the trained policy the rows it learned from and take its actions."""
    trained = (tuple(info.obs_shape), np.dtype(info.obs_dtype).name, info.action.head_size)
    here = (tuple(env.obs_shape), np.dtype(env.obs_dtype).name, env.action_spec.head_size)
    if trained != here or getattr(env, "agents", 1) != 1:
        env.close()
        raise ConfigError(
            f"--env {env_id!r}: its rows (observation {here[0]} {here[1]}, {here[2]} action columns) are not "
            f"those {str(path)!r} trained on ({trained[0]} {trained[1]}, {trained[2]}), or it has several agents"
        )


def _make_env(config: Config, rendering: bool):
    """The run's env; to record a video, a non-Atari env is made with ``render_mode="rgb_array"``."""
    from fastrl.envs import make_env

    if not rendering:
        return make_env(config.env)
    from fastrl.envs.atari import is_atari_id
    from fastrl.evaluation.video import video_env_config

    env_config = video_env_config(config.env, is_atari_id(config.env.id))
    try:
        return make_env(env_config)
    except TypeError as exc:  # a factory that takes no render_mode
        raise ConfigError(
            f"env {config.env.id!r} cannot be made with render_mode='rgb_array' to record a video: {exc}"
        ) from None


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
