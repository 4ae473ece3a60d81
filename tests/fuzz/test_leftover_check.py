"""The session fixture's check (tests/helpers/leftovers.py) can fail: it sees a semaphore file nobody holds, a child
left running and an orphan whose parent exited (re-parented to the session, its subreaper)."""

import os
import subprocess
import sys
import time

import pytest

from tests.helpers.leftovers import SHM, Snapshot, become_subreaper, leftovers

pytestmark = pytest.mark.unit


def test_a_semaphore_file_nobody_holds_is_a_leftover():
    before = Snapshot()
    name = f"sem.mp-leftover-check-{os.getpid()}"
    with open(os.path.join(SHM, name), "wb") as f:  # what sem_open leaves when its process and tracker are killed
        f.write(b"\0" * 32)
    try:
        assert leftovers(before, wait_s=0)["shm"] == [name]
    finally:
        os.unlink(os.path.join(SHM, name))
    assert leftovers(before, wait_s=0)["shm"] == []


def test_a_child_and_an_orphan_left_running_are_leftovers():
    assert become_subreaper()
    before = Snapshot()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    # a grandchild whose parent exits at once: an orphan, re-parented to this process rather than to init
    code = ("import subprocess, sys; print(subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], "
            "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)")
    spawner = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    orphan = int(spawner.stdout)
    try:
        left = {pid for pid, _ in leftovers(before, wait_s=0)["processes"]}
        assert left == {child.pid, orphan}
    finally:
        child.kill()
        child.wait()
        os.kill(orphan, 9)
        os.waitpid(orphan, 0)  # this process adopted it: it reaps it
    time.sleep(0.05)
    assert leftovers(before, wait_s=0)["processes"] == []
