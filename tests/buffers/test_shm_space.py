"""/dev/shm running out: the segment is reserved when it is made, so a run that starts never dies of SIGBUS;
what killed runs left there is swept before the space is checked; other users' leftovers are left alone.

The real tests run the command in a mount namespace of its own, with a tmpfs of a few MiB over /dev/shm
that no other process sees (``tests/helpers/disk.py``: root, or an unprivileged user namespace); where
neither is allowed they are skipped, and the sweep's rules are checked on this machine's /dev/shm.
"""
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import fastrl.buffers.arena as arena
from fastrl.buffers.arena import SHM_DIR, foreign_stale_segments, sweep_stale_segments
from tests.helpers.disk import private_mounts
from tests.helpers.runs import assert_cleaned_up, wait_for_pids

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

ROOT = Path(__file__).resolve().parents[2]
# a segment of ~11 MiB whose slots fill page by page as the run goes (8 envs x 20000 steps of CartPole)
LONG_ROLLOUT = ("--set env.id=\"'CartPole-v1'\" --set model.name=\"'mlp'\" --set engine.envs=8 "
                "--set engine.rollout=20000 --set run.total_frames=400000 --set run.progress=false "
                "--set reliability.shutdown_timeout_s=1")
PYTHON = shlex.quote(sys.executable)  # this interpreter, not whichever `python` the PATH finds first
TINY = ("--set env.id=\"'CartPole-v1'\" --set model.name=\"'mlp'\" --set engine.envs=4 --set engine.rollout=5 "
        "--set run.total_frames=40 --set run.progress=false --set engine.serial=true")


def _in_small_shm(script: str, size: str = "16m", uid: int | None = None) -> str:
    """Run ``script`` (sh) with a fresh tmpfs of ``size`` over /dev/shm; its stdout."""
    prefix = private_mounts()
    if prefix is None:
        pytest.skip("needs a mount namespace (root, or unprivileged user namespaces) to give /dev/shm a small tmpfs")
    owner = f",uid={uid},mode=1777" if uid is not None else ""
    done = subprocess.run([*prefix, "sh", "-c", f"mount -t tmpfs -o size={size}{owner} tmpfs /dev/shm && {script}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow
def test_a_run_keeps_its_shared_memory_when_dev_shm_fills_and_the_next_run_is_told(tmp_path):
    """Run A starts, then /dev/shm fills (a file written until ENOSPC) and run B starts: A goes on (its
    pages were reserved when its segment was made: no SIGBUS), B is refused before it starts."""
    a, b = tmp_path / "a", tmp_path / "b"
    out = _in_small_shm(f"""
{PYTHON} -m fastrl.cli train --run-dir {a} {LONG_ROLLOUT} > {a}.out 2> {a}.err & A=$!
until [ -f {a}/pids.json ] || ! kill -0 $A 2>/dev/null; do sleep 0.05; done
dd if=/dev/zero of=/dev/shm/filler bs=64k 2>/dev/null
{PYTHON} -m fastrl.cli train --run-dir {b} {LONG_ROLLOUT} > {b}.out 2> {b}.err; echo "B=$?"
sleep 2
kill -INT $A; wait $A; echo "A=$?"
rm /dev/shm/filler; echo "left:$(ls /dev/shm)"
""")
    b_err = (tmp_path / "b.err").read_text()
    assert "B=2" in out, b_err
    need = re.search(r"fastrl: bad config: the trajectory buffers need ([\d.]+) GiB of shared memory, but /dev/shm "
                     r"has 0.000 GiB free", b_err)
    assert need and f"running fastrl runs hold {need[1]} GiB of it" in b_err and "fastrl cleanup" in b_err, b_err
    a_err = (tmp_path / "a.err").read_text()
    assert "A=130" in out and "SIGBUS" not in a_err, a_err
    assert "fastrl: SIGINT received: the run stopped" in a_err
    assert_cleaned_up(a)
    assert "left:\n" in out, out


def test_dead_runs_filling_dev_shm_do_not_refuse_the_next_run(tmp_path):
    out = _in_small_shm(f"""
true & DEAD=$!; wait $DEAD
dd if=/dev/zero of=/dev/shm/fastrl_${{DEAD}}_deadbeef_run bs=1M count=15 2>/dev/null
{PYTHON} -m fastrl.cli train --run-dir {tmp_path / "run"} {TINY} > /dev/null 2> {tmp_path}/err; echo "rc=$?"
echo "left:$(ls /dev/shm)"
""")
    assert "rc=0" in out, (tmp_path / "err").read_text()
    assert "removed 1 shared-memory segments left by dead runs" in (tmp_path / "err").read_text()
    assert "left:\n" in out


@pytest.mark.slow  # seconds of a real run: the default run keeps one test of each fault
@pytest.mark.skipif(os.geteuid() != 0, reason="giving a segment to another uid needs root")
def test_another_users_dead_segment_is_left_alone_without_a_traceback(tmp_path):
    """A sticky /dev/shm owned by neither: this user may not unlink another's file there (PermissionError)."""
    out = _in_small_shm(f"""
true & DEAD=$!; wait $DEAD
SEGMENT=/dev/shm/fastrl_${{DEAD}}_0ther0wn_run; head -c 4096 /dev/zero > $SEGMENT; chown 65533:65533 $SEGMENT
setpriv --bounding-set -fowner {PYTHON} -m fastrl.cli cleanup > {tmp_path}/cleanup 2>&1; echo "cleanup=$?"
setpriv --bounding-set -fowner {PYTHON} -m fastrl.cli train --run-dir {tmp_path / "run"} {TINY} > /dev/null \
  2> {tmp_path}/err; echo "train=$?"
echo "left:$(ls /dev/shm)"
""", uid=65534)
    cleanup = (tmp_path / "cleanup").read_text()
    assert "cleanup=0" in out and "train=0" in out, cleanup + (tmp_path / "err").read_text()
    assert "alone: a dead run of uid 65533; only they or root can remove it" in cleanup
    assert "Traceback" not in cleanup + (tmp_path / "err").read_text()
    assert "_0ther0wn_run" in out.split("left:")[1]


def test_the_sweep_leaves_other_users_segments(monkeypatch):
    """The same rule on this machine's /dev/shm, the other user simulated: every file looks another uid's."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    segment = Path(SHM_DIR) / f"fastrl_{dead.pid}_0ther0wn_run"
    segment.write_bytes(b"\0" * 4096)
    try:
        monkeypatch.setattr(arena.os, "geteuid", lambda: os.getuid() + 1)
        assert segment.name not in [name for name, _ in sweep_stale_segments()] and segment.exists()
        assert (segment.name, 4096, os.getuid()) in foreign_stale_segments()
    finally:
        segment.unlink(missing_ok=True)


@pytest.mark.slow  # seconds of a real run: the default run keeps one test of each fault
def test_a_worker_killed_by_sigbus_is_reported_as_shared_memory_running_out(tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "fastrl.cli", "train", "--run-dir", str(run_dir),
                             *LONG_ROLLOUT.replace('"', "").split(), "--set", "engine.executors=1",
                             "--set", "engine.actors=1", "--set", "engine.inline_actors=false"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids = wait_for_pids(run_dir)
    os.kill(pids["workers"]["executor-0"], signal.SIGBUS)  # what the kernel sends at a page it cannot back
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert (f"executor-0 (pid {pids['workers']['executor-0']}) was killed by SIGBUS (shared memory ran out: "
            f"{SHM_DIR} has") in err and "fastrl cleanup frees what killed runs left there" in err
    assert_cleaned_up(run_dir, pids)
