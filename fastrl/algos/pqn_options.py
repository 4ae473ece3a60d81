"""PQN's own hyper-parameters: the ``[algo.options]`` table of a run with ``algo.name = "pqn"``, read by its rule
and its ε-greedy sampler (``fastrl.algos.pqn``). Apart from them only because the config layer, which checks and
lists them (``fastrl config``), imports no torch. PQN's epochs and minibatches are the shared ``algo.epochs``
and ``algo.minibatches`` (its registration's ``epochs=True``), drawn as PPO's are."""

from __future__ import annotations

from dataclasses import dataclass

from fastrl.tables import documented_field as _f


@dataclass
class PQNOptions:
    """PQN's own hyper-parameters (``algo.name = "pqn"``)."""

    epsilon_start: float = _f(1.0, "ε at the start", min=0.0, max=1.0)
    epsilon_final: float = _f(0.01, "ε after the anneal", min=0.0, max=1.0)
    epsilon_anneal_frames: int = _f(0, "frames over which ε moves to epsilon_final (0: run.total_frames / 10)", min=0)
    q_lambda: float = _f(0.65, "λ of the Q(λ) targets", min=0.0, max=1.0)
