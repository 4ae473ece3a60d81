"""TensorBoard event files in ``RUN_DIR/tb``, written by the main process at each log interval.

tensorboardX writes them: a small package (numpy and protobuf) that is kept up to date and
needs neither TensorFlow nor the ``tensorboard`` server, which a user installs only to view.
Step = env frames, so curves of a resumed run (a new event file in the same folder) go on
where the first session stopped.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fastrl.telemetry.scalars import scalars

TB_FOLDER = "tb"
RETURNS_TAG = "episode_return"


class TensorBoardSink:
    def __init__(self, run_path: Path):
        from tensorboardX import SummaryWriter

        self.folder = run_path / TB_FOLDER
        self.writer = SummaryWriter(logdir=str(self.folder))

    def write(self, line: dict, returns: list[float]) -> None:
        """One metrics line; ``returns``: the episodes finished since the last line (a histogram)."""
        step = int(line["frames"])
        for tag, value in scalars(line).items():
            self.writer.add_scalar(tag, value, step)
        if returns:
            self.writer.add_histogram(RETURNS_TAG, np.asarray(returns, np.float64), step)
        self.writer.flush()  # every few seconds at most: a live `tensorboard --logdir` sees each line

    def close(self) -> None:
        writers = list((self.writer.all_writers or {}).values())
        try:
            self.writer.close()
        except OSError:  # a full disk: the last events are lost, and the teardown says so
            for writer in writers:  # tensorboardX's own close at exit would fail again, printing a traceback
                writer.event_writer._closed = True
            raise
