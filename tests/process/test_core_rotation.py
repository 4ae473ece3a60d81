"""Executors moving between CPUs (engine.core_rotation_s): where each one runs, period by period."""
import os

import pytest

from fastrl.process.core_rotation import CoreRotation

pytestmark = [pytest.mark.unit,
              pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux CPU affinity")]


@pytest.fixture
def allowed_cpus():
    cpus = os.sched_getaffinity(0)
    yield sorted(cpus)
    os.sched_setaffinity(0, cpus)  # the test process gets all its CPUs back


def test_executors_take_turns_on_every_allowed_cpu_one_per_cpu(allowed_cpus):
    if len(allowed_cpus) < 2:
        pytest.skip("needs two CPUs")
    n = len(allowed_cpus)
    seen = {index: [] for index in range(n)}
    rotations = [CoreRotation(index, 0.1) for index in range(n)]  # built at start, as in each executor
    for period in range(2 * n):
        now = period * 0.1 + 0.05
        for index, rotation in enumerate(rotations):
            rotation.tick(now)
            (cpu,) = os.sched_getaffinity(0)
            seen[index].append(cpu)
        assert sorted(seen[index][-1] for index in range(n)) == allowed_cpus  # one executor per CPU
    for index in range(n):
        assert sorted(set(seen[index])) == allowed_cpus  # each one ran on every CPU
        assert seen[index][0] != seen[index][1]  # and moved when the period changed


def test_moves_only_when_the_period_changes(allowed_cpus):
    if len(allowed_cpus) < 2:
        pytest.skip("needs two CPUs")
    rotation = CoreRotation(0, 1.0)
    rotation.tick(10.2)
    first = os.sched_getaffinity(0)
    os.sched_setaffinity(0, set(allowed_cpus))  # were it to move again within the period, this would change
    rotation.tick(10.9)
    assert os.sched_getaffinity(0) == set(allowed_cpus) and len(first) == 1
    rotation.tick(11.0)
    assert len(os.sched_getaffinity(0)) == 1 and os.sched_getaffinity(0) != first


def test_off_by_default_and_with_one_cpu(allowed_cpus):
    CoreRotation(0, 0.0).tick(5.0)
    assert sorted(os.sched_getaffinity(0)) == allowed_cpus
    os.sched_setaffinity(0, {allowed_cpus[0]})
    rotation = CoreRotation(1, 0.1)  # a process allowed one CPU has nowhere to move
    rotation.tick(5.0)
    assert not rotation.enabled and os.sched_getaffinity(0) == {allowed_cpus[0]}
