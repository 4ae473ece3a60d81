"""The component protocol (``fastrl.process.component``): every role offers all of it, and a run's
components are the worker processes it starts, in the order the serial loop polls them."""
import pytest

from fastrl.config import EngineConfig
from fastrl.learning.async_learner import AsyncLearner
from fastrl.learning.learner import Learner
from fastrl.process.component import Component, roles, torch_threads
from fastrl.sampling.actor import Actor
from fastrl.sampling.executor import Executor
from fastrl.sampling.inline import InlinePair

pytestmark = pytest.mark.unit  # the fast tier: no engine run

PROTOCOL = sorted(name for name in vars(Component) if not name.startswith("_"))


def _engine(**keys) -> EngineConfig:
    return EngineConfig(**{"executors": 2, "actors": 1, "inline_actors": False, "learners": 1, **keys})


def test_the_protocol_is_start_poll_shutdown_close():
    assert PROTOCOL == ["close", "poll", "shutdown", "start"]


@pytest.mark.parametrize("role", [Executor, Actor, InlinePair, Learner, AsyncLearner])
def test_every_role_offers_the_whole_protocol(role):
    for name in PROTOCOL:
        assert callable(getattr(role, name, None)), f"{role.__name__} has no {name}()"


def test_roles_are_the_processes_a_run_starts():
    assert roles(_engine()) == [("executor", 0), ("executor", 1), ("actor", 0), ("learner", 0)]
    inline = _engine(actors=2, inline_actors=True, learners=2)  # each actor runs inside its executor
    assert roles(inline) == [("executor", 0), ("executor", 1), ("learner", 0), ("learner", 1)]


def test_only_roles_that_run_torch_set_its_threads():
    engine = _engine(actor_threads=3, learner_threads=5)
    assert (torch_threads("learner", engine), torch_threads("actor", engine)) == (5, 3)
    assert torch_threads("executor", engine) is None  # a plain executor never loads torch
    assert torch_threads("executor", _engine(actors=2, inline_actors=True, actor_threads=3)) == 3
