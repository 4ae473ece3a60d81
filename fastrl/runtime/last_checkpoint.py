"""After the workers are gone: make sure ``latest.pt`` holds the last good parameters.

The learner writes that checkpoint itself whenever it can (``Learner.shutdown``) and then
sets ``Flag.SAVED``. When it could not (killed, stuck, or a forced stop), the main process
writes one from the weights the learner last published into the shared parameter buffer:
parameters, counters and the config, no optimizer state (a resumed run starts a fresh one).
"""
from __future__ import annotations

import logging

from fastrl.buffers import RunBuffers
from fastrl.buffers.control import Flag, Stat
from fastrl.checkpoint import CheckpointStore, load_checkpoint
from fastrl.run_dir import RunDir
from fastrl.runtime.faults import Outcome
from fastrl.runtime.spec import RunSpec

log = logging.getLogger(__name__)


def ensure_checkpoint(spec: RunSpec, buffers: RunBuffers, run_dir: RunDir, allowed: bool) -> Outcome:
    """``allowed`` False (a forced stop): write nothing, report what is there."""
    store = CheckpointStore(spec.checkpoint_dir, spec.config.run.keep_checkpoints)
    reason = "the run was forced to stop before one was written"
    if allowed and not buffers.control.is_set(Flag.SAVED):
        reason = _save_from_shared_params(spec, buffers, store) or reason
    if not store.latest.exists():
        return Outcome(str(run_dir.path), None, reason)
    if not allowed:
        return Outcome(str(run_dir.path), str(store.latest), "an earlier checkpoint")
    checkpoint = load_checkpoint(store.latest)
    note = f"version {checkpoint['version']}, {checkpoint['updates']} updates, {checkpoint['frames']} frames"
    return Outcome(str(run_dir.path), str(store.latest), note, bool(checkpoint.get("exact")))


def _save_from_shared_params(spec: RunSpec, buffers: RunBuffers, store: CheckpointStore) -> str | None:
    """Write the last published weights as a checkpoint; None, or why it could not."""
    from fastrl.runtime.actor import build_policy

    model = build_policy(spec)
    version = buffers.shared_params(0).snapshot_into(model)
    if version is None:
        return "the learner never published weights, or died while publishing them"
    stats = buffers.control.learner_stats[0]
    slots_per_update = spec.config.algo.batch_slots if spec.mode.queued else spec.envs
    state = {
        "model": model.state_dict(),
        "optimizer": None,
        "pending_grads": None,
        "version": version,
        "rollout": version,  # sync and hts: version v is the one rollout v acts with; async: v batches
        "updates": int(stats[Stat.UPDATES]),
        "frames": version * slots_per_update * spec.steps * spec.env_info.frames_per_step,
    }
    if version in store.rollouts():  # the learner's own checkpoint of these very weights
        store.point_latest_at(version)
        return None
    checkpoint = {
        "format": 1,
        "kind": "shared-params",
        **{k: v for k, v in state.items() if k != "pending_grads"},
        "config": spec.config.to_dict(),
        "exact": False,
        "env_states": None,
        "resume": state,
    }
    store.save(checkpoint, version)
    log.warning("the learner could not save; wrote version %d from the shared weights to %s", version, store.latest)
    return None
