"""Family 4, what a user's env returns: observations of the wrong dtype, shape or range, NaN or inf; rewards NaN,
inf, huge or of the wrong type; terminated/truncated not booleans; info not a dict; reset returning the wrong
tuple; spaces that change; step raising one time in N; arrays changed after they were returned. Each run (in this
process, ``engine.serial``: ~0.1 s) completes, is refused at start naming the env, or stops naming the env, its
index and the step; with ``env.on_error = "reset"`` a step's fault is counted and the run goes on."""

import json

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fastrl
from tests.fuzz.cases import fuzz
from tests.fuzz.checks import assert_nothing_left, breach, outcome
from tests.fuzz.strategies import action_spaces, observation_spaces, space_spec
from tests.helpers.leftovers import shm_entries
from tests.helpers.runs import cartpole

pytestmark = pytest.mark.engine
FAMILY = "env_outputs"

DTYPE_NAMES = hnp.scalar_dtypes().filter(lambda d: d.kind in "biufc").map(lambda d: d.name)
ARRAYS = st.builds(
    lambda values, dtype: {"array": values, "dtype": dtype},
    st.lists(st.integers(-300, 300), max_size=6) | st.lists(st.lists(st.integers(0, 2), min_size=2, max_size=2),
                                                            min_size=1, max_size=2),
    DTYPE_NAMES,
)
SCALARS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.integers(-(2**70), 2**70), st.booleans(), st.none(),
    st.text(max_size=4),
)
VALUES = st.one_of(SCALARS, ARRAYS, st.lists(SCALARS, max_size=3), st.dictionaries(st.text(max_size=3), SCALARS,
                                                                                    max_size=2))
FAULTS = {
    "obs": VALUES,
    "obs_fill": st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(2**40), 2**40)),
    "obs_dtype": DTYPE_NAMES,
    "reward": VALUES,
    "terminated": VALUES,
    "truncated": VALUES,
    "info": VALUES,
    "reset_return": st.one_of(VALUES, st.tuples(VALUES, VALUES, VALUES).map(list)),
    "obs_space": observation_spaces().map(lambda s: {"space": space_spec(s)}),
    "act_space": action_spaces().map(lambda s: {"space": space_spec(s)}),
    "raise_every": st.integers(1, 50),
    "mutate": st.none(),
}


@st.composite
def env_specs(draw):
    fault = draw(st.sampled_from(sorted(FAULTS)))
    return {"obs": space_spec(draw(observation_spaces())), "act": space_spec(draw(action_spaces())),
            "fault": fault, "at": draw(st.integers(1, 40)), "value": draw(FAULTS[fault])}


def _bool_like(value) -> bool:
    return isinstance(value, (bool, np.bool_))


@fuzz(sample=12, full=600)
@given(env_specs(), st.sampled_from(["raise", "reset"]))
@example({"obs": {"kind": "discrete", "n": 2, "start": 0}, "act": {"kind": "discrete", "n": 2, "start": 0},
          "fault": "terminated", "at": 5, "value": "no"}, "raise")  # found: 'no' was read as true, ending episodes
@example({"obs": {"kind": "discrete", "n": 2, "start": 0}, "act": {"kind": "discrete", "n": 2, "start": 0},
          "fault": "reset_return", "at": 2, "value": [1, {}, 0]}, "raise")  # found: "too many values to unpack"
@example({"obs": {"kind": "discrete", "n": 2, "start": 0}, "act": {"kind": "discrete", "n": 2, "start": 0},
          "fault": "reward", "at": 1, "value": ""}, "raise")  # found: "could not convert string to float", unnamed
def test_what_an_env_returns_ends_its_run_named_or_goes_on(tmp_path_factory, spec, on_error):
    tmp = tmp_path_factory.mktemp("env")
    text = json.dumps(spec).replace("'", "\\u0027")
    _, base = cartpole(tmp, "env.id='tests.fuzz.envs:make'", f"env.kwargs={{ spec = '{text}' }}",
                       "engine.serial=true", "run.total_frames=160", "engine.envs=2", "engine.executors=1",
                       "engine.actors=1", f"env.on_error='{on_error}'", "algo.lr_schedule='constant'")
    shm = shm_entries()
    kind, result = outcome(FAMILY, lambda: fastrl.train(None, base, run_dir=tmp / "run"))
    if kind == "refused":
        message = str(result)
        if "tests.fuzz.envs:make" not in message and "env" not in message:
            raise breach(FAMILY, "unnamed", message)
        if (tmp / "run").exists():
            raise breach(FAMILY, "damaged", "a refused run wrote its directory")
    elif kind == "run_failed":
        message = str(result)
        learner = "non-finite" in message  # a huge finite reward overflows the loss: the learner's fault, named so
        if not learner and ("env 'tests.fuzz.envs:make' #" not in message or "step" not in message):
            raise breach(FAMILY, "unnamed", f"the run's fault does not name the env, its index and step: {message}")
    else:
        handled = on_error == "reset" and result["env_errors"] > 0  # counted, the env reset: env.on_error
        must_stop = spec["fault"] in ("terminated", "truncated") and spec["at"] <= 9 and not handled
        if must_stop and not _bool_like(spec["value"]):
            raise breach(FAMILY, "accepted_bad", f"{spec['fault']} = {spec['value']!r} went unnoticed: {result}")
    assert_nothing_left(FAMILY, shm)
