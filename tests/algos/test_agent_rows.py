"""Whether an algorithm learns from a multi-agent env's agent rows is its registration's word (``agent_rows``),
asked by name with ``learns_agent_rows``."""

import pytest

from fastrl.algos import registry
from fastrl.algos.registry import Algorithm, learns_agent_rows, register_algorithm
from fastrl.config import ConfigError

pytestmark = pytest.mark.unit  # the fast tier: no engine run


def test_which_algorithms_learn_from_agent_rows_is_their_registrations_word(scoped_registries):
    learners = {name for name in ("a2c", "ppo", "impala", "pqn", "none") if learns_agent_rows(name)}
    assert learners == {"a2c", "ppo", "impala", "none"}  # "none" learns nothing, so any rows will do
    assert Algorithm("plain", "fastrl.algos.update_rule:Collect", lags=(0,)).agent_rows is False  # the default
    scoped_registries(registry.ALGORITHMS)  # registered for this test only
    register_algorithm(Algorithm("rows_probe", "fastrl.algos.update_rule:Collect", lags=(0,), agent_rows=True))
    assert learns_agent_rows("rows_probe")
    with pytest.raises(ConfigError, match="allowed values"):
        learns_agent_rows("no_such_algorithm")
