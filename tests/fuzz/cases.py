"""The fuzz's settings and its case counter.

``fuzz(sample, full)``: Hypothesis settings of a fuzz test, ``sample`` seeded examples in the default tier (the
profile ``fuzz-sample``: derandomized, no deadline) and ``full`` under ``FASTRL_FUZZ=full`` (the profile
``fuzz-full``: random, as ``bench/fuzz.sh`` runs it). ``record(family, outcome)`` counts each generated case as it
ends (``accepted``, ``refused``, ``run_failed``, ...) and each breach of the rule (``traceback``, ``leftover``,
``damaged``); ``FASTRL_FUZZ_COUNTS=DIR`` writes this process's counts to ``DIR/counts-<pid>.json`` at the
session's end (``tests/fuzz/conftest.py``), which ``bench/fuzz.sh`` sums.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from pathlib import Path

from hypothesis import HealthCheck, settings

FAMILIES = ("configs", "cli", "run_dirs", "env_outputs", "plugins")
BREACHES = ("traceback", "leftover", "damaged", "unnamed")  # each one a failed case
FULL = os.environ.get("FASTRL_FUZZ", "") == "full"

_common = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck), print_blob=True)
settings.register_profile("fuzz-sample", derandomize=True, **_common)
settings.register_profile("fuzz-full", derandomize=False, **_common)

COUNTS: dict[str, Counter] = defaultdict(Counter)


def fuzz(sample: int, full: int) -> settings:
    """The settings of one fuzz test: ``sample`` examples in the default tier, ``full`` in the full run."""
    profile = settings.get_profile("fuzz-full" if FULL else "fuzz-sample")
    return settings(profile, max_examples=full if FULL else sample)


def record(family: str, outcome: str) -> None:
    assert family in FAMILIES, family
    COUNTS[family][outcome] += 1


def write_counts(directory: str | Path) -> Path:
    path = Path(directory) / f"counts-{os.getpid()}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({family: dict(counter) for family, counter in COUNTS.items()}, sort_keys=True))
    return path
