"""Imported by the fork server alone (``fork_server.PRELOAD``): the server ignores SIGTERM and SIGHUP.

A scheduler's SIGTERM or a closed terminal's SIGHUP reaches the run's whole process group, the fork
server with it. The server's death would fire every worker's parent-death signal (its forked workers'
parent is the server) and end the run before the main process could stop it at a barrier with its
checkpoint. The server holds nothing to save, and it still ends when the main process does: it reads a
pipe the main process holds. Workers forked from it install their own handlers (``worker.py``).

When that pipe closes the server leaves at once (``os._exit`` at exit): its interpreter's teardown of torch
took ~1.5 s, which the main process, reaping it before it returns (``fork_server.stop_fork_server``), would
wait for. Its forked workers never run it: they leave through ``os._exit`` of their own.
"""

import atexit
import os
import signal

atexit.register(os._exit, 0)

for _signum in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(_signum, signal.SIG_IGN)
