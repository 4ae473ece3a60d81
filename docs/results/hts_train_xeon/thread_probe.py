"""Do a PPO update's bits depend on the learner's thread count? crafter_ppo, sync, 3 updates, learner_threads 1 vs 2."""

import glob
import subprocess
import sys
import tempfile

import torch


def run(threads):
    d = tempfile.mkdtemp()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "fastrl",
            "train",
            "configs/crafter_ppo.toml",
            "--run-dir",
            f"{d}/r",
            "--set",
            "run.total_frames=6144",
            "--set",
            "run.progress=false",
            "--set",
            "model.precision=fp32",
            "--set",
            f"engine.learner_threads={threads}",
        ],
        check=True,
        capture_output=True,
    )
    path = sorted(glob.glob(f"{d}/r/checkpoints/ckpt-*.pt"))[-1]
    return torch.load(path, map_location="cpu", weights_only=False)


def tensors(obj, prefix=""):
    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from tensors(v, f"{prefix}/{k}")


a, b = run(1), run(2)
ta, tb = dict(tensors(a)), dict(tensors(b))
diff = [k for k in ta if k in tb and ta[k].shape == tb[k].shape and not torch.equal(ta[k], tb[k])]
print(len(ta), "tensors;", len(diff), "differ:", diff[:8])
