"""The Python API: ``fastrl.train(config) -> summary``."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from fastrl.config import DEFAULT_JOB, Config, ConfigError, apply_overrides, config_from_dict, load_config
from fastrl.process.machine_limits import check_import_floor
from fastrl.runs.run_dir import RunDir

if TYPE_CHECKING:
    from fastrl.ranks.launch import Launch, Resuming

log = logging.getLogger(__name__)


def resolve_config(
    config: Config | dict | str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()
) -> Config:
    """A validated Config from a Config, a dict of sections, a TOML path or a shipped config's name
    (``"pong_sync"``), or None: the default job, the shipped ``pong_sync.toml``. A dict or a file
    starts from the schema's defaults (``fastrl config``), as an empty file does."""
    if isinstance(config, Config):
        config = config.to_dict()
    if isinstance(config, dict):
        return config_from_dict(apply_overrides(config, overrides))
    return load_config(DEFAULT_JOB if config is None else config, overrides)


def load_policy(target: str | Path, params: str | int = "auto", trust_code: bool = False):
    """The trained policy of a run: a ``torch.nn.Module`` in eval mode whose ``forward(obs)`` gives
    ``(logits [B, n_actions], value [B])`` for a batch of observations shaped as the env gives them
    (for a Box action space the head is ``[B, 2 D]``: D means, then D log-stds). A recurrent policy
    (``model.lstm = H``, its ``hidden_size`` 2 H) takes and returns each env's state too:
    ``forward(obs, hidden [B, 2H])`` -> ``(logits, value, hidden')``; start an episode from zeros.

    Built from the checkpoint's own config with its parameters, resolved as ``fastrl eval``
    resolves them: ``target`` is a run directory, its ``checkpoints/`` folder or a checkpoint
    file; ``params`` is ``"auto"`` (the target's checkpoint), or for gala runs ``"average"``
    (the learners' averaged parameters) or ``"learner-<i>"`` (also ``"<i>"`` or ``i``).

    The file is read as tensors and plain data only (``torch.load(weights_only=True)``), so a run someone
    else shared runs none of its own code; ``trust_code=True`` is needed where its config names a
    ``module:factory`` env or model, which rebuilding the policy imports and calls.
    Raises ``ConfigError`` for bad input, naming the path or value and what is allowed.
    """
    from fastrl.evaluation import load_trained

    return load_trained(target, params, trust_code).model


def export_policy(
    target: str | Path,
    format: str = "onnx",
    out: str | Path | None = None,
    params: str | int = "auto",
    greedy: bool = False,
    trust_code: bool = False,
):
    """Write a run's trained policy as an ONNX (``format="onnx"``, the ``fastrl-engine[export]`` extra) or TorchScript
    file that runs without fastrl: raw observation in (and an LSTM's state), logits or a Gaussian's mean and
    log-std, the value (and the state) out; ``greedy`` adds the greedy action as the first output. The
    normalisers are inside. ``target``, ``params`` and ``trust_code`` as ``load_policy``'s; ``out`` defaults to
    ``RUN_DIR/policy.onnx`` (``policy.pt``). Returns a ``fastrl.evaluation.export.ExportedPolicy`` (the file,
    its inputs' and outputs' names and shapes); the file was checked against the eager policy before it was kept.
    Raises ``ConfigError`` for bad input (a missing extra named)."""
    from fastrl.evaluation.export import export_policy as export

    return export(target, format, out, params, greedy, trust_code)


def sweep_stale_segments() -> list[tuple[str, int]]:
    """Free the shared memory that runs killed with -9 left in /dev/shm, and say so."""
    from fastrl.buffers.arena import sweep_stale_segments as sweep

    removed = sweep()
    if removed:
        mib = sum(size for _, size in removed) / 2**20
        log.warning(
            "removed %d shared-memory segments left by dead runs (%.1f MiB): %s",
            len(removed),
            mib,
            ", ".join(name for name, _ in removed),
        )
    return removed


def train(
    config: Config | dict | str | Path | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    run_dir: str | Path | None = None,
    resume: str | Path | None = None,
) -> dict:
    """Train until ``run.total_frames`` (or ``run.target_return``); returns the summary dict.

    ``resume``: a run directory (or one of its checkpoint files) to go on from; ``overrides``
    then apply to that run's config, e.g. ``["run.total_frames=2_000_000"]``.

    Raises ``ConfigError`` for bad input before anything starts, ``RunFailed`` when a fault
    ends the run and ``RunInterrupted`` (a ``KeyboardInterrupt``) on Ctrl-C or SIGTERM; in
    every case the workers are stopped, the shared memory is freed and the last good
    parameters are in ``RUN_DIR/checkpoints/latest.pt``.
    """
    from fastrl.ranks.launch import this_launch

    launch = this_launch()  # the whole run in this process, or one rank of a torchrun launch: it answers what differs
    restarted = resume is None and launch.restarted(run_dir)
    if restarted:  # its launcher started it again (torchrun --max-restarts): go on from the last checkpoint
        resume, config, run_dir = run_dir, None, None
    resuming = _resuming(launch, resume, config, run_dir, overrides)
    config = resuming.prepared.config if resuming else resolve_config(config, overrides)
    check_import_floor()  # before torch: under a tight ulimit -v its import dies of a MemoryError or SIGSEGV
    from fastrl.process.fork_server import start_fork_server

    launch.refuse_taken(resuming.prepared.run_dir if resuming else run_dir, resumed=resuming is not None)
    if not config.engine.serial:  # first: the server's imports (~3 s) run beside this process's and its planning
        start_fork_server(config.engine.start_method)
    # imported once the config parsed: they bring in torch (~2 s), which a refused key should not wait for
    from fastrl.process.run_plan import plan_run
    from fastrl.process.supervisor import Supervisor
    from fastrl.process.warmup import compile_kernels

    sweep_stale_segments()  # before the space check: what killed runs left in /dev/shm is not in the way
    plan = plan_run(launch.local_config(config), resuming=resuming is not None)  # every input check, before any start
    compile_kernels()
    part = launch.settle(plan.config, config, run_dir, resuming)  # its directory; under torchrun agreed by the ranks
    if restarted and part.resume is not None:
        log.warning("torchrun restarted this rank: resuming %s at rollout %d", part.root, part.resume.point.rollout)
    run = RunDir.create(part.written, part.path, launch.ranks, resumed=part.resume is not None, own=part.own)
    try:
        if part.resume is not None:
            part.resume.set_aside_newer()  # under the directory's lock: no other run is using it
        log.info("run directory %s", run.path)
        return Supervisor(plan, run, part).run()
    finally:
        run.release()


def shutdown() -> None:
    """End and reap the processes fastrl keeps between runs in this process: the fork server its workers
    start from, and multiprocessing's resource tracker. ``train`` keeps them so that the next run of a sweep
    or a notebook starts in ~0.1 s; they are ended at the interpreter's exit anyway, and the next ``train``
    starts them again. The ``fastrl`` command runs this before it returns."""
    from fastrl.process.fork_server import stop_fork_server

    stop_fork_server()


def _resuming(launch: Launch, target, config, run_dir, overrides) -> Resuming | None:
    """The run to go on from, if one was named: this process's part of it, as its launch places it."""
    if target is None:
        return None
    if config is not None or run_dir is not None:
        raise ConfigError("resume continues a run with its own config and directory: give no config or run_dir")
    return launch.prepare_resume(Path(target).expanduser(), overrides)
