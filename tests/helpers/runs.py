"""What the engine tests share: a small CartPole run's settings, and checks that a run left nothing behind."""

import multiprocessing
import os
import time

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
    """The run workers still alive: this process's own (spawned), and the fork server's children. The fork
    server itself (fastrl.process.fork_server) lives as long as this process, serving every run."""
    multiprocessing.active_children()  # reap finished ones
    servers = fork_servers()
    spawned = [pid for pid in _children(os.getpid()) if pid not in servers and _is_fastrl_worker(pid)]
    return spawned + [pid for server in servers for pid in _children(server)]


def fork_servers() -> list[int]:
    """This process's multiprocessing fork servers (fastrl.process.fork_server), alive."""
    return [pid for pid in _children(os.getpid()) if b"multiprocessing.forkserver" in cmdline(pid)]


def cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _is_fastrl_worker(pid: int) -> bool:
    # the arguments only: the interpreter's own path may name anything (a virtual environment in a folder called
    # fastrl, say); multiprocessing's helpers (the resource tracker) are not run workers
    args = b" ".join(cmdline(pid).split(b"\0")[1:])
    if b"multiprocessing.resource_tracker" in args:
        return False
    return b"multiprocessing.spawn" in args or b"fastrl" in args


def own_segments() -> list[str]:
    """Segments created by this test process (names carry the owner pid), not by other runs."""
    return [name for name in list_segments() if segment_owner_pid(name) == os.getpid()]


# The keys these tests were written against when the schema's defaults were HTS-RL's A2C (they are now the
# default job's: PPO at Atari settings); a test that wants PPO or normalisation says so after them.
A2C_DEFAULTS = [
    "engine.micro_batch=16",
    "algo.name='a2c'",
    "algo.lr=7e-4",
    "algo.optimizer='rmsprop'",
    "algo.lr_schedule='constant'",
    "algo.clip=0.2",
    "algo.value_clip=0.0",
    "algo.normalize_returns=false",
    "model.normalize_obs=false",
]


def cartpole(tmp_path, *overrides: str, mode: str = "sync") -> tuple[dict, list[str]]:
    """A small CartPole run config as (dict, overrides) for fastrl.train."""
    base = [
        *A2C_DEFAULTS,
        "env.id='CartPole-v1'",
        "run.target_return=inf",  # the default job's Pong target of 18 would end a CartPole run at once
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

    from fastrl.runs.checkpoint import load_checkpoint

    for name, pid in ((pids or {}).get("workers") or {}).items():
        assert not pid_alive(pid), f"{name} (pid {pid}) is still alive"
    checkpoint = load_checkpoint(run_dir)
    assert checkpoint["model"], "the checkpoint holds no parameters"
    for key, tensor in checkpoint["model"].items():
        assert bool(torch.isfinite(tensor).all()), f"non-finite {key} in the checkpoint"
    return checkpoint


def model_digest(run_dir) -> str:
    """A digest of the newest checkpoint's parameters: equal digests are the same bits."""
    import hashlib

    from fastrl.runs.checkpoint import load_checkpoint

    h = hashlib.sha256()
    for key, tensor in sorted(load_checkpoint(run_dir)["model"].items()):
        h.update(key.encode() + tensor.cpu().numpy().tobytes())
    return h.hexdigest()


def assert_a_group_backend_resumes_with_restarted_envs(run_dir, pong_overrides: list[str]) -> None:
    """A backend whose envs cannot be saved one by one (a C++ vector env): the learner's state is saved at the
    barrier as always, the envs restart with seeds of the restart, and the resumed run goes on."""
    import fastrl
    from fastrl.runs.checkpoint import load_checkpoint

    fastrl.train("configs/pong_hts.toml", [*pong_overrides, "run.total_frames=512", "engine.executors=1"],
                 run_dir=run_dir)
    assert load_checkpoint(run_dir)["frames"] == 512
    summary = fastrl.train(resume=run_dir, overrides=["run.total_frames=1024"])
    assert summary["status"] == "complete" and summary["frames"] == 1024


def layout_digests(tmp_path, config, overrides: list[str], layouts, frames: int) -> set[str]:
    """Train ``config`` once per (executors, env groups) layout to ``frames``: the set of the runs' parameter
    digests (one digest: every layout gave the same bits)."""
    import fastrl

    digests = set()
    for executors, groups in layouts:
        run_dir = tmp_path / f"x{executors}g{groups}"
        layout = [f"engine.executors={executors}", f"engine.env_groups={groups}"]
        summary = fastrl.train(config, [*overrides, *layout], run_dir=run_dir)
        assert summary["status"] == "complete" and summary["frames"] == frames, summary
        digests.add(model_digest(run_dir))
    return digests
