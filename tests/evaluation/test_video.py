"""``fastrl eval --video``: one frame after every reset and step, at the env's own picture size."""
import json
import sys

import numpy as np
import pytest
import torch

import fastrl
from fastrl.cli import main
from fastrl.config import ConfigError

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

imageio = pytest.importorskip("imageio.v2")
pytest.importorskip("imageio_ffmpeg")
FP32 = "model.precision='fp32'"  # 'auto' is bf16 on CPUs with AMX, which the mlp and 'random' models do not take


def _random_checkpoint(run_dir, env_id: str):
    """A run directory whose checkpoint plays the uniform policy (no training needed to record it)."""
    config = fastrl.load_config(None, [f"env.id='{env_id}'", "model.name='random'", FP32])
    (run_dir / "checkpoints").mkdir(parents=True)
    torch.save({"config": config.to_dict(), "model": {"zero": torch.zeros(())}, "frames": 0},
               run_dir / "checkpoints" / "latest.pt")
    return run_dir


def _mp4(path):
    reader = imageio.get_reader(path, format="FFMPEG")
    try:
        return reader.count_frames(), reader.get_meta_data()["size"], reader.get_meta_data()["fps"], reader.get_data(0)
    finally:
        reader.close()


def test_cartpole_mp4_has_a_frame_per_reset_and_step(tmp_path):
    pytest.importorskip("pygame")
    run = _random_checkpoint(tmp_path / "run", "CartPole-v1")
    result = fastrl.evaluate(run, episodes=2, max_steps=30, video=tmp_path / "cartpole.mp4")
    expected = sum(result["lengths"]) + 2
    assert result["video_frames"] == expected and result["video"] == str(tmp_path / "cartpole.mp4")
    frames, size, fps, _ = _mp4(tmp_path / "cartpole.mp4")
    assert (frames, size, fps) == (expected, (600, 400), 50.0)  # gymnasium's CartPole picture, its render_fps
    assert result["returns"] == fastrl.evaluate(run, episodes=2, max_steps=30)["returns"]  # recording changes nothing


def test_pong_mp4_is_the_emulators_colour_screen(tmp_path):
    run = _random_checkpoint(tmp_path / "run", "PongNoFrameskip-v4")
    result = fastrl.evaluate(run, episodes=1, max_steps=25, video=tmp_path / "pong.mp4")
    frames, size, fps, first = _mp4(tmp_path / "pong.mp4")
    assert frames == result["video_frames"] == 26
    assert size == (160, 210) and fps == 15.0  # ALE's 160 x 210 screen; 60 Hz / frame skip 4
    assert np.abs(first[..., 0].astype(int) - first[..., 1]).max() > 50  # colour, not the gray observation


def test_cartpole_gif_from_the_cli(tmp_path, capsys):
    pytest.importorskip("pygame")
    from PIL import Image

    run = _random_checkpoint(tmp_path / "run", "CartPole-v1")
    gif = tmp_path / "cartpole.gif"
    assert main(["eval", str(run), "--episodes", "1", "--max-steps", "20", "--video", str(gif)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["video_frames"] == result["lengths"][0] + 1
    with Image.open(gif) as image:
        assert image.size == (600, 400)
        durations = []
        for i in range(image.n_frames):
            image.seek(i)
            durations.append(image.info["duration"])
    # Pillow merges identical consecutive frames into one longer frame: the total duration is exact
    assert sum(durations) == 20 * result["video_frames"]


def test_bad_video_input_is_refused_before_playing(tmp_path, monkeypatch, capsys):
    run = _random_checkpoint(tmp_path / "run", "CartPole-v1")
    with pytest.raises(ConfigError, match=r"\.mp4 or \.gif"):
        fastrl.evaluate(run, episodes=1, video=tmp_path / "x.avi")
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # as if the extra were not installed
    assert main(["eval", str(run), "--video", str(tmp_path / "x.mp4")]) == 2
    assert "pip install 'fastrl-engine[video]'" in capsys.readouterr().err
    assert not (tmp_path / "x.mp4").exists()
