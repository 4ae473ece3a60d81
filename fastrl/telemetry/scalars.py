"""The numbers of one ``metrics.jsonl`` line as flat ``{tag: value}`` scalars (TensorBoard, W&B).

Nested tables join their keys with ``/`` (``time_split/env``, ``rss_mb/executor-0``), gala's
per-learner rows become ``learner-<i>/<key>``, and values that are not numbers (a return
before the first episode is ``null``) are left out, so a tag holds only real points.
"""

from __future__ import annotations

import math
from numbers import Real


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, Real):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def scalars(line: dict) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in line.items():
        if key == "learners":
            for row in value:
                prefix = f"learner-{row['learner']}"
                out.update({f"{prefix}/{k}": v for k, v in scalars(row).items() if k != "learner"})
        elif isinstance(value, dict):
            out.update({f"{key}/{k}": v for k, v in scalars(value).items()})
        elif (number := _number(value)) is not None:
            out[key] = number
    return out
