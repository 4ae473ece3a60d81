"""How a run's worker processes start: forked from one server process that has imported torch and the
workers' modules once, instead of each importing them afresh as ``spawn`` does.

Importing torch costs ~1.6 s of CPU. Under ``spawn`` every worker that runs torch paid it (3 workers on 2
cores: ~3 s before the first step) and paid again at exit (~0.5 s of interpreter teardown). Forked from
multiprocessing's fork server, a worker starts with torch already imported and leaves with ``os._exit``
once its own clean-up is done. The server starts with a process's first run and serves every later one,
so a second run in the same process (a sweep, a notebook, the test suite) starts its workers in ~0.1 s.

Why a fork server and not ``fork``: the main process has threads (the queue drains, the telemetry) and may
have run torch (thread pools, CUDA), which a forked child cannot safely inherit; the server has only
imported modules and run nothing. A worker still gets what ``spawn`` gave it: the main module re-imported
(envs registered there), the main process's working directory and ``sys.path`` (multiprocessing's
preparation data), and the main process's environment variables at the run's start (``apply_environment``:
the server's own are those of the process's first run). What the server keeps from its start is what its
preloaded libraries read from the environment at import; fastrl sets each worker's torch threads itself.

The server's parent is the main process, and it exits when the main process does (even by SIGKILL: it
reads a pipe the main process holds), so a worker's ``die_with_parent`` still ends it when the run's main
process dies. A process does not leave it behind: ``stop_fork_server`` ends and reaps it (and
multiprocessing's resource tracker) before ``fastrl train`` returns and at the interpreter's exit, so a
script, a scheduler or the next run sees nothing of the finished one in the process table. Where there is
no fork server (Windows), or with ``engine.start_method = "spawn"``, workers are spawned.
"""

from __future__ import annotations

import atexit
import multiprocessing as mp
import os
import signal
from multiprocessing.context import ForkServerContext, SpawnContext

# What every worker imports: torch above all, and the modules ``build_component`` loads for each role.
# A module that fails to import here is skipped by the server; the worker then imports it and reports.
PRELOAD = (
    "fastrl.process.server_signals",  # first: the server outlives a signal to the process group
    "torch",
    "torch._dynamo",  # torch.optim imports it on a learner's first optimizer (~1.6 s)
    "numpy",
    "numba.np.arraymath",  # numba's first dispatch in a process imports its CPU target's modules (~0.5 s)
    "numba.np.npyimpl",
    "numba.typed",
    "numba.experimental.jitclass",
    "fastrl.process.worker",
    "fastrl.learning",
    "fastrl.sampling.actor",
    "fastrl.sampling.executor",
    "fastrl.sampling.inline",
    "fastrl.layers.builtin",  # fastrl's own layers, registered once here rather than in every worker
    "fastrl.process.server_kernels",  # the numba kernels, loaded once here rather than in every worker
    "fastrl.process.server_freeze",  # last: what the modules above made is never walked by a worker's collector
)


def worker_context(start_method: str = "forkserver") -> ForkServerContext | SpawnContext:
    """The multiprocessing context the run's workers are started with (``engine.start_method``; spawn where
    the OS has no fork server).

    The preload list takes effect when the server starts (the first run of the process); a server some
    other code of the process started first is used as it is (its workers import what it lacks)."""
    if start_method == "spawn" or "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    context = mp.get_context("forkserver")
    context.set_forkserver_preload(list(PRELOAD))
    return context


def start_fork_server(start_method: str = "forkserver") -> None:
    """Start the server now, so that its imports (~3 s of CPU) run beside the main process's checks and
    planning rather than after them; a no-op once it runs, or where workers are spawned."""
    global _owner
    if worker_context(start_method).get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()
        if _owner is None:
            atexit.register(stop_fork_server)
        _owner = os.getpid()


_owner: int | None = None  # the process that started the server: only it may stop it


def stop_fork_server() -> None:
    """End the processes a run keeps for the next one, and reap them: the fork server (which leaves at once,
    ``server_signals``) and multiprocessing's resource tracker, both children of this process. Each would
    otherwise outlive the process's exit by ~1.5 s and stay a zombie under an init that does not reap. The
    next run starts them again. ``fastrl.shutdown()``; the command runs it before it returns."""
    from multiprocessing import forkserver, resource_tracker

    if _owner != os.getpid():  # a worker, or a child of the process that started them: they are not its own
        return
    server_pid = getattr(forkserver._forkserver, "_forkserver_pid", None)
    if server_pid is not None:  # a server still importing its preloads reads its pipe only once done (~3 s,
        # a config refused in the planning): it holds nothing, and its workers are gone, so it is killed
        _kill(server_pid)
    for helper in (forkserver._forkserver, resource_tracker._resource_tracker):
        stop = getattr(helper, "_stop", None)  # private: the only way to close its pipe and wait for it
        if stop is not None:
            stop()


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:  # already gone; multiprocessing still reaps it
        pass


def release_server() -> None:
    """In a worker forked from the server: close the worker's copy of the server's "alive" pipe.

    multiprocessing hands every forked child the write end of the pipe the server watches (so that the
    child could start processes through the server too), and the server exits only when every copy is
    closed. A worker that kept it kept the server alive after the main process died, and with it every
    worker's parent-death signal unsent: a worker blocked in C then lived on. Workers start nothing
    through the server, so each lets go of it; the server then exits with the main process."""
    from multiprocessing import forkserver

    server = forkserver._forkserver  # private, but the only handle there is on that fd
    fd = getattr(server, "_forkserver_alive_fd", None)
    if fd is not None and mp.parent_process() is not None:
        os.close(fd)
        server._forkserver_alive_fd = None  # type: ignore[attr-defined]


def apply_environment(environ: dict[str, str]) -> None:
    """Give a worker the main process's environment as it was when the run started (a forked worker has
    the server's, from the process's first run): what an env or a library reads after the fork is current."""
    if dict(os.environ) != environ:
        os.environ.clear()
        os.environ.update(environ)
