"""Hyperparameters that move with the frames learned: the learning rate (``algo.lr_schedule``), the
entropy bonus (``algo.entropy_schedule``) and PPO's clip range (``algo.options.clip_schedule``, which its rule
moves: ``fastrl.algos.ppo.PPO.schedule``).

All three read the learner's frame counter, never the clock, so layouts, runs and their resumes see the
same values at the same update. ``share`` is the number of learners the run's frames are split
between (gala's learners times torchrun's ranks): each learner's schedule runs over its share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fastrl.schema import AlgoConfig

if TYPE_CHECKING:
    from fastrl.algos.ppo_options import PPOOptions


def linear(start: float, end: float, done: float) -> float:
    """``start`` moved to ``end`` by ``done`` (a fraction, clamped to [0, 1])."""
    return start + (end - start) * min(max(done, 0.0), 1.0)


def learning_rate(algo: AlgoConfig, frames: float, total_frames: int, share: int = 1) -> float:
    """``lr``, or ``lr`` held for ``lr_anneal_start`` frames, then moved linearly to ``lr_final`` over
    ``lr_anneal_frames`` (0: the rest of ``total_frames``) and held there; times the late cooldown's
    multiplier where ``lr_cooldown_start`` sets one."""
    if algo.lr_schedule == "constant":
        scheduled = algo.lr
    else:
        begin = algo.lr_anneal_start
        span = algo.lr_anneal_frames or max(total_frames - begin, 1)
        scheduled = _annealed(algo.lr, algo.lr_final, span, frames - begin // share, total_frames, share)
    return scheduled * _cooldown(algo, frames, share)


def _cooldown(algo: AlgoConfig, frames: float, share: int) -> float:
    """The late cooldown's multiplier: exactly 1.0 until ``lr_cooldown_start`` (so the updates before it are
    the bits they were without one), then linearly to ``lr_cooldown_factor`` over ``lr_cooldown_frames``."""
    if not algo.lr_cooldown_start or frames < algo.lr_cooldown_start // share:
        return 1.0
    done = (frames - algo.lr_cooldown_start // share) / max(algo.lr_cooldown_frames // share, 1)
    return linear(1.0, algo.lr_cooldown_factor, done)


def entropy_coef(algo: AlgoConfig, frames: float, total_frames: int, share: int = 1) -> float:
    """``entropy_coef``, or ``entropy_coef`` held for ``entropy_anneal_start`` frames (exactly: the updates
    before it are the constant bonus's bits), then moved linearly to ``entropy_final`` over
    ``entropy_anneal_frames`` (0: the rest of ``total_frames``) and held there."""
    if algo.entropy_schedule == "constant":
        return algo.entropy_coef
    begin = algo.entropy_anneal_start
    span = algo.entropy_anneal_frames or max(total_frames - begin, 1)
    return _annealed(algo.entropy_coef, algo.entropy_final, span, frames - begin // share, total_frames, share)


def clip_range(options: PPOOptions, frames: float, total_frames: int, share: int = 1) -> float:
    """PPO's ``clip``, or ``clip`` moved linearly to ``clip_final`` over ``clip_anneal_frames``
    (0: ``total_frames``) and held there."""
    if options.clip_schedule == "constant":
        return options.clip
    return _annealed(options.clip, options.clip_final, options.clip_anneal_frames, frames, total_frames, share)


def _annealed(start: float, end: float, anneal_frames: int, frames: float, total_frames: int, share: int) -> float:
    """``start`` moved linearly to ``end`` over this learner's share of ``anneal_frames`` (0: ``total_frames``)."""
    span = anneal_frames or total_frames
    return linear(start, end, frames / max(span // share, 1))


@dataclass(frozen=True)
class FrameClock:
    """The frames clock of one learner's schedules, for whoever knows only a policy version (an actor acting
    with it, an update rule learning from its data): version v has learned from v updates' frames."""

    frames_per_update: int
    total_frames: int  # the run's budget (run.total_frames), over every learner
    share: int = 1  # the learners the frames are split between (gala's, times torchrun's ranks)

    @classmethod
    def of(cls, spec, learner: int = 0) -> FrameClock:
        share = spec.learners * spec.rank_count
        return cls(spec.frames_per_update(learner), spec.config.run.total_frames, share)

    def annealed(self, start: float, end: float, anneal_frames: int, version: int) -> float:
        """``start`` moved linearly to ``end`` over this learner's share of ``anneal_frames`` (0:
        ``total_frames``), at policy version ``version``: as the learner's own schedules move."""
        return _annealed(start, end, anneal_frames, version * self.frames_per_update, self.total_frames, self.share)
