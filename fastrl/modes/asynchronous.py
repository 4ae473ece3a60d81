"""``async`` (IMPALA, Espeholt et al. 2018): no barrier; the learner takes batches of full slots.

The slots circulate through a free and a full queue of slot indices. An env takes any free slot,
fills it with T steps, pushes it full; the learner takes ``algo.batch_slots`` full slots (a gather:
a copy, since they are not contiguous), frees them at once, takes one V-trace step and publishes
θ with the next version. ``engine.envs + 2 * algo.batch_slots`` slots: one being filled per env,
one batch being learned from and one batch queueing, so an env waits for a free slot only when
the learner falls more than a batch behind.

The actors act with whatever version is published, so a batch holds data of several versions:
the policy lag is measured per batch and logged (mean and max), never asserted, and V-trace
corrects it. Timing decides which slots make a batch: an async run is not deterministic.

Where the loop lives: ``fastrl.learning.async_learner.AsyncLearner``, a ``Learner`` subclass
chosen by the ``queued`` flag, not a ``Schedule`` here. Its loop is not an order of barrier
steps but queue traffic (take full slots, gather, free) around one update; a schedule object
that owned it would reach into the learner's channels and buffers, which this package (imported
by the config and by executors) must not know. What it shares with the barrier modes (the
checked optimizer step, counting, publishing, checkpoints) it inherits.
"""

from __future__ import annotations

from fastrl.modes.base import Mode, ModeSpec

SPEC = ModeSpec("async", storages=0, policy_lag=None, lockstep=False, queued=True)
MODE = Mode(
    "async",
    (None,),
    "V-trace corrects its lag",
    lambda config: SPEC,
    summary="IMPALA: no barrier, measured lag; nondeterministic by nature",
)
