"""After the workers are gone: make sure ``latest.pt`` holds the last good parameters.

The learner writes that checkpoint itself whenever it can (``Learner.shutdown``) and then
marks itself ``Done.SAVED``. When it could not (killed, stuck, or a forced stop), the main process
writes one from the weights the learner last published into the shared parameter buffer:
parameters, counters and the config, no optimizer state (a resumed run starts a fresh one).

A mode of independent learners (``ModeSpec.independent``): the same for each learner in
``checkpoints/learner-<i>/``; then its mode makes the run's ``checkpoints/latest.pt`` of them
(``Mode.combine_learners``; gala: their average, ``fastrl.layers.gossip.checkpoint``).
"""

from __future__ import annotations

import logging

from fastrl.buffers import RunBuffers
from fastrl.buffers.control import Done, Stat
from fastrl.modes import get_mode
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
        if spec.independent:
            if allowed:
                reason = _save_learners(spec, buffers, store) or reason
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


def _save_learners(spec: RunSpec, buffers: RunBuffers, store: CheckpointStore) -> str | None:
    """Independent learners: each one's last good state (its own, or from its shared weights), then what its mode
    makes of them for the whole run (``Mode.combine_learners``: gala averages them)."""
    checkpoints = []
    for learner in range(spec.learners):
        own = CheckpointStore(f"{spec.checkpoint_dir}/learner-{learner}", spec.config.run.keep_checkpoints)
        if not buffers.control.learner_done[learner, Done.SAVED]:
            _save_from_shared_params(spec, buffers, own, learner)
        if not own.latest.exists():
            return f"learner-{learner} never published weights"
        checkpoints.append((own.latest, load_checkpoint(own.latest)))
    combine = get_mode(spec.config.engine.mode).combine_learners
    if combine is not None:
        combine(spec, checkpoints, store)
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
