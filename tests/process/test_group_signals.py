"""Signals as schedulers and terminals send them: to the run's whole process group, on the real command.

SIGTERM to the group is what Slurm, systemd, Kubernetes, ``docker stop`` and torchrun send; SIGHUP to
the group is a dropped ssh session (the shell forwards the terminal's hangup to its jobs, and the
terminal is gone). Each still stops the run at a rollout barrier with an exact checkpoint; when no
barrier can come, the learner's current state is saved at once, before the scheduler's SIGKILL.
Also: a signal while the run is being set up, and workers a killed main process leaves behind.
"""

import json
import os
import pty
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import fastrl
from fastrl.buffers.arena import SHM_DIR, list_segments, segment_owner_pid
from fastrl.runs.checkpoint import load_checkpoint
from tests.helpers.leftovers import process_stats
from tests.helpers.runs import (
    assert_cleaned_up,
    cartpole,
    cmdline,
    fork_servers,
    live_children,
    pid_alive,
    wait_for_pids,
)

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

ROOT = Path(__file__).resolve().parents[2]
SLOW_CARTPOLE = [  # long enough to be stopped mid-run
    "--set",
    "env.id='CartPole-v1'",
    "--set",
    "engine.envs=8",
    "--set",
    "engine.rollout=5",
    "--set",
    "model.name='mlp'",
    "--set",
    "run.total_frames=8000",
    "--set",
    "engine.step_delay_s=0.004",
    "--set",
    "run.progress=false",
    "--set",
    "engine.micro_batch=16",
    "--set",
    "run.target_return=inf",  # not the default job's Pong target of 18
]


def _start(run_dir, *args, **popen) -> subprocess.Popen:
    """The command in a process group of its own, as a scheduler or a login shell starts a job."""
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen(
        [sys.executable, "-m", "fastrl.cli", "train", "--run-dir", str(run_dir), *args],
        cwd=ROOT,
        text=True,
        start_new_session=True,
        **popen,
    )


def _group(pgid: int, zombies: bool = False) -> list[int]:
    """Processes of the process group ``pgid`` (the command, its fork server, its workers): the live ones, and
    with ``zombies`` those that ended and were never reaped."""
    return [
        pid
        for pid, fields in process_stats().items()
        if int(fields[2]) == pgid and (zombies or fields[0] != "Z")
    ]


def _assert_gone(proc: subprocess.Popen, at_once: bool = True) -> None:
    """Nothing of the run in the process table: at once where the command itself returned (it reaps all it
    started before it does), zombies too; within 5 s of its SIGKILL, when its workers see it gone."""
    if at_once:
        assert not _group(proc.pid, zombies=True), f"the command returned before these were gone: {_states(proc)}"
    deadline = time.monotonic() + 5
    while _group(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _group(proc.pid), f"processes of the run still alive: {_group(proc.pid)}"
    assert not [n for n in list_segments() if segment_owner_pid(n) == proc.pid], "the run left shared memory"


def _states(proc: subprocess.Popen) -> list[str]:
    out = []
    for pid in _group(proc.pid, zombies=True):
        try:
            out.append(
                f"{pid} {Path(f'/proc/{pid}/stat').read_text().split(')')[-1].split()[0]} "
                f"{Path(f'/proc/{pid}/cmdline').read_bytes()[:80]!r}"
            )
        except OSError:
            pass
    return out


@pytest.mark.slow  # the default run checks the same table at once after SIGTERM (the same way out of the command)
def test_the_command_returns_only_once_every_process_it_started_is_gone(tmp_path):
    """A script that starts the next run at once, a scheduler that counts the job done, a check for leftovers:
    each looks at the process table the moment ``fastrl train`` exits."""
    proc = _start(
        tmp_path / "run",
        "--set",
        "env.id='CartPole-v1'",
        "--set",
        "run.total_frames=2000",
        "--set",
        "run.progress=false",
        "--set",
        "engine.envs=4",
    )
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    _assert_gone(proc)


@pytest.mark.parametrize("mode", [pytest.param("sync", marks=pytest.mark.slow), "hts"])
def test_sigterm_to_the_process_group_stops_at_a_barrier(tmp_path, mode):
    run_dir = tmp_path / "run"
    proc = _start(run_dir, *SLOW_CARTPOLE, "--set", f"engine.mode='{mode}'")
    pids = wait_for_pids(run_dir)
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGTERM)  # the command, its fork server and every worker at once
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "fastrl: SIGTERM received: the run stopped at a rollout barrier (resuming continues exactly)" in err
    _assert_gone(proc)
    checkpoint = assert_cleaned_up(run_dir, pids)
    assert checkpoint["exact"] and 0 < checkpoint["frames"] < 8000, (checkpoint["kind"], checkpoint["frames"])
    _resume_one_rollout(run_dir, checkpoint)


def _resume_one_rollout(run_dir, checkpoint: dict) -> None:
    more = checkpoint["frames"] + 40  # one rollout of 8 envs x 5 steps
    summary = fastrl.train(
        resume=run_dir, overrides=["engine.serial=true", "engine.step_delay_s=0", f"run.total_frames={more}"]
    )
    assert summary["frames"] == more


