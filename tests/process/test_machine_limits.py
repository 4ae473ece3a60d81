"""The machine's memory limits: an address-space limit (``ulimit -v``) too small for the run and a cgroup memory
limit below what it needs are refused before anything starts, naming the limit and what to set, with nothing left;
a worker the OOM killer ends (SIGKILL under a cgroup limit) stops the run cleanly with the limit named
(``fastrl.process.machine_limits``). /dev/shm too small for the segment: tests/buffers/test_shm_space.py."""
import resource
import subprocess
import sys
from pathlib import Path

import pytest

import fastrl
import fastrl.process.machine_limits as limits
from fastrl.config import ConfigError
from fastrl.process.faults import RunFailed
from fastrl.process.machine_limits import CgroupLimit, cgroup_memory_limit, check_cgroup_memory, death_note
from tests.helpers.runs import assert_cleaned_up, cartpole, own_segments

ROOT = Path(__file__).resolve().parents[2]
MIB = 2**20


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.unit
def test_cgroup_v2_limits_are_read_from_the_groups_own_memory_max(tmp_path):
    membership = _write(tmp_path / "cgroup", "0::/job/run\n")
    _write(tmp_path / "fs" / "job" / "run" / "memory.max", "1073741824\n")
    limit = cgroup_memory_limit(tmp_path / "fs", membership)
    assert limit == CgroupLimit(2**30, tmp_path / "fs/job/run/memory.max", tmp_path / "fs/job/run/memory.events")
    _write(tmp_path / "fs" / "job" / "run" / "memory.max", "max\n")
    assert cgroup_memory_limit(tmp_path / "fs", membership) is None


@pytest.mark.unit
def test_cgroup_v1_limits_are_read_and_its_no_limit_value_is_none(tmp_path):
    membership = _write(tmp_path / "cgroup", "5:cpuset:/\n4:memory:/docker/abc\n0::/\n")
    _write(tmp_path / "fs" / "memory" / "memory.limit_in_bytes", "536870912\n")  # a container sees its own as root
    limit = cgroup_memory_limit(tmp_path / "fs", membership)
    assert limit is not None and limit.nbytes == 512 * MIB and limit.path.name == "memory.limit_in_bytes"
    _write(tmp_path / "fs" / "memory" / "memory.limit_in_bytes", "9223372036854771712\n")
    assert cgroup_memory_limit(tmp_path / "fs", membership) is None
    assert cgroup_memory_limit(tmp_path / "none", tmp_path / "missing") is None


@pytest.mark.unit
def test_a_cgroup_limit_below_the_runs_floor_is_refused_naming_it_and_what_to_set(tmp_path):
    limit = CgroupLimit(400 * MIB, tmp_path / "memory.max", None)
    with pytest.raises(ConfigError) as refused:
        check_cgroup_memory(100 * MIB, processes=5, limit=limit)
    message = str(refused.value)
    assert f"the cgroup memory limit ({tmp_path / 'memory.max'}) is 400 MiB" in message
    assert "its shared memory 100 MiB" in message and "engine.envs" in message and "docker --memory" in message
    check_cgroup_memory(100 * MIB, processes=5, limit=CgroupLimit(4096 * MIB, tmp_path / "memory.max", None))


@pytest.mark.unit
def test_a_sigkilled_workers_message_names_the_cgroup_limit_and_the_kernels_oom_kills(tmp_path):
    events = _write(tmp_path / "memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    note = death_note(CgroupLimit(512 * MIB, tmp_path / "memory.max", events))
    assert "cgroup memory limit of 512 MiB" in note and "the kernel counts 1 OOM kill(s)" in note
    assert death_note(CgroupLimit(512 * MIB, tmp_path / "memory.max", None)).startswith(" (the run is under")


def _train_under_ulimit(tmp_path, kib: int) -> subprocess.CompletedProcess:
    def limited():
        resource.setrlimit(resource.RLIMIT_AS, (kib * 1024, resource.RLIM_INFINITY))

    return subprocess.run([sys.executable, "-m", "fastrl.cli", "train", "cartpole_sync", "--run-dir",
                           str(tmp_path / "run"), "--set", "run.total_frames=2000", "--set", "run.progress=false"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, preexec_fn=limited,
                          start_new_session=True)


@pytest.mark.engine
@pytest.mark.parametrize("kib, says", [
    (800_000, "needs ~1024 MiB of address space to import torch alone"),  # it died of a MemoryError or SIGSEGV
    (1_200_000, "each of the run's processes maps"),
])
def test_an_address_space_limit_too_small_is_refused_before_anything_starts(tmp_path, kib, says):
    done = _train_under_ulimit(tmp_path, kib)
    assert done.returncode == 2, done.stderr[-3000:]
    assert f"fastrl: bad config: the address-space limit (ulimit -v) is {kib // 1024} MiB" in done.stderr
    assert says in done.stderr and "ulimit -v unlimited" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.engine
@pytest.mark.slow  # two commands, one a whole run; the refusals above stay in the default run
def test_the_advised_address_space_limit_runs(tmp_path):
    refused = _train_under_ulimit(tmp_path, 1_200_000)
    advised = int(refused.stderr.split("(ulimit -v ")[1].split(")")[0])
    done = _train_under_ulimit(tmp_path, advised)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.engine
def test_a_cgroup_limit_too_small_is_refused_before_anything_starts(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "cgroup_memory_limit", lambda: CgroupLimit(256 * MIB, tmp_path / "memory.max", None))
    config, base = cartpole(tmp_path)
    with pytest.raises(ConfigError, match="the cgroup memory limit .* is 256 MiB"):
        fastrl.train(config, base, run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists() and not own_segments()


@pytest.mark.engine
def test_a_worker_the_oom_killer_ends_stops_the_run_cleanly_with_the_limit_named(tmp_path, monkeypatch):
    events = _write(tmp_path / "memory.events", "oom 1\noom_kill 1\n")
    monkeypatch.setattr(limits, "cgroup_memory_limit",
                        lambda: CgroupLimit(64 * 2**30, tmp_path / "memory.max", events))
    config, base = cartpole(tmp_path, "env.id='tests.helpers.faulty_envs:cartpole'",
                            "env.kwargs={fault='sigkill', at=40}", "run.total_frames=4000")
    with pytest.raises(RunFailed) as failed:
        fastrl.train(config, base, run_dir=tmp_path / "run")
    message = str(failed.value)
    assert "was killed by SIGKILL" in message and "cgroup memory limit of 65536 MiB" in message, message
    assert "the kernel counts 1 OOM kill(s)" in message
    assert_cleaned_up(tmp_path / "run")
