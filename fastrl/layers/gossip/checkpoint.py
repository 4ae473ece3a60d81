"""The checkpoint of a gala run as a whole: the average of its learners' last parameters, written to
``checkpoints/latest.pt`` once each learner's own is in ``checkpoints/learner-<i>/`` (``Mode.combine_learners``,
called by ``fastrl.process.last_checkpoint``), with a ``gala`` entry naming them. ``fastrl eval --params
average|learner-<i>`` picks between them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from fastrl.runs.checkpoint import CheckpointStore, build_checkpoint


def average_learners(spec: Any, checkpoints: list[tuple[Path, dict]], store: CheckpointStore) -> None:
    """Their average on top of the learners' own (``checkpoints``: each one's path and contents)."""
    models = [c["model"] for _, c in checkpoints]
    average = {k: torch.stack([m[k].double() for m in models]).mean(0).to(models[0][k].dtype) for k in models[0]}
    rollout = max(c["rollout"] for _, c in checkpoints)
    state = {
        "model": average,
        "optimizer": None,
        "version": min(c["version"] for _, c in checkpoints),
        "rollout": rollout,
        "updates": sum(c["updates"] for _, c in checkpoints),
        "frames": sum(c["frames"] for _, c in checkpoints),
    }
    store.save(
        build_checkpoint(
            "gala-average",
            state,
            spec.config.to_dict(),
            resume=None,
            gala={
                "learners": spec.learners,
                "mixing": spec.config.gala.mixing,
                "learner_checkpoints": [str(path.relative_to(store.directory)) for path, _ in checkpoints],
                "learner_versions": [c["version"] for _, c in checkpoints],
            },
        ),
        rollout,
    )