@pytest.mark.slow  # seconds of a real run: the default run keeps one test of each fault
def test_a_dropped_terminal_stops_the_run_with_its_checkpoint(tmp_path):
    """The run writes to a terminal that goes away: its shell's SIGHUP reaches every process, every later
    write to the terminal fails (EIO), and the run still ends cleanly with an exact checkpoint."""
    run_dir = tmp_path / "run"
    master, slave = pty.openpty()
    proc = _start(run_dir, *SLOW_CARTPOLE, "--set", "run.progress=true", stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    pids = wait_for_pids(run_dir)
    time.sleep(0.5)
    os.close(master)  # the terminal is gone: writes to it fail from here on
    os.killpg(proc.pid, signal.SIGHUP)  # what the session's shell does on the hangup
    assert proc.wait(timeout=60) == 128 + signal.SIGHUP
    _assert_gone(proc)
    checkpoint = assert_cleaned_up(run_dir, pids)
    assert checkpoint["exact"] and json.loads((run_dir / "summary.json").read_text())["status"] == "interrupted"
    _resume_one_rollout(run_dir, checkpoint)


@pytest.mark.slow
def test_when_no_barrier_comes_the_learner_saved_first(tmp_path):
    """An env hangs, so the barrier never comes; the scheduler's SIGKILL follows its SIGTERM. The learner's
    state, saved as soon as the signal came, is there to resume from."""
    run_dir = tmp_path / "run"
    proc = _start(
        run_dir,
        *SLOW_CARTPOLE,
        "--set",
        "env.id='tests.helpers.faulty_envs:cartpole'",
        "--set",
        "env.kwargs={fault='hang', at=30}",
    )
    wait_for_pids(run_dir)
    time.sleep(1.0)  # the env hangs by now (its 30th step)
    os.killpg(proc.pid, signal.SIGTERM)
    time.sleep(1.5)  # a grace far shorter than any scheduler's
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    leaked = [n for n in list_segments() if segment_owner_pid(n) == proc.pid]
    checkpoint = load_checkpoint(run_dir)
    assert checkpoint["kind"] == "stop" and not checkpoint["exact"] and checkpoint["frames"] > 0
    _resume_one_rollout(run_dir, checkpoint)  # each resumed env takes 5 steps, far from its hang at 30
    assert not set(leaked) & set(list_segments()), "the next run did not sweep what the SIGKILL left"


@pytest.mark.slow  # seconds of a real run: the default run keeps one test of each fault
def test_a_signal_while_the_run_is_set_up_leaves_no_segment(tmp_path):
    run_dir = tmp_path / "run"
    proc = _start(run_dir, *SLOW_CARTPOLE)
    while not [n for n in list_segments() if segment_owner_pid(n) == proc.pid]:  # the segment exists from here
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.0005)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "fastrl: SIGTERM received: the run stopped" in err and "shared memory freed" in err, err
    _assert_gone(proc)


@pytest.mark.slow
def test_workers_do_not_outlive_a_killed_main_process_even_blocked_in_c(tmp_path):
    run_dir = tmp_path / "run"
    proc = _start(
        run_dir,
        *SLOW_CARTPOLE,
        "--set",
        "env.id='tests.helpers.faulty_envs:cartpole'",
        "--set",
        "env.kwargs={fault='spin_in_c', at=30}",
        "--set",
        "engine.executors=1",
        "--set",
        "engine.actors=1",
        "--set",
        "engine.inline_actors=false",
    )
    pids = wait_for_pids(run_dir)
    time.sleep(1.0)  # the executor spins in C by now, the GIL held: no signal handler of its own can run
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    _assert_gone(proc, at_once=False)  # nothing of a SIGKILLed process runs: its workers see it gone
    assert_cleaned_up(run_dir, pids)  # the learner still saved on its way out


def test_cleanup_kills_what_a_dead_run_left_running(tmp_path):
    """A process that maps a dead run's segment and spins in C, as a worker left behind does."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    segment = Path(SHM_DIR) / f"fastrl_{dead.pid}_0123abcd_run"
    script = (
        f"import mmap, os, re; fd = os.open({str(segment)!r}, os.O_RDWR | os.O_CREAT, 0o600); "
        "os.ftruncate(fd, 4096); m = mmap.mmap(fd, 4096); print('mapped', flush=True); "
        "re.match(r'(a+)+$', 'a' * 64 + 'b')"
    )
    leftover = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert leftover.stdout is not None and leftover.stdout.readline().strip() == "mapped"
        result = subprocess.run(
            [sys.executable, "-m", "fastrl.cli", "cleanup"], cwd=ROOT, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, result.stderr
        assert f"  pid {leftover.pid}  (mapped {segment.name})" in result.stdout, result.stdout
        assert leftover.wait(timeout=5) == -signal.SIGKILL
        assert not segment.exists()
    finally:
        if pid_alive(leftover.pid):
            leftover.kill()
        segment.unlink(missing_ok=True)


def test_train_keeps_only_its_fork_server_for_the_next_run_and_shutdown_reaps_it(tmp_path):
    """In a sweep or a notebook the fork server and multiprocessing's resource tracker stay for the next run
    (which then starts in ~0.1 s); no worker does. ``fastrl.shutdown()`` (also run at the interpreter's exit)
    ends and reaps both, and a later run starts them again."""
    config, base = cartpole(tmp_path)
    fastrl.train(config, base, run_dir=tmp_path / "first")
    assert not live_children()
    kept = _all_children()
    assert len(kept) <= 2 and set(fork_servers()) <= set(kept), [cmdline(pid) for pid in kept]
    fastrl.shutdown()
    assert not set(kept) & set(_all_children()), "shutdown returned before the helpers were gone and reaped"
    assert fastrl.train(config, base, run_dir=tmp_path / "second")["status"] == "complete"


def _all_children() -> list[int]:
    """This process's children, zombies included."""
    out = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                if entry.isdigit() and int(f.read().rsplit(")", 1)[1].split()[1]) == os.getpid():
                    out.append(int(entry))
        except (OSError, ValueError):
            continue
    return out
