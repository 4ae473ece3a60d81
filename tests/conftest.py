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
