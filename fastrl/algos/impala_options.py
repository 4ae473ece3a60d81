"""IMPALA's own hyper-parameters: the ``[algo.options]`` table of a run with ``algo.name = "impala"``, read by its
loss (``fastrl.algos.impala``): V-trace's truncations and lambda. Apart from the loss only because the config
layer, which checks and lists them (``fastrl config``), imports no torch. ``algo.batch_slots`` stays in
``[algo]``: it is the async mode's batch, which also sizes the run's slots (``fastrl.modes``)."""

from __future__ import annotations

from dataclasses import dataclass

from fastrl.tables import documented_field as _f


@dataclass
class ImpalaOptions:
    """IMPALA's own hyper-parameters (``algo.name = "impala"``): V-trace's."""

    rho_bar: float = _f(
        1.0,
        "V-trace truncation of the importance weight in the targets and advantages",
        min_exclusive=0.0,
        allow_inf=True,
    )
    c_bar: float = _f(1.0, "V-trace truncation of the trace coefficients", min_exclusive=0.0, allow_inf=True)
    vtrace_lambda: float = _f(1.0, "V-trace lambda (mixes in TD(lambda) traces)", min=0.0, max=1.0)
