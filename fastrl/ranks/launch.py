"""What part of a run this process is, as the launch that started it decides: ``fastrl.train`` asks its
``Launch`` (``this_launch``) and never the environment, so it holds no branch on ranks.

- ``SingleProcess``: the whole run in this process (a script, the ``fastrl`` command, torchrun with one process);
- ``TorchrunRank``: one rank of a ``torchrun`` launch with more than one, a whole fastrl engine of its own.

Each answers the same questions: whether its launcher started it again, which checkpoint it resumes of a run
named, whether a directory named for it is free, the config its engine runs, and, once the run is planned, its
part (``RunPart``): the config the run directory records, its own directory, its log file, the line to the others.

Under torchrun: ``torchrun`` starts one fastrl process per node (or K on one machine: ``--standalone
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
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from fastrl.config import Config, ConfigError, launch_size
from fastrl.devices import local_rank
from fastrl.ranks.rank_link import RankLink
from fastrl.runs.checkpoint import CheckpointStore, checkpoint_file
from fastrl.runs.resume import Resume, prepare_resume
from fastrl.runs.run_dir import RunDir, new_run_dir
from fastrl.spec import Ranks, ResumePoint

log = logging.getLogger(__name__)

RESTARTS_KEY = "TORCHELASTIC_RESTART_COUNT"  # how often torchrun (--max-restarts) started this process again


@dataclass(frozen=True)
class Resuming:
    """A run this process goes on from: prepared from its own checkpoint, and how the run was named."""

    prepared: Resume
    named_file: bool  # a checkpoint file was named: the ranks resume its rollout or refuse, never another
    overrides: tuple[str, ...]  # applied to the run's config (again where the ranks settle on another checkpoint)


@dataclass(frozen=True)
class RunPart:
    """This process's part of the run, settled by its launch once the run is planned."""

    written: Config  # what the run directory's config.toml records (under torchrun engine.envs is every rank's)
    root: Path  # the run directory
    path: Path  # this process's own run directory: the root, or under torchrun rank r's RUN/ranks/rank-<r>
    own: tuple[str, ...] = ()  # what the launch itself made in ``path`` before the run claims it
    log_file: str | None = None  # this process's log file, beside the console
    link: RankLink | None = None  # the line to the other ranks' main processes
    resume: Resume | None = None  # the checkpoint it goes on from (under torchrun: one every rank has)

    @property
    def resume_point(self) -> ResumePoint | None:
        return self.resume.point if self.resume is not None else None


class Launch(Protocol):
    """What a launch tells the process it started (``SingleProcess`` or ``TorchrunRank``)."""

    @property
    def ranks(self) -> int:
        """The engines that make the run: 1, or as many as torchrun started."""
        ...

    def restarted(self, run_dir: str | Path | None) -> bool:
        """Its launcher started this process again into ``run_dir``, which holds its checkpoint."""
        ...

    def prepare_resume(self, target: Path, overrides: list[str] | tuple[str, ...]) -> Resuming:
        """This process's part of the run named by ``target``, read from its checkpoint."""
        ...

    def refuse_taken(self, run_dir: str | Path | None, resumed: bool) -> None:
        """Refuse now, before anything starts, a ``run_dir`` another run uses or holds files in."""
        ...

    def local_config(self, config: Config) -> Config:
        """The engine this process runs; ``ConfigError`` where the launch cannot run ``config``."""
        ...

    def settle(self, planned: Config, given: Config, run_dir: str | Path | None, resuming: Resuming | None) -> RunPart:
        """Its part of the run planned from ``local_config(given)``: ``run_dir`` (None: a new one), what it resumes."""
        ...


@dataclass(frozen=True)
class SingleProcess:
    """The whole run in this process: it writes the run directory and resumes what it is given."""

    restarts: int = 0  # torchrun with one process (--nproc-per-node 1 --max-restarts) restarts it too

    @property
    def ranks(self) -> int:
        return 1

    def restarted(self, run_dir: str | Path | None) -> bool:
        return restarted_into(run_dir, self.restarts, rank=0)

    def prepare_resume(self, target: Path, overrides: list[str] | tuple[str, ...]) -> Resuming:
        return Resuming(prepare_resume(target, overrides), target.suffix == ".pt", tuple(overrides))

    def refuse_taken(self, run_dir: str | Path | None, resumed: bool) -> None:
        if run_dir is not None:
            RunDir.check_free(Path(run_dir).expanduser(), resumed=resumed)

    def local_config(self, config: Config) -> Config:
        return config

    def settle(self, planned: Config, given: Config, run_dir: str | Path | None, resuming: Resuming | None) -> RunPart:
        resume = resuming.prepared if resuming is not None else None
        if resume is not None:
            run_dir = resume.run_dir
        # a new directory is made now, so that no other run gets it
        root = Path(run_dir).expanduser() if run_dir is not None else new_run_dir(planned)
        return RunPart(planned, root, root, resume=resume)


