"""After the workers are gone: make sure ``latest.pt`` holds the last good parameters.

The learner writes that checkpoint itself whenever it can (``Learner.shutdown``) and then
marks itself ``Done.SAVED``. When it could not (killed, stuck, or a forced stop), the main process
writes one from the weights the learner last published into the shared parameter buffer:
parameters, counters and the config, no optimizer state (a resumed run starts a fresh one).

``gala``: the same for each learner in ``checkpoints/learner-<i>/``; then ``checkpoints/latest.pt``
gets the average of the learners' last parameters (``model``), with a ``gala`` entry naming the
learners' own checkpoints. ``fastrl eval --params average|learner-<i>`` picks between them.
"""

from __future__ import annotations

import logging

from fastrl.buffers import RunBuffers
from fastrl.buffers.control import Done, Stat
from fastrl.process.faults import Outcome
from fastrl.runs.checkpoint import CheckpointStore, build_checkpoint, load_checkpoint
from fastrl.runs.run_dir import RunDir
from fastrl.spec import RunSpec

log = logging.getLogger(__name__)


def ensure_checkpoint(spec: RunSpec, buffers: RunBuffers, run_dir: RunDir, allowed: bool) -> Outcome:
    """``allowed`` False (a forced stop): write nothing, report what is there. A write that fails (a full
    disk) is reported in the outcome, beside the newest checkpoint there is."""
    store = CheckpointStore(spec.checkpoint_dir, spec.config.run.keep_checkpoints)
    reason, unwritten = "the run was forced to stop before one was written", ""
    try:
        if spec.gala:
            if allowed:
                reason = _save_gala(spec, buffers, store) or reason
        elif allowed and not buffers.control.saved:
            reason = _save_from_shared_params(spec, buffers, store) or reason
    except OSError as exc:
        reason = unwritten = f"the last checkpoint: {exc}"
    if not store.latest.exists():
        return Outcome(str(run_dir.path), None, reason, unwritten=unwritten)
    if not allowed:
        return Outcome(str(run_dir.path), str(store.latest), "an earlier checkpoint")
    checkpoint = load_checkpoint(store.latest)
    note = f"version {checkpoint['version']}, {checkpoint['updates']} updates, {checkpoint['frames']} frames"
    return Outcome(str(run_dir.path), str(store.latest), note, bool(checkpoint.get("exact")), unwritten=unwritten)


def _save_gala(spec: RunSpec, buffers: RunBuffers, store: CheckpointStore) -> str | None:
    """Each learner's last good state (its own, or from its shared weights), then their average on top."""
    import torch

    checkpoints = []
    for learner in range(spec.learners):
        own = CheckpointStore(f"{spec.checkpoint_dir}/learner-{learner}", spec.config.run.keep_checkpoints)
        if not buffers.control.learner_done[learner, Done.SAVED]:
            _save_from_shared_params(spec, buffers, own, learner)
        if not own.latest.exists():
            return f"learner-{learner} never published weights"
        checkpoints.append((own.latest, load_checkpoint(own.latest)))
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
    return None


def _save_from_shared_params(
    spec: RunSpec, buffers: RunBuffers, store: CheckpointStore, learner: int = 0
) -> str | None:
    """Write the last published weights as a checkpoint; None, or why it could not."""
    from fastrl.models.policy import build_copy

    model = build_copy(spec.env_info, spec.config)
    version = buffers.snapshot_last_whole(model, learner)
    if version is None:
        return "the learner never published weights"
    state = {
        "model": model.state_dict(),
        "optimizer": None,
        "version": version,
        "rollout": version,  # sync and hts: version v is the one rollout v acts with; async: v batches
        "updates": int(buffers.control.learner_stats[learner][Stat.UPDATES]),
        "frames": version * spec.frames_per_update(learner),
    }
    if version in store.rollouts():  # the learner's own checkpoint of these very weights
        store.point_latest_at(version)
        return None
    store.save(build_checkpoint("shared-params", state, spec.config.to_dict(), resume=state), version)
    log.warning("the learner could not save; wrote version %d from the shared weights to %s", version, store.latest)
    return None
