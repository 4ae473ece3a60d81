"""The control block's learner stats row is read by the metrics at any moment while its learner writes it."""

import threading
import time

import numpy as np

from fastrl.buffers.control import STAT_COLUMNS, Stat, read_lag, write_lag


def test_a_lag_pair_half_written_is_read_once_its_write_ends():
    row = np.zeros(STAT_COLUMNS)
    write_lag(row, 0.5, 1.0)
    assert read_lag(row) == (0.5, 1.0) and row[Stat.LAG_WRITES] == 2
    row[Stat.LAG_WRITES] += 1  # the next update's write, stopped half way: its mean beside the last one's max
    row[Stat.LAG_MEAN] = 3.0

    def finish() -> None:
        time.sleep(0.05)
        row[Stat.LAG_MAX] = 4.0
        row[Stat.LAG_WRITES] += 1

    writer = threading.Thread(target=finish)
    writer.start()
    assert read_lag(row, tries=10**8) == (3.0, 4.0)  # never (3.0, 1.0): a mean above its max
    writer.join()


def test_a_write_that_never_ends_does_not_hang_the_reader():
    row = np.zeros(STAT_COLUMNS)
    row[Stat.LAG_WRITES], row[Stat.LAG_MEAN], row[Stat.LAG_MAX] = 1, 2.0, 3.0  # a learner that died mid-write
    assert read_lag(row, tries=10) == (2.0, 3.0)
