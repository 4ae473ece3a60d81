"""Episode videos for ``fastrl eval --video``: one frame per agent step, as the evaluation plays.

Atari: the emulator's RGB screen (ALE ``getScreenRGB``, 210 x 160) from the native adapter,
not the 84 x 84 gray observation, at 60 / frame_skip frames per second. Other envs: gymnasium's
``render_mode="rgb_array"`` (made with it), at the env's ``render_fps``.

imageio writes ``.mp4`` (libx264 through imageio-ffmpeg, whose wheel carries ffmpeg) and
``.gif`` (through Pillow; Pillow merges identical consecutive frames of a GIF into one longer
frame, so a GIF's frame count can be lower while its total duration stays exact). They are
the optional extra ``fastrl-engine[video]``; a missing one is a ``ConfigError`` that names it.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np

from fastrl.config import ConfigError, EnvConfig
from fastrl.errors import install_hint

SUFFIXES = (".mp4", ".gif")
ATARI_HZ = 60.0  # NTSC frames per second of the emulator
_EXTRA = f"{install_hint('video')} (imageio, imageio-ffmpeg, and pygame for the classic-control envs)"


def check_video_path(path: str | Path) -> Path:
    """A writable ``.mp4``/``.gif`` path and the packages to write it, before anything is played."""
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        raise ConfigError(f"video {str(path)!r}: write a {' or '.join(SUFFIXES)} file")
    if path.is_dir():
        raise ConfigError(f"video {str(path)!r} is a directory")
    needed = ["imageio"] + (["imageio_ffmpeg"] if path.suffix.lower() == ".mp4" else [])
    for module in needed:
        try:
            __import__(module)
        except ImportError:
            raise ConfigError(
                f"recording a video needs {module.replace('_', '-')}, which is not installed: {_EXTRA}"
            ) from None
    return path


def video_env_config(config: EnvConfig, atari: bool) -> EnvConfig:
    """The env config to record: non-Atari envs are made with ``render_mode="rgb_array"``."""
    if atari:
        return config
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")  # pygame's import banner would go to our stdout
    return dataclasses.replace(config, kwargs={**config.kwargs, "render_mode": "rgb_array"})


def frames_per_second(env) -> float:
    if hasattr(env, "screen_rgb"):
        return ATARI_HZ / env.frames_per_step
    return float(env.env.metadata.get("render_fps") or 30)


def frame_of(env) -> np.ndarray:
    """The env's current picture as an ``(H, W, 3)`` uint8 array."""
    if hasattr(env, "screen_rgb"):
        return env.screen_rgb()
    frame = env.env.render()
    if not isinstance(frame, np.ndarray) or frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype != np.uint8:
        what = type(frame).__name__ if not isinstance(frame, np.ndarray) else f"{frame.dtype} array {frame.shape}"
        raise ConfigError(
            f"env {env.env_id!r} rendered a {what}, not an RGB image: it must support "
            "render_mode='rgb_array' to be recorded"
        )
    return frame


class VideoWriter:
    """Frames appended one at a time into ``path``; ``close`` finishes the file."""

    def __init__(self, path: Path, fps: float):
        self.path, self.frames = path, 0
        self.gif = path.suffix.lower() == ".gif"
        path.parent.mkdir(parents=True, exist_ok=True)
        if self.gif:
            import imageio.v3 as iio

            self.writer = iio.imopen(path, "w", plugin="pillow", extension=".gif")
            self.duration_ms = round(1000.0 / fps)
        else:
            import imageio.v2 as imageio

            # macro_block_size 2: keep the picture's own size (210 x 160 for Atari), only odd sizes are padded
            self.writer = imageio.get_writer(
                path, format="FFMPEG", fps=fps, codec="libx264", quality=8, macro_block_size=2, ffmpeg_log_level="error"
            )

    def add(self, frame: np.ndarray) -> None:
        if self.gif:
            self.writer.write(frame, is_batch=False, duration=self.duration_ms, loop=0)
        else:
            self.writer.append_data(frame)
        self.frames += 1

    def close(self) -> None:
        self.writer.close()


class Recorder:
    """Grabs the env's picture after every reset and step (``evaluate``'s ``record`` hook)."""

    def __init__(self, path: Path, env):
        if not hasattr(env, "screen_rgb") and getattr(env.env, "render_mode", None) != "rgb_array":
            raise ConfigError(
                f"env {env.env_id!r} does not render with render_mode='rgb_array' "
                f"(its render modes: {env.env.metadata.get('render_modes', [])}): it cannot be recorded"
            )
        self.env = env
        self.writer = VideoWriter(path, frames_per_second(env))

    def __call__(self) -> None:
        self.writer.add(frame_of(self.env))

    @property
    def frames(self) -> int:
        return self.writer.frames

    def close(self) -> None:
        self.writer.close()
