"""Checkpoints: a torch.save'd dict written atomically (temp file, fsync, rename)."""
from __future__ import annotations

import os
from pathlib import Path

import torch

LATEST = "latest.pt"


def save_checkpoint(directory: str | Path, state: dict) -> Path:
    """Write ``state`` as ``directory/latest.pt`` so that a crash mid-write never leaves a torn file."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / LATEST
    tmp = directory / f".{LATEST}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, final)
    return final


def load_checkpoint(path: str | Path) -> dict:
    path = Path(path)
    if path.is_dir():
        path = path / "checkpoints" / LATEST
    return torch.load(path, map_location="cpu", weights_only=False)
