"""Many machines: under ``torchrun`` every rank is a whole fastrl engine; only the learners talk across ranks.

``torchrun`` starts one fastrl process per node (or K on one machine: ``--standalone
--nproc-per-node K``) and tells each its ``RANK`` and ``WORLD_SIZE`` and where the rendezvous
store is (``MASTER_ADDR:MASTER_PORT``; torchrun's agent hosts it, else rank 0 does). From that:

- ``launched``: this process's rank (``fastrl.spec.Ranks``: the rank count, the store, the backend);
- ``local_config``: the engine this rank runs: ``engine.envs`` is the total over every rank,
  each rank steps an equal contiguous share (env streams are seeded by the global env index, so
  2 ranks x 8 envs step the env streams of 1 rank x 16); every other key is the user's;
- ``fastrl.ranks.rank_link.RankLink``: what the main processes of the ranks tell each other through the store.

Rank 0 writes the run directory; rank r > 0 keeps its engine's own directory (its checkpoints
with its envs' states) in ``RUN/ranks/rank-<r>``; every rank logs to ``RUN/logs/rank-<r>.log``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from fastrl.config import LAUNCH_KEYS, Config, ConfigError, launch_size
from fastrl.devices import local_rank
from fastrl.spec import Ranks

log = logging.getLogger(__name__)


def launched(config: Config, environ: Mapping[str, str] = os.environ) -> Ranks | None:
    """This process's rank when ``torchrun`` started it with more than one rank; None otherwise (one engine)."""
    if not all(key in environ for key in LAUNCH_KEYS) or int(environ["WORLD_SIZE"]) <= 1:
        return None
    ranks = int(environ["WORLD_SIZE"])
    engine = config.engine
    if engine.serial:
        raise ConfigError(
            "engine.serial = true runs one process; under torchrun each rank is a whole engine "
            "with processes of its own: drop engine.serial or run without torchrun"
        )
    if engine.envs % ranks:
        raise ConfigError(
            f"engine.envs = {engine.envs} (the total over every rank) must be a multiple of the "
            f"{ranks} ranks torchrun started: each rank steps an equal share"
        )
    run_id, restart = environ.get("TORCHELASTIC_RUN_ID", "fastrl"), environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return Ranks(
        rank=int(environ["RANK"]),
        ranks=ranks,
        addr=environ["MASTER_ADDR"],
        port=int(environ["MASTER_PORT"]),
        agent_store=environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True",
        prefix=f"fastrl/{run_id}/{restart}/",
        backend=_backend(config, environ),
        timeout_s=config.dist.timeout_s,
        local_envs=engine.envs // ranks,
        local_rank=local_rank(environ),
    )


def _backend(config: Config, environ: Mapping[str, str] = os.environ) -> str:
    """``dist.backend`` resolved: nccl where every learner of the launch computes on a GPU of its own (NCCL
    refuses two members of a group on one GPU), gloo otherwise."""
    backend, device = config.dist.backend, config.engine.device
    if backend == "nccl" and device == "cpu":
        raise ConfigError(
            "dist.backend = 'nccl' moves CUDA tensors, but engine.device = 'cpu': use dist.backend = "
            "'gloo' (or 'auto'), or engine.device = 'cuda'"
        )
    if backend == "gloo":
        return backend
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if backend == "nccl":
        if not gpus:
            raise ConfigError("dist.backend = 'nccl' needs CUDA, and torch sees no CUDA device: use 'gloo' or 'auto'")
        return backend
    cuda = device == "cuda" or (device == "auto" and gpus > 0)
    learners_here = int(environ.get("LOCAL_WORLD_SIZE", 1)) * config.engine.learners  # on this node
    return "nccl" if cuda and learners_here <= gpus else "gloo"


def local_config(config: Config, ranks: Ranks) -> Config:
    """The engine one rank runs: its share of the envs; the rest (budget, layout, algorithm) as given."""
    engine = dataclasses.replace(config.engine, envs=ranks.local_envs)
    local = dataclasses.replace(config, engine=engine)
    from fastrl.config import validate

    try:
        validate(local)
    except ConfigError as exc:
        raise ConfigError(
            f"{exc} (on each of the {ranks.ranks} ranks, which step engine.envs / {ranks.ranks} = "
            f"{ranks.local_envs} envs each)"
        ) from None
    return local


def launch_rank(environ: Mapping[str, str] = os.environ) -> int:
    """This process's rank under torchrun (0 without it)."""
    return int(environ.get("RANK", 0)) if launch_size(environ) > 1 else 0


def restarted(run_dir) -> bool:
    """torchrun restarted this rank (``--max-restarts``) into a run directory that has its checkpoint."""
    from fastrl.runs.checkpoint import checkpoint_file

    if run_dir is None or int(os.environ.get("TORCHELASTIC_RESTART_COUNT", 0)) == 0:
        return False
    return checkpoint_file(rank_dir(Path(run_dir), launch_rank())).is_file()


def run_root(rank_directory: Path, rank: int) -> Path:
    """The run directory of which ``rank_directory`` is rank ``rank``'s."""
    return rank_directory if rank == 0 else rank_directory.parent.parent


def global_config(local: Config, given: Config) -> Config:
    """What the run directory records: the rank's resolved config, with engine.envs the total again."""
    return dataclasses.replace(local, engine=dataclasses.replace(local.engine, envs=given.engine.envs))


def rank_target(target: Path, rank: int) -> Path:
    """``--resume`` names the run (its directory, its checkpoints/ or a checkpoint file of it); rank r
    resumes from the same place in its own directory."""
    if rank == 0:
        return target
    if target.suffix == ".pt":
        return rank_dir(target.parent.parent, rank) / "checkpoints" / target.name
    root = target.parent if target.name == "checkpoints" else target
    return rank_dir(root, rank)


def rank_dir(root: Path, rank: int) -> Path:
    """Where rank ``rank``'s engine keeps its own run directory (rank 0's is the run directory)."""
    return root if rank == 0 else root / "ranks" / f"rank-{rank}"


def log_file(root: Path, rank: int) -> Path:
    return root / "logs" / f"rank-{rank}.log"


def log_to_file(path: Path) -> None:
    """Every record of this process also goes to the rank's log file (as well as where it went before)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(processName)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    if root.level > logging.INFO or root.level == logging.NOTSET:
        root.setLevel(logging.INFO)
        for other in root.handlers:  # the console keeps the level it had
            if other is not handler and other.level == logging.NOTSET:
                other.setLevel(logging.WARNING)
