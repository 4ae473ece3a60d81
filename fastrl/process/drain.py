"""Reading queues in the main process without ever blocking it.

faster-fifo guards each queue with a plain process-shared mutex: a worker killed while holding
it wedges every later get or put on that queue, timeout or not. The main process must stay
free to notice the death and end the run, so it reads its queues (errors, episodes) in a daemon
thread (faster-fifo waits without the GIL); if that thread ever wedges, it is abandoned.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from queue import Empty

log = logging.getLogger(__name__)
READ_TIMEOUT_S = 0.05  # how soon a stopped reader leaves (shorter wakes the main process more often during a run)


class QueueDrain:
    """``threaded=False`` (serial mode: every writer is this process, no one can die holding a lock)
    reads on ``take`` instead, without a thread competing for the GIL."""

    def __init__(self, queue, name: str, threaded: bool = True):
        self.queue, self.name = queue, name
        self.items: collections.deque = collections.deque()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"fastrl-drain-{name}", daemon=True)
        if threaded:
            self._thread.start()

    def _read_now(self) -> None:
        if self._thread.is_alive():
            return
        try:
            self.items.extend(self.queue.get_many(block=False))
        except Empty:
            pass

    def ask_to_stop(self) -> None:
        """The reader leaves at its next timeout; ``stop`` waits for it (ask every drain first: they wait together)."""
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.items.extend(self.queue.get_many(block=True, timeout=READ_TIMEOUT_S))
            except Empty:
                continue
            except Exception:  # a closed or broken queue: nothing more will come from it
                log.debug("queue %s can no longer be read", self.name, exc_info=True)
                return

    def take(self) -> list:
        self._read_now()
        out = []
        while self.items:
            out.append(self.items.popleft())
        return out

    def wait_for_item(self, timeout_s: float) -> bool:
        """Give a dying worker's last report a moment to arrive."""
        deadline = time.monotonic() + timeout_s
        while not self.items and time.monotonic() < deadline:
            self._read_now()
            time.sleep(0.01)
        return bool(self.items)

    def stop(self) -> bool:
        """Stop reading; False if the reader is wedged on the queue's lock (it is then abandoned)."""
        self.ask_to_stop()
        if not self._thread.ident:
            return True
        self._thread.join(READ_TIMEOUT_S * 4)
        if self._thread.is_alive():
            log.warning("the %s queue is wedged (a worker died holding its lock); abandoning its reader", self.name)
            return False
        return True
