"""Every message on a channel decodes to what was encoded, on ints and on the arrays the actor decodes."""
import numpy as np
import pytest

from fastrl.config import load_config
from fastrl.sampling.channels import (
    _int_dumps,
    _int_loads,
    decode_go,
    decode_request,
    decode_rollout_done,
    encode_go,
    encode_request,
    encode_rollout_done,
)

pytestmark = pytest.mark.unit  # the fast tier: no engine run

ENVS = [1, 3, 16, 48]


@pytest.mark.parametrize("envs", ENVS)
def test_request_round_trip(envs):
    for env in range(envs):
        for row in (0, 1, 64, 10_000):
            assert decode_request(encode_request(env, row, envs), envs) == (env, row)
    env, row = np.meshgrid(np.arange(envs), np.arange(0, 500, 7))
    messages = np.asarray([encode_request(int(e), int(r), envs) for e, r in zip(env.ravel(), row.ravel())])
    decoded_env, decoded_row = decode_request(messages, envs)
    assert (decoded_env == env.ravel()).all() and (decoded_row == row.ravel()).all()


@pytest.mark.parametrize("learners", [1, 2, 4])
def test_go_round_trip_and_never_an_env_id(learners):
    for rollout in (0, 1, 2, 1_000_003):
        for learner in range(learners):
            message = encode_go(rollout, learner, learners)
            assert message < 0  # actions are env ids (>= 0) on the same inbox
            assert decode_go(message, learners) == (rollout, learner)


def test_rollout_done_round_trip():
    for env in (0, 1, 15, 4095):
        for rollout in (0, 1, 2, 77):
            assert decode_rollout_done(encode_rollout_done(env, rollout)) == (env, rollout % 2)
    messages = np.asarray([encode_rollout_done(e, r) for e in range(8) for r in range(3)])
    envs, parity = decode_rollout_done(messages)
    assert envs.tolist() == [e for e in range(8) for _ in range(3)]
    assert parity.tolist() == [r % 2 for _ in range(8) for r in range(3)]


def test_int_queue_bytes_round_trip():
    for message in (0, 1, -1, 2**40, -(2**40), encode_go(123, 1, 2)):
        assert _int_loads(_int_dumps(message)) == message


def test_a_queue_holds_two_rollouts_of_messages_from_the_most_envs_a_run_may_have():
    """engine.envs' bound (fastrl.schema.engine.MAX_ENVS) rests on the queues' measured room."""
    import queue

    from fastrl.sampling.channels import int_queue
    from fastrl.schema.engine import MAX_ENVS, QUEUE_MESSAGES

    q = int_queue()
    held = 0
    try:
        while True:
            q.put_many_nowait(list(range(held, held + 1024)))
            held += 1024
    except queue.Full:
        pass
    assert held == QUEUE_MESSAGES == 2 * MAX_ENVS
    with pytest.raises(Exception, match=f"engine.envs = {MAX_ENVS + 1}: must be <= {MAX_ENVS}"):
        load_config(None, [f"engine.envs={MAX_ENVS + 1}"])
