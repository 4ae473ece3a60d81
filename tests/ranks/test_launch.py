"""The launch that started a process answers what part of the run it is: the whole run (one process) or one rank
of a torchrun launch. Each kind is asked here as ``fastrl.train`` asks it; the launches themselves are
tests/ranks/test_multinode.py's."""
import logging
import socket

import pytest

from fastrl.config import ConfigError, load_config
from fastrl.ranks.launch import SingleProcess, TorchrunRank, this_launch

pytestmark = pytest.mark.unit

TORCHRUN = {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "localhost", "MASTER_PORT": "29500"}
CARTPOLE = "configs/cartpole_sync.toml"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.fixture
def root_logger():
    """``settle`` under torchrun adds the rank's log file to the root logger: put it back as it was."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in root.handlers[:]:
        if handler not in handlers:
            root.removeHandler(handler)
            handler.close()
    root.setLevel(level)


def test_the_environment_chooses_the_launch_once():
    assert this_launch({}) == SingleProcess(restarts=0)
    assert this_launch({**TORCHRUN, "WORLD_SIZE": "1", "TORCHELASTIC_RESTART_COUNT": "1"}) == SingleProcess(1)
    rank = this_launch({**TORCHRUN, "TORCHELASTIC_RESTART_COUNT": "2"})
    assert isinstance(rank, TorchrunRank) and (rank.rank, rank.ranks, rank.restarts) == (1, 2, 2)
    assert this_launch({}).ranks == 1


def test_a_restarted_process_goes_on_from_its_own_checkpoint(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "latest.pt").touch()
    assert not SingleProcess(restarts=0).restarted(tmp_path)  # started once: a directory to make, not to resume
    assert SingleProcess(restarts=1).restarted(tmp_path)
    assert not SingleProcess(restarts=1).restarted(None)
    rank1 = this_launch({**TORCHRUN, "TORCHELASTIC_RESTART_COUNT": "1"})
    assert not rank1.restarted(tmp_path)  # rank 1's checkpoint is in the run's ranks/rank-1
    (tmp_path / "ranks" / "rank-1" / "checkpoints").mkdir(parents=True)
    (tmp_path / "ranks" / "rank-1" / "checkpoints" / "latest.pt").touch()
    assert rank1.restarted(tmp_path)


def test_a_rank_runs_its_share_of_the_envs_and_one_process_all_of_them():
    config = load_config(CARTPOLE, ["engine.envs=8", "engine.executors=1", "engine.actors=1"])
    assert SingleProcess().local_config(config) is config
    assert this_launch(TORCHRUN).local_config(config).engine.envs == 4
    with pytest.raises(ConfigError, match="multiple of the 2 ranks"):
        this_launch(TORCHRUN).local_config(load_config(CARTPOLE, ["engine.envs=7"]))


def test_one_process_writes_the_run_directory_named_or_a_new_one(tmp_path):
    config = load_config(CARTPOLE, [f"run.dir='{tmp_path / 'runs'}'"])
    named = SingleProcess().settle(config, config, tmp_path / "named", None)
    assert named.root == named.path == tmp_path / "named"
    assert (named.written, named.own, named.log_file, named.link, named.resume) == (config, (), None, None, None)
    new = SingleProcess().settle(config, config, None, None)
    assert new.path.is_dir() and new.path.parent == tmp_path / "runs"  # made now: no other run takes it


def test_the_ranks_agree_on_rank_0s_directory_each_keeping_its_own_in_it(tmp_path, root_logger):
    given = load_config(CARTPOLE, ["engine.envs=8", "engine.executors=1", "engine.actors=1", "dist.timeout_s=10"])
    store = {"MASTER_PORT": str(_free_port()), "TORCHELASTIC_RUN_ID": "test-launch"}
    parts = []
    for rank in (0, 1):  # rank 0 hosts the store (no torchrun agent here) and names the directory first
        launch = this_launch({**TORCHRUN, **store, "RANK": str(rank)})
        local = launch.local_config(given)
        parts.append(launch.settle(local, given, tmp_path / "run" if rank == 0 else None, None))
    leader, other = parts
    assert leader.root == other.root == tmp_path / "run"  # rank 1 named none: it takes rank 0's
    assert leader.path == tmp_path / "run" and other.path == tmp_path / "run" / "ranks" / "rank-1"
    assert leader.written.engine.envs == other.written.engine.envs == 8  # config.toml records every rank's envs
    assert leader.own == ("logs", "ranks") and other.own == ()
    assert [part.log_file for part in parts] == [str(tmp_path / "run" / "logs" / f"rank-{r}.log") for r in (0, 1)]
    assert leader.link is not None and leader.link.ranks.leader and not other.link.ranks.leader
