"""Imported by the fork server alone (``fork_server.PRELOAD``): the numba kernels are loaded into the server,
so that every worker forked from it starts with them ready.

A kernel is compiled once into numba's cache (``warmup.compile_kernels``, in the main process), but each
process that calls it still loads it from there on its first call: ~0.2 s for a learner's return kernels and
as much for an actor's sampling kernels, in every worker of every run. Loaded here, before the fork, that
cost is paid once a process. The kernels run on arrays of a few elements and start no threads.
"""

import logging

try:
    from fastrl.process.warmup import compile_kernels

    compile_kernels()
except Exception as exc:  # a server that cannot warm them still serves: each worker loads its own, as before
    logging.getLogger(__name__).debug("the fork server did not load the numba kernels: %s", exc)
