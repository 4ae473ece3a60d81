import time

import pytest

from tests.helpers.runs import live_children, own_segments


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
