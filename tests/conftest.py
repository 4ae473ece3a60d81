import contextlib
import os
import sys
import time

import pytest

from tests.helpers.runs import live_children, own_segments

# Every process the suite starts (the command, fork servers, torchrun's ranks) compiled fastrl's sources anew
# where the environment forbids bytecode files (PYTHONDONTWRITEBYTECODE=1): written once here, read after.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


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
