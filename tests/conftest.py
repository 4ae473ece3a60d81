import multiprocessing
import os
import time

import pytest

from fastrl.buffers.arena import list_segments, segment_owner_pid


def _children(pid: int) -> list[int]:
    """Live (non-zombie) processes whose parent is ``pid``."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, ppid = fields[0], int(fields[1])
        if ppid == pid and state != "Z":
            out.append(int(entry))
    return out


def live_children() -> list[int]:
    multiprocessing.active_children()  # reap finished ones
    return [pid for pid in _children(os.getpid()) if _is_fastrl_worker(pid)]


def _is_fastrl_worker(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read()
    except OSError:
        return False
    # faster-fifo/multiprocessing helpers (resource tracker) are not run workers
    return b"multiprocessing.spawn" in cmd or b"fastrl" in cmd


def own_segments() -> list[str]:
    """Segments created by this test process (names carry the owner pid), not by other runs."""
    return [name for name in list_segments() if segment_owner_pid(name) == os.getpid()]


@pytest.fixture(autouse=True)
def no_leaks():
    """Every test must leave no shared-memory segment and no worker process behind."""
    before = set(own_segments())
    yield
    deadline = time.monotonic() + 5
    while live_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    leaked = set(own_segments()) - before
    assert not leaked, f"shared-memory segments left behind: {sorted(leaked)}"
    assert not live_children(), f"worker processes left alive: {live_children()}"


def cartpole(tmp_path, *overrides: str, mode: str = "sync") -> tuple[dict, list[str]]:
    """A small CartPole run config as (dict, overrides) for fastrl.train."""
    base = [
        "env.id='CartPole-v1'",
        f"engine.mode='{mode}'",
        "engine.envs=8",
        "engine.rollout=5",
        "run.total_frames=800",
        f"run.dir='{tmp_path}'",
        "run.progress=false",
        "run.log_interval_s=0.5",
        "model.name='mlp'",
        # the layout these tests were written for (an actor process to kill, stop or count);
        # "auto" has its own tests (test_process_layout.py)
        "engine.executors=1",
        "engine.actors=1",
        "engine.inline_actors=false",
    ]
    return {}, base + list(overrides)


def wait_for_pids(run_dir, timeout: float = 60.0) -> dict:
    """The run's pids.json (written once every worker is ready): {"main": pid, "workers": {name: pid}}."""
    import json

    path = run_dir / "pids.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            time.sleep(0.05)
    raise TimeoutError(f"{path} did not appear within {timeout}s")


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def assert_cleaned_up(run_dir, pids: dict | None = None) -> dict:
    """After a fault: every worker gone and a loadable checkpoint with the last good parameters; returns it."""
    import torch

    from fastrl.checkpoint import load_checkpoint

    for name, pid in ((pids or {}).get("workers") or {}).items():
        assert not pid_alive(pid), f"{name} (pid {pid}) is still alive"
    checkpoint = load_checkpoint(run_dir)
    assert checkpoint["model"], "the checkpoint holds no parameters"
    for key, tensor in checkpoint["model"].items():
        assert bool(torch.isfinite(tensor).all()), f"non-finite {key} in the checkpoint"
    return checkpoint
