"""``engine.keep_freed_memory``: a process that fixes glibc's malloc thresholds stops faulting in fresh pages
for every training step. Each case runs in its own interpreter: mallopt changes a process for good."""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap

import pytest

pytestmark = [
    pytest.mark.unit,
    pytest.mark.skipif(
        not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc", reason="glibc's malloc only"
    ),
]

# a conv step's activations and gradients (a few MB each), allocated and freed every step as a learner's are
_STEPS = textwrap.dedent(
    """
    import resource, sys, torch
    from fastrl.process.malloc import keep_freed_memory
    if sys.argv[1] == "keep":
        assert keep_freed_memory()
    torch.set_num_threads(2)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(4, 32, 8, 4), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(32 * 20 * 20, 64)
    )
    def step():
        net(torch.rand(64, 4, 84, 84)).square().mean().backward()
    for _ in range(3):
        step()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(5):
        step()
    print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 5)
    """
)


def _faults_a_step(mode: str) -> float:
    out = subprocess.run([sys.executable, "-c", _STEPS, mode], capture_output=True, text=True, timeout=120, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def test_kept_memory_ends_the_page_faults_of_each_step():
    default, kept = _faults_a_step("default"), _faults_a_step("keep")
    assert default > 500  # measured 1,850-3,060 a step: each 4-KiB page of the freed blocks faulted in again
    assert kept < 20  # measured 0


def test_the_key_is_on_by_default_and_a_bad_value_is_named():
    from fastrl.api import resolve_config
    from fastrl.config import ConfigError

    assert resolve_config("configs/cartpole_sync.toml", []).engine.keep_freed_memory is True
    off = resolve_config("configs/cartpole_sync.toml", ["engine.keep_freed_memory=false"])
    assert off.engine.keep_freed_memory is False
    with pytest.raises(ConfigError, match="engine.keep_freed_memory"):
        resolve_config("configs/cartpole_sync.toml", ["engine.keep_freed_memory='yes'"])
