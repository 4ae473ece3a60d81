"""Multiprocessing pitfalls: a user's env module is importable in every worker, the workers see the main
process's environment as the run starts (they are forked from a server started earlier), and the numba
kernels are compiled (cached) in the main process before any worker starts."""
import pytest

import fastrl
from tests.helpers.environment_env import VARIABLE
from tests.helpers.runs import cartpole, fork_servers

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks


def test_an_env_registered_by_a_users_module_works_in_every_child(tmp_path):
    """``module:EnvId``: spawned children start from nothing; the module is imported in each executor,
    so its gymnasium registration exists there too."""
    config, base = cartpole(tmp_path, "env.id='tests.helpers.faulty_envs:FaultyCartPole-v0'", "engine.executors=2",
                            "engine.actors=2", "run.total_frames=400")
    summary = fastrl.train(config, base, run_dir=tmp_path / "run")
    assert summary["status"] == "complete" and summary["frames"] == 400


def test_workers_see_the_environment_of_their_run_not_the_fork_servers(tmp_path, monkeypatch):
    """The fork server keeps the environment of the run that started it; each run's workers get the main
    process's as that run starts: an env reading a variable when it is made sees the second value."""
    config, base = cartpole(tmp_path, "env.id='tests.helpers.environment_env:cartpole'", "run.total_frames=400")
    means = []
    for reward in ("1", "-1"):
        monkeypatch.setenv(VARIABLE, reward)
        summary = fastrl.train(config, base, run_dir=tmp_path / f"reward{reward}")
        assert summary["status"] == "complete" and summary["episodes"] > 0
        means.append(summary["final_return_mean"])
    assert means[0] > 0 > means[1]
    assert fork_servers()  # which served them


def test_kernels_are_compiled_before_workers_start(tmp_path):
    """After the main process's warm-up, a run calls no kernel with a type it has not compiled."""
    from csrc_free_kernels.action_sampling import _sample_kernel
    from csrc_free_kernels.returns import _nstep_returns_kernel
    from fastrl.process.warmup import compile_kernels

    compile_kernels()
    before = (len(_nstep_returns_kernel.signatures), len(_sample_kernel.signatures))
    config, base = cartpole(tmp_path, "engine.serial=true", "run.total_frames=80")
    fastrl.train(config, base, run_dir=tmp_path / "run")  # serial: the kernels run in this process
    assert (len(_nstep_returns_kernel.signatures), len(_sample_kernel.signatures)) == before
