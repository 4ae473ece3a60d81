"""PPO's own hyper-parameters: the ``[algo.options]`` table of a run with ``algo.name = "ppo"``, read by its rule
(``fastrl.algos.ppo``). They live apart from the rule only because the config layer, which checks and lists them
(``fastrl config``), imports no torch; what PPO shares with other algorithms (``algo.epochs`` and
``algo.minibatches``, PQN's too; the learning rate, the discount, the loss weights) stays in ``[algo]``."""

from __future__ import annotations

from dataclasses import dataclass

from fastrl.tables import documented_field as _f


@dataclass
class PPOOptions:
    """PPO's own hyper-parameters (``algo.name = "ppo"``)."""

    clip: float = _f(
        0.1, "clip range of the probability ratio (the start of algo.options.clip_schedule)", min_exclusive=0.0
    )
    clip_schedule: str = _f(
        "constant",
        "'constant', or 'linear': clip -> clip_final over clip_anneal_frames, then held, from the learner's "
        "frame counter (deterministic, resumed exactly): large policy steps while little is learned, small after",
        choices=("constant", "linear"),
    )
    clip_final: float = _f(0.1, "algo.options.clip_schedule = 'linear': the clip range it ends at", min_exclusive=0.0)
    clip_anneal_frames: int = _f(
        0, "algo.options.clip_schedule = 'linear': frames to go from clip to clip_final (0: run.total_frames)", min=0
    )
    value_clip: float = _f(
        1.0,
        "clip range of the value change around the pre-update value, in units of the returns' running std "
        "when algo.normalize_returns (0 disables)",
        min=0.0,
    )
    target_kl: float = _f(
        0.0,
        "an update's epochs stop at the first minibatch whose approximate KL from the policy that acted "
        "exceeds 1.5 x target_kl, before its step (stable-baselines3's rule; in hts that policy is one version "
        "behind); 0: every epoch runs. Steps shrink only where they are large; 'epochs_done' in the metrics",
        min=0.0,
    )
    gae_lambda: float = _f(0.95, "GAE lambda (1 gives n-step returns minus V)", min=0.0, max=1.0)
    normalize_advantages: bool = _f(True, "standardize advantages per minibatch")
