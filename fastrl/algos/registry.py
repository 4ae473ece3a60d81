"""The learning algorithms the engine knows, one registration each: what the config's choices and checks, the
modes, the learner and the metrics read, so that an algorithm is its module plus this one entry.

An ``Algorithm`` says what the engine needs to know of a learning algorithm without importing it (the config
layer imports no torch): its update rule by path (``"package.module:Class"``, a ``fastrl.algos.update_rule``
``UpdateRule``), the policy lags it learns at (0: lockstep, ``sync``; 1: one storage behind, ``hts``; None:
measured, ``async``), which shared settings it takes, the metrics it reports, its own hyper-parameters (a
dataclass the config's ``[algo.options]`` table fills, checked like every key) and its cross-key checks.

Built-in: A2C, PPO, IMPALA and "none" (collect only), registered below. Another algorithm registers from its
own module with ``register_algorithm`` (``fastrl.register_algorithm``) and is named in a config as
``algo.name = "package.module:NAME"`` (the module-level ``Algorithm`` it registered), imported when a run
starts, as env and model factories are, never when a config is merely read (``fastrl eval`` of someone else's
run). docs/extending.md has a complete example.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastrl.errors import ConfigError
from fastrl.plugins import imported, resolved
from fastrl.registry import Registry, RegistryError
from fastrl.tables import build_section

LAGS = {0: "sync", 1: "hts", None: "async"}  # the policy lag of each mode's data
DEFAULT_PREFERENCE = ("ppo", "impala", "a2c")  # what algo.name = "auto" takes, the first the mode learns with
LOSSES = ("policy_loss", "value_loss", "entropy")  # what every rule reports: the core's own columns, not a metric


@dataclass(frozen=True)
class Algorithm:
    """One learning algorithm, as the engine knows it."""

    name: str
    rule: str | Callable[..., Any]  # its UpdateRule class, or "package.module:Class" (imported when a run starts)
    lags: tuple[int | None, ...]  # the policy lags it learns at: 0 (sync), 1 (hts), None (async: measured)
    summary: str = ""  # one line: what it is (the config reference and the errors quote it)
    learns: bool = True  # False: collects only ("none"): reward normalisation has nothing to train
    normalizes_returns: bool = False  # takes algo.normalize_returns (its value loss reads the returns' scale)
    epochs: bool = False  # learns in algo.epochs passes of algo.minibatches minibatch steps (else one step per update)
    # the figures its rule reports beside the losses (``learn``'s and ``scheduled_metrics``'s keys): the run's plan
    # gives each a column of every learner's stats row (``Control.metric_column``), and each is a metrics.jsonl key
    metrics: tuple[str, ...] = ()
    # a dataclass of its own hyper-parameters (or its path, in a module that imports no torch: the config checks and
    # lists them): the config's [algo.options]; its rule gets them built (``options=``)
    options: type | str | None = None
    # [algo] keys of older configs that are now its options, still read there with a warning (fastrl.config.moved_keys)
    moved_keys: tuple[str, ...] = ()
    check: Callable[[Any], str | None] | None = None  # its cross-key checks on the Config: the error, or None
    gala: bool = False  # a GALA agent's rule (each gala learner learns with it)
    # learns from a multi-agent env's agent rows: its loss weighs each row by how its agent took part (the `live`
    # field, fastrl.algos.update_rule.live_weights); waiting and absent agents' rows are skipped
    agent_rows: bool = False
    # (spec, options) -> the actors' ActionDistribution, or its path; None: the action space's own (categorical,
    # Gaussian...). An algorithm that acts otherwise (PQN's epsilon-greedy) names its own.
    sampler: str | Callable[..., Any] | None = None
    model: str | None = None  # what model.name = "auto" builds for it (e.g. a Q-network); None: the built-ins

    def options_class(self) -> type | None:
        return resolved(self.options, f"algorithm {self.name!r}'s options")

    def sampler_factory(self) -> Callable[..., Any] | None:
        return resolved(self.sampler, f"algorithm {self.name!r}'s sampler")

    def rule_class(self) -> Callable[..., Any]:
        """Its UpdateRule class or factory (imported on first use)."""
        return resolved(self.rule, f"algorithm {self.name!r}'s rule")


def _contract_of(name: str, algorithm: Any) -> str | None:
    """What a registration lacks, or None (the registry's check)."""
    if not isinstance(algorithm, Algorithm):
        return (
            f"it names {type(algorithm).__name__} {algorithm!r}, not a fastrl Algorithm: a plug-in module defines "
            "NAME = fastrl.register_algorithm(fastrl.Algorithm(...)) (docs/extending.md)"
        )
    if algorithm.name != name:
        return f"it is registered as {name!r} but its Algorithm is named {algorithm.name!r}"
    return _contract(algorithm)


ALGORITHMS: Registry[Algorithm] = Registry("algorithm", check=_contract_of)


def register_algorithm(algorithm: Algorithm) -> Algorithm:
    """Make ``algorithm`` known under its name (a plug-in's module calls this at import); returns it."""
    if not isinstance(algorithm, Algorithm):
        raise RegistryError(f"register_algorithm takes a fastrl Algorithm, got {type(algorithm).__name__}")
    problem = _contract(algorithm)  # before the registry's own check of the name, to name the field
    if problem:
        raise RegistryError(f"algorithm {algorithm.name!r} cannot be registered: {problem}")
    ALGORITHMS.register(algorithm.name, algorithm)
    return algorithm


def _contract(algorithm: Algorithm) -> str | None:
    """What a registration lacks, or None."""
    if not isinstance(algorithm.name, str) or not algorithm.name or ":" in algorithm.name or algorithm.name == "auto":
        return f"its name must be a plain word (not 'auto', no ':'; got {algorithm.name!r})"
    lags = algorithm.lags  # a plug-in's own value: a tuple of plain lags, not an int, a list of lists...
    if not isinstance(lags, tuple) or not lags or any(lag.__hash__ is None or lag not in LAGS for lag in lags):
        return f"lags must name the policy lags it learns at, from {sorted(LAGS, key=str)} (got {algorithm.lags!r})"
    options, sampler = algorithm.options, algorithm.sampler
    if options is not None and not (isinstance(options, str) or dataclasses.is_dataclass(options)):
        return f"options must be a dataclass of its hyper-parameters or its path (got {options!r})"
    if sampler is not None and not (isinstance(sampler, str) or callable(sampler)):
        return f"sampler must be a factory (spec, options) -> ActionDistribution or its path (got {sampler!r})"
    metrics = algorithm.metrics
    if (
        not isinstance(metrics, tuple)
        or not all(isinstance(m, str) and m for m in metrics)
        or len(set(metrics)) != len(metrics)
        or set(metrics) & set(LOSSES)
    ):
        return f"metrics must be distinct names other than the losses {LOSSES}, in a tuple (got {metrics!r})"
    if not (isinstance(algorithm.rule, str) or callable(algorithm.rule)):
        return f"rule must be its UpdateRule class or 'package.module:Class' (got {algorithm.rule!r})"
    return None


def is_plugin(name: str) -> bool:
    """``name`` is ``"package.module:NAME"``: an algorithm of another package."""
    return ":" in name


def known(name: str) -> Algorithm | None:
    """The algorithm of ``algo.name`` if registered, or its plug-in already imported; None for a plug-in not yet
    imported (its checks wait for the run to start) and for unknown names."""
    return _PLUGINS.get(name) if is_plugin(name) else ALGORITHMS.find(name)


_PLUGINS: dict[str, Algorithm] = {}  # "package.module:NAME" -> the Algorithm found there


def load_algorithm(name: str) -> Algorithm:
    """The algorithm of ``algo.name``: a registered one (an installed package's entry point included), or a
    plug-in's ``"package.module:NAME"``, imported here (when a run starts) and checked against the contract. Bad
    names and broken plug-ins: ``RegistryError``, a ``ConfigError``."""
    if not is_plugin(name):
        if name not in ALGORITHMS:
            raise RegistryError(f"algo.name = {name!r}: {allowed_names()}")
        return ALGORITHMS.get(name)
    found = _PLUGINS.get(name)
    if found is None:
        thing = imported(name, f"algo.name = {name!r}")
        problem = _contract_of(getattr(thing, "name", name), thing)
        if problem:
            raise RegistryError(f"algo.name = {name!r}: {problem}")
        if ALGORITHMS.find(thing.name) is not thing:  # an Algorithm built but never registered: registered here
            ALGORITHMS.register(thing.name, thing)  # (its contract checked above, as register_algorithm checks it)
        found = _PLUGINS[name] = thing
    return found


def allowed_names() -> str:
    names = ", ".join(repr(n) for n in ("auto", *ALGORITHMS.names()))
    return f"allowed values are {names}, or 'package.module:NAME' (an algorithm registered with register_algorithm)"


def names() -> tuple[str, ...]:
    """The registered algorithms' names, in registration order (the built-ins first)."""
    return ALGORITHMS.names()


def registered() -> tuple[Algorithm, ...]:
    return tuple(ALGORITHMS.values())


def options_of(algorithm: Algorithm, table: dict) -> Any:
    """``[algo.options]`` as the algorithm's options dataclass (its defaults where the table is silent); keys,
    types and rules checked as every config key is (reading a config left out the keys only other built-in
    algorithms take: ``others_options``). None for an algorithm without options (the table must then be empty)."""
    options = algorithm.options_class()
    if options is None:
        if table:
            raise ConfigError(f"algo.options = {table!r}: algo.name = {algorithm.name!r} takes no options of its own")
        return None
    return build_section(options, table, "algo.options.")


def others_options(algorithm: Algorithm, table: dict) -> dict[str, list[str]]:
    """The keys of ``table`` that ``algorithm`` does not take and another built-in algorithm does: each with the
    algorithms that take it (what reading a config leaves out, naming them)."""
    own = option_names(algorithm)
    owners = {
        key: [n for n in ALGORITHMS.names() if is_built_in(n) and key in option_names(ALGORITHMS.get(n))]
        for key in table
        if key not in own
    }
    return {key: names for key, names in owners.items() if names}


def option_names(algorithm: Algorithm) -> frozenset[str]:
    """The keys of ``[algo.options]`` the algorithm takes (none without an options dataclass)."""
    options = algorithm.options_class()
    return frozenset(f.name for f in dataclasses.fields(options)) if options is not None else frozenset()


def learns_agent_rows(name: str) -> bool:
    """Whether the algorithm of ``algo.name`` learns from a multi-agent env's agent rows (its registration's
    ``agent_rows``); a plug-in's module is imported here, as when its run starts. Bad names: ``ConfigError``."""
    return load_algorithm(name).agent_rows


def _ppo_check(config: Any) -> str | None:
    engine, algo = config.engine, config.algo
    if algo.minibatches > engine.envs * engine.rollout:
        return (
            f"algo.minibatches = {algo.minibatches} is more than the {engine.envs * engine.rollout} steps "
            f"of a storage (engine.envs x engine.rollout)"
        )
    if config.model.lstm and algo.minibatches > engine.envs:
        return (
            f"algo.minibatches = {algo.minibatches} is more than engine.envs = {engine.envs}: with model.lstm "
            f"a minibatch is whole envs' rollouts (replayed from their first state), so at most one per env"
        )
    return None


# the built-ins, in the order the docs give them
register_algorithm(
    Algorithm(
        "a2c",
        "fastrl.algos.a2c:a2c_rule",
        lags=(0, 1),
        summary="A2C: n-step returns, one gradient per rollout (PAAC in sync, HTS-RL's delayed gradient in hts)",
        gala=True,
        agent_rows=True,
    )
)
register_algorithm(
    Algorithm(
        "ppo",
        "fastrl.algos.ppo:PPO",
        lags=(0, 1),
        summary="PPO: GAE, clipped-ratio epochs over minibatches",
        normalizes_returns=True,
        epochs=True,
        metrics=("clip", "clip_fraction", "approx_kl", "epochs_done"),
        options="fastrl.algos.ppo_options:PPOOptions",
        moved_keys=(
            "clip",
            "clip_schedule",
            "clip_final",
            "clip_anneal_frames",
            "value_clip",
            "target_kl",
            "gae_lambda",
            "normalize_advantages",
        ),
        check=_ppo_check,
        agent_rows=True,
    )
)
register_algorithm(
    Algorithm(
        "impala",
        "fastrl.algos.impala:Impala",
        lags=(None,),
        summary="IMPALA: V-trace on gathered batches",
        normalizes_returns=True,  # PopArt (fastrl.algos.popart)
        options="fastrl.algos.impala_options:ImpalaOptions",
        moved_keys=("rho_bar", "c_bar", "vtrace_lambda"),
        agent_rows=True,
    )
)
register_algorithm(
    Algorithm(
        "pqn",
        "fastrl.algos.pqn:PQN",
        lags=(0,),
        summary="PQN: Q(lambda) from parallel envs, LayerNorm, no replay or target network, epsilon-greedy",
        metrics=("epsilon", "q_mean"),
        epochs=True,
        options="fastrl.algos.pqn_options:PQNOptions",
        sampler="fastrl.algos.pqn:epsilon_greedy_sampler",
        model="fastrl.algos.pqn:q_network",
    )
)
register_algorithm(
    Algorithm(
        "none",
        "fastrl.algos.update_rule:Collect",
        lags=(0, 1, None),
        summary="collects without learning (benchmarks)",
        learns=False,
        gala=True,
        agent_rows=True,  # it learns nothing, so any env's rows will do (fastrl bench two-player samples so)
    )
)

BUILT_IN = frozenset(ALGORITHMS.registered_here())  # the algorithms above; any other is a plug-in


def is_built_in(name: str) -> bool:
    """Whether ``algo.name`` is one of fastrl's own algorithms (any other's rule is checked at warm-up:
    ``fastrl.learning.rule_contract``)."""
    return name in BUILT_IN