@dataclass(frozen=True)
class TorchrunRank:
    """One rank of a torchrun launch: an engine stepping its share of the envs in its own directory of the run's,
    which rank 0 names; the ranks agree through torchrun's store on the directory and the checkpoint resumed."""

    rank: int
    ranks: int
    restarts: int
    environ: Mapping[str, str]  # what torchrun told this process: its store, its GPU, the launch's id

    def restarted(self, run_dir: str | Path | None) -> bool:
        return restarted_into(run_dir, self.restarts, self.rank)

    def prepare_resume(self, target: Path, overrides: list[str] | tuple[str, ...]) -> Resuming:
        prepared = prepare_resume(rank_target(target, self.rank), overrides, ranks=self.ranks)
        return Resuming(prepared, target.suffix == ".pt", tuple(overrides))

    def refuse_taken(self, run_dir: str | Path | None, resumed: bool) -> None:
        """Nothing to refuse yet: the directory is rank 0's, claimed once the ranks agree on it (``settle``)."""

    def local_config(self, config: Config) -> Config:
        return local_config(config, rank_of(config, self.environ))

    def settle(self, planned: Config, given: Config, run_dir: str | Path | None, resuming: Resuming | None) -> RunPart:
        ranks = rank_of(given, self.environ)  # as local_config found it (a pure function of the config and environ)
        written = global_config(planned, given)
        link = RankLink(ranks)
        resume = self._agree_resume(link, resuming) if resuming is not None else None
        if resume is not None:
            run_dir = run_root(resume.run_dir, self.rank)
        root = link.agree_run_dir(lambda: Path(run_dir).expanduser() if run_dir is not None else new_run_dir(written))
        logged = log_file(root, self.rank)
        log_to_file(logged)
        own = ("logs", "ranks") if self.rank == 0 else ()  # made by the ranks before rank 0's run claims the root
        return RunPart(written, root, rank_dir(root, self.rank), own, str(logged), link, resume)

    def _agree_resume(self, link: RankLink, resuming: Resuming) -> Resume:
        """Every rank goes on from the same rollout: the one asked for, or the newest checkpoint all ranks have."""
        resumed = resuming.prepared
        store = CheckpointStore(resumed.run_dir / "checkpoints")
        rollout = link.agree_resume(resumed.point.rollout, store.rollouts(), explicit=resuming.named_file)
        if rollout == resumed.point.rollout:
            return resumed
        log.warning("rank %d resumes from rollout %d, the newest checkpoint every rank has", self.rank, rollout)
        return prepare_resume(store.path(rollout), resuming.overrides, ranks=self.ranks)


def this_launch(environ: Mapping[str, str] = os.environ) -> Launch:
    """The launch that started this process, read once from what torchrun (if it did) put in its environment."""
    restarts = int(environ.get(RESTARTS_KEY, 0))
    if launch_size(environ) > 1:
        return TorchrunRank(int(environ["RANK"]), launch_size(environ), restarts, dict(environ))
    return SingleProcess(restarts)


def restarted_into(run_dir: str | Path | None, restarts: int, rank: int) -> bool:
    """A restarted process (``restarts``) given a run directory that holds its checkpoint goes on from it."""
    if run_dir is None or restarts == 0:
        return False
    return checkpoint_file(rank_dir(Path(run_dir), rank)).is_file()


def launched(config: Config, environ: Mapping[str, str] = os.environ) -> Ranks | None:
    """This process's rank when ``torchrun`` started it with more than one rank; None otherwise (one engine)."""
    return rank_of(config, environ) if launch_size(environ) > 1 else None


def rank_of(config: Config, environ: Mapping[str, str]) -> Ranks:
    """This rank of the torchrun launch ``environ`` describes, running ``config``; ``ConfigError`` where it cannot."""
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
    run_id, restart = environ.get("TORCHELASTIC_RUN_ID", "fastrl"), environ.get(RESTARTS_KEY, "0")
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
