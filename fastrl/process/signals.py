"""Ctrl-C, SIGTERM and SIGHUP in the main process: the first asks for a clean stop, the second forces it.

SIGHUP is what a closed terminal sends (an ssh session dropped without tmux), SIGTERM what schedulers
send (Slurm, systemd, Kubernetes, ``docker stop``, torchrun): both usually reach every process of the
run's process group at once. The workers leave that to this process (``worker.py``), which stops the
run as it stops it for Ctrl-C.

The first signal is only recorded: the supervisor then lets the learner finish at the next
rollout barrier, where it writes an exact checkpoint (envs parked and saved), and ends the run.
A second signal sets ``forced``: the supervisor stops waiting for anything, kills the workers
and still frees the shared memory. Handlers are installed only in the main thread (Python
allows no other), so ``fastrl.train`` called from a thread keeps the caller's handling.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeAlias

log = logging.getLogger(__name__)
HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# what signal.signal returns and accepts: a handler, SIG_DFL / SIG_IGN, or None (installed outside Python)
Handler: TypeAlias = "Callable[[int, FrameType | None], Any] | int | signal.Handlers | None"


class SignalGuard:
    def __init__(self) -> None:
        self.received: str | None = None  # name of the first signal
        self.forced = False
        self.raise_on_force = False  # serial mode: the work loop runs in this thread, interrupt it
        self._previous: dict[int, Handler] = {}

    def __enter__(self) -> SignalGuard:
        if threading.current_thread() is threading.main_thread():
            for signum in HANDLED:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame) -> None:
        name = signal.Signals(signum).name
        if self.received is None:
            self.received = name
            log.warning(
                "%s: stopping at the next rollout barrier with a checkpoint; send it again to stop at once", name
            )
            return
        self.forced = True
        log.warning("%s again: stopping now, without waiting for a checkpoint", name)
        if self.raise_on_force:
            self.raise_on_force = False
            raise KeyboardInterrupt
