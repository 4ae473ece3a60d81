"""Family 5, plug-ins: a model whose factory or forward raises, returns NaN or inf, the wrong shape, dtype or
device; algorithm registrations with generated fields (lags, metrics, rule, options, name), some incomplete, and
registered ones whose loss raises or is NaN. Each is refused before the run starts, naming it (exit 2), or ends
the run as a fault naming it (exit 1), or runs."""

from dataclasses import dataclass, field

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import fastrl
from fastrl.algos.registry import ALGORITHMS, Algorithm, register_algorithm
from tests.fuzz.cases import fuzz
from tests.fuzz.checks import assert_nothing_left, breach, outcome
from tests.helpers.runs import cartpole

pytestmark = pytest.mark.engine
FAMILY = "plugins"
MODEL_FAULTS = ("none", "raise_init", "not_module", "raise", "nan_head", "nan_value", "inf_value", "head_shape",
                "value_shape", "int_head", "one_output", "meta_device")


def _run(tmp, *overrides):
    _, base = cartpole(tmp, "engine.serial=true", "run.total_frames=160", "engine.envs=2", *overrides)
    return outcome(FAMILY, lambda: fastrl.train(None, base, run_dir=tmp / "run"))


def _named(kind, result, *names):
    if kind in ("refused", "run_failed") and not any(name in str(result) for name in names):
        raise breach(FAMILY, "unnamed", str(result))


@fuzz(sample=5, full=200)
@given(st.sampled_from(MODEL_FAULTS), st.integers(1, 12))
@example("head_shape", 1)
@example("meta_device", 1)  # found: tensors on another device passed the model's check, then torch failed in the actor
def test_a_model_plugin_that_misbehaves_is_named(tmp_path_factory, fault, at):
    tmp = tmp_path_factory.mktemp("model")
    kind, result = _run(tmp, "model.name='tests.fuzz.plugins:model'", f"model.kwargs={{fault='{fault}', at={at}}}")
    _named(kind, result, "tests.fuzz.plugins:model", "model", "forward", "non-finite", "NaN", "actor-", "learner")
    if kind == "accepted" and fault not in ("none",) and at <= 2:
        raise breach(FAMILY, "accepted_bad", f"model fault {fault} at forward {at} went unnoticed")
    assert_nothing_left(FAMILY)


@dataclass
class FaultOptions:
    fault: str = field(default="none", metadata={"doc": "what the loss does", "choices": ("none", "raise", "nan")})
    at: int = field(default=1, metadata={"doc": "from its at-th call", "min": 1})


NAMES = st.one_of(st.from_regex(r"fuzz_[a-z]{1,6}", fullmatch=True), st.text(max_size=6))
LAG_VALUES = st.one_of(st.sampled_from([0, 1, None]), st.integers(-2, 3), st.text(max_size=2))


@st.composite
def registrations(draw):
    return dict(
        name=draw(NAMES),
        rule=draw(st.sampled_from(["tests.fuzz.plugins:FaultyRule", "tests.fuzz.plugins:nothing", "no_colon", 7,
                                   None])),
        lags=draw(st.one_of(st.lists(LAG_VALUES, max_size=3).map(tuple), LAG_VALUES)),
        metrics=draw(st.lists(st.text(max_size=5), max_size=10).map(tuple)),
        options=draw(st.sampled_from([FaultOptions, None, "tests.fuzz.test_plugins:FaultOptions", dict, 3])),
    )


@fuzz(sample=8, full=250)
@given(registrations(), st.sampled_from(["none", "raise", "nan"]), st.integers(1, 6))
@example(dict(name="fuzz_ok", rule="tests.fuzz.plugins:FaultyRule", lags=(0,), metrics=(), options=FaultOptions),
         "nan", 2)
@example(dict(name="fuzz_lag", rule="tests.fuzz.plugins:FaultyRule", lags=1, metrics=(), options=None), "none", 1)
@example(dict(name=7, rule="tests.fuzz.plugins:FaultyRule", lags=(0,), metrics=(["m"],), options=None), "none", 1)
def test_an_algorithm_registration_is_checked_and_its_faults_named(tmp_path_factory, scoped_registries, fields,
                                                                    fault, at):
    scoped_registries(ALGORITHMS)
    kind, _ = outcome(FAMILY, lambda: register_algorithm(Algorithm(**fields)))
    if kind != "accepted":
        return
    tmp = tmp_path_factory.mktemp("algo")
    options = [f"algo.options={{fault='{fault}', at={at}}}"] if fields["options"] is not None else []
    kind, result = _run(tmp, f"algo.name='{fields['name']}'", "engine.mode='sync'", *options)
    _named(kind, result, fields["name"], "algo", "loss", "non-finite", "NaN")
    assert_nothing_left(FAMILY)
