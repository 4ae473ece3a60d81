import contextlib
import os
import sys
import time

import pytest

from tests.helpers.leftovers import Snapshot, become_subreaper, leftovers
from tests.helpers.runs import live_children, own_segments

# Every process the suite starts (the command, fork servers, torchrun's ranks) compiled fastrl's sources anew
# where the environment forbids bytecode files (PYTHONDONTWRITEBYTECODE=1): written once here, read after.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


@pytest.fixture(scope="session", autouse=True)
def machine_left_as_found():
    """The whole session (each xdist worker's) leaves no process it started (orphans included: this process is
    their subreaper), no `/dev/shm` segment and no ``sem.*`` file behind (tests/helpers/leftovers.py); a leftover
    fails the run as an error in the session's last teardown."""
    become_subreaper()
    before = Snapshot()
    yield
    api = sys.modules.get("fastrl.api")
    if api is not None:
        api.shutdown()  # the fork server the in-process runs keep
    left = leftovers(before)
    assert not left["processes"], f"the test session left processes running: {left['processes']}"
    assert not left["shm"], f"the test session left /dev/shm entries that no process holds: {left['shm']}"


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


@pytest.fixture
def in_process(capsys, monkeypatch):
    """The ``fastrl`` command's ``main`` in this process: its exit code, then ``.out`` and ``.err`` of that call.
    What a test of the command's answers needs, without a fresh interpreter's start (torch, a fork server: ~4 s);
    the process's fork server is kept for the next test (the command itself ends it before it returns). The real
    command's own start: test_cli.py::test_train_prints_the_summary_and_writes_the_run_dir, and .ci/wheel."""
    from fastrl import api, cli

    monkeypatch.setattr(api, "shutdown", lambda: None)

    class Command:
        out = err = ""

        def __call__(self, *args: str) -> int:
            code = cli.main(list(args))
            captured = capsys.readouterr()
            self.out, self.err = captured.out, captured.err
            return code

    return Command()


@pytest.fixture
def scoped_registries():
    """``scope(REGISTRY, ...)``: what this test registers in those registries (``fastrl.registry``) is forgotten
    after it."""
    with contextlib.ExitStack() as stack:
        yield lambda *registries: [stack.enter_context(registry.scoped()) for registry in registries]
