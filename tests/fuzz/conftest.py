import os

from tests.fuzz.cases import COUNTS, write_counts


def pytest_sessionfinish(session, exitstatus):
    """Each process's case counts, for bench/fuzz.sh to sum (FASTRL_FUZZ_COUNTS=DIR)."""
    directory = os.environ.get("FASTRL_FUZZ_COUNTS")
    if directory and COUNTS:
        write_counts(directory)
