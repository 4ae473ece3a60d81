"""gala: learners gossiping on a ring, allreduce, the consensus bound, determinism, checkpoints."""
import json
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import fastrl
from fastrl.buffers import BufferPlan, RunBuffers
from fastrl.buffers.control import Stat, layer_columns
from fastrl.buffers.slots import SlotShape
from fastrl.config import ConfigError, load_config
from fastrl.layers.gossip import GOSSIP_STATS
from fastrl.layers.gossip import bounds as math_
from fastrl.layers.gossip.config import GalaConfig
from fastrl.layers.gossip.mailboxes import gossip_arrays, plan_mailboxes
from fastrl.layers.gossip.mixing import Gossip
from fastrl.runs.checkpoint import load_checkpoint
from tests.helpers.runs import cartpole

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks


def _gala(tmp_path, name, *overrides, learners=4):
    config, base = cartpole(tmp_path, "engine.mode='gala'", f"engine.learners={learners}", *overrides)
    run_dir = tmp_path / name
    return fastrl.train(config, base, run_dir=run_dir), run_dir


def _learner_models(run_dir, learners):
    return [load_checkpoint(run_dir / "checkpoints" / f"learner-{i}")["model"] for i in range(learners)]


def _equal(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# ---------------------------------------------------------------- configuration


@pytest.mark.parametrize(("overrides", "message"), [
    (["engine.mode='gala'", "engine.learners=1"], r"needs engine.learners >= 2"),
    (["engine.mode='gala'", "engine.learners=3", "engine.envs=16"],
     r"engine.envs = 16 must be a multiple of engine.learners = 3"),
    (["engine.mode='gala'", "engine.learners=4", "algo.name='ppo'"], r"learns with algo.name = 'a2c'"),
    (["engine.mode='gala'", "engine.learners=4", "engine.serial=true"], r"engine.serial = true cannot run gala"),
    (["engine.mode='sync'", "engine.learners=2"], r"engine.learners = 2 needs engine.mode = 'gala'"),
    (["engine.mode='gala'", "engine.learners=4", "gala.mixing='star'"],
     r"gala.mixing = 'star': allowed values are 'ring', 'allreduce', 'none'"),
    (["engine.mode='gala'", "engine.learners=4", "gala.max_staleness=-1"], r"gala.max_staleness"),
])
def test_bad_gala_settings_are_named_before_anything_starts(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides)


def test_a_gala_run_cannot_be_resumed_and_says_where_its_parameters_are(tmp_path):
    _, run_dir = _gala(tmp_path, "run", "engine.envs=8", "run.total_frames=400")
    with pytest.raises(ConfigError, match=r"resuming an engine.mode = 'gala' run is not supported.*learner-<i>/"):
        fastrl.train(None, [], resume=run_dir)


# ---------------------------------------------------------------- the bound's mathematics


def test_ring_matrix_is_doubly_stochastic_and_lambda_is_cos_pi_over_n():
    for n in (2, 3, 4, 8):
        w = math_.ring_matrix(n)
        assert np.allclose(w.sum(0), 1) and np.allclose(w.sum(1), 1)
        assert math_.second_singular_value(w) == pytest.approx(abs(np.cos(np.pi / n)), abs=1e-12)
    assert math_.fixed_schedule_factor(2) == pytest.approx(0.0, abs=1e-12)  # two agents average to one point


def test_bound_by_mixing():
    assert math_.consensus_bound("allreduce", 4, 1.0, False) == 0.0
    assert math_.consensus_bound("none", 4, 1.0, False) == float("inf")
    ring = math_.consensus_bound("ring", 4, 0.5, True)
    assert ring == pytest.approx(0.5 * 2 * np.cos(np.pi / 4) / (1 - np.cos(np.pi / 4)))
    assert math_.consensus_bound("ring", 4, 0.5, False, staleness=1) > ring  # delays only loosen it


# ---------------------------------------------------------------- the real mailboxes on a toy problem


@pytest.mark.unit
def test_the_gossip_layer_plans_the_mailboxes_of_a_gala_run_and_of_no_other():
    """The layer's plan hook gives a gala run its arrays, sized by the policy's parameters and the learners (each
    learner's message and its gradients of two updates, a header row each); a sync run gets none."""
    policy = torch.nn.Linear(3, 2)  # 8 parameters
    gala = load_config("cartpole_gala")
    _, needs = plan_mailboxes(gala, None, policy, False)
    n = gala.engine.learners
    assert [(name, shape) for name, shape, _ in needs.arrays] == [
        ("mailbox", (n, 8)), ("mailbox_header", (n, 8)), ("allreduce", (2, n, 8)), ("allreduce_header", (n, 8))
    ]
    assert plan_mailboxes(load_config("cartpole_sync"), None, policy, False)[1].arrays == ()


class _Vector(torch.nn.Module):
    def __init__(self, size):
        super().__init__()
        self.x = torch.nn.Parameter(torch.zeros(size))


def _toy_buffers(learners, size):
    arrays = tuple(gossip_arrays(size, learners))
    plan = BufferPlan(
        SlotShape(1, 1, (1,), "float32"), size, learners, learners, layer_arrays=arrays, layer_stats=GOSSIP_STATS
    )
    return RunBuffers.create(plan)


def _toy_spec(learners, mixing, deterministic, staleness=0):
    gala = GalaConfig(mixing=mixing, deterministic=deterministic, max_staleness=staleness)
    return SimpleNamespace(config=SimpleNamespace(gala=gala), learners=learners)


def _run_toy(mixing, deterministic, learners=4, updates=150, size=16, max_delay_s=0.002, staleness=0, seed=0):
    """Each agent minimises ½‖x − c_i‖² with its own c_i (so they pull apart) by noisy gradient
    steps, in its own thread, with random sleeps before it sends (message delays). Returns the
    radius max_i ‖x_i^k − x̄^k‖ after every update k and the largest update norm up to k."""
    buffers = _toy_buffers(learners, size)
    rng = np.random.default_rng(seed)
    targets = torch.from_numpy(rng.normal(0, 3, (learners, size))).float()
    history = torch.zeros(updates + 1, learners, size)
    norms = torch.zeros(updates + 1, learners)
    spec = _toy_spec(learners, mixing, deterministic, staleness)
    errors = []

    def agent(i):
        try:
            model = _Vector(size)
            gossip = Gossip(spec, buffers, i, model, worker=i)
            local = np.random.default_rng([seed, i])
            for k in range(1, updates + 1):
                with torch.no_grad():
                    step = 0.1 * (model.x - targets[i]) + 0.05 * torch.from_numpy(local.normal(size=size)).float()
                    model.x -= step
                norms[k, i] = float(step.norm())
                buffers.control.learner_stats[i, Stat.MAX_UPDATE_NORM] = float(norms[: k + 1, i].max())
                time.sleep(local.random() * max_delay_s)
                gossip.mix(model, k)
                buffers.shared_params(i).publish(model, k)
                gossip.measure(model)
                history[k, i] = model.x.detach()
            gossip.finish()
        except Exception as exc:  # surfaced by the test
            errors.append(exc)

    threads = [threading.Thread(target=agent, args=(i,)) for i in range(learners)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors
        radius = (history - history.mean(1, keepdim=True)).norm(dim=2).max(1).values
        largest = torch.cummax(norms.max(1).values, 0).values
        stats = buffers.control.learner_stats.copy()
    finally:
        buffers.close()
        buffers.arena.unlink()
    return radius[1:].numpy(), largest[1:].numpy(), stats


def test_fixed_schedule_ring_stays_within_the_bound_despite_message_delays():
    radius, largest, stats = _run_toy("ring", deterministic=True)
    bound = math_.fixed_schedule_factor(4) * largest
    assert (radius <= bound).all(), (radius / bound).max()
    assert (radius[20:] > bound[20:] / 50).all()  # the bound is not vacuous: the agents do pull apart
    column = layer_columns(GOSSIP_STATS)
    assert (stats[:, column["mixes"]] == 150).all()  # the fixed schedule mixed every update's message
    assert (stats[:, column["bound"]] > 0).all() and np.isfinite(stats[:, column["bound"]]).all()


def test_without_mixing_the_same_agents_leave_that_bound():
    radius, largest, _ = _run_toy("none", deterministic=False)
    assert (radius[-50:] > math_.fixed_schedule_factor(4) * largest[-50:]).all()


def test_delayed_ring_stays_within_the_delayed_bound():
    radius, largest, stats = _run_toy("ring", deterministic=False, staleness=2, max_delay_s=0.004)
    staleness = int(stats[:, layer_columns(GOSSIP_STATS)["staleness"]].max())
    assert staleness <= 2
    assert (radius <= math_.delayed_factor(4, staleness) * largest).all()


def test_allreduce_averages_gradients_identically_in_every_learner():
    learners, size = 3, 10
    buffers = _toy_buffers(learners, size)
    spec = _toy_spec(learners, "allreduce", False)
    grads = [[torch.full((size,), float(i + 1) / 7)] for i in range(learners)]
    try:
        threads = [threading.Thread(target=lambda i=i: Gossip(spec, buffers, i, _Vector(size), i)
                                    .reduce_gradients(grads[i], 1)) for i in range(learners)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
    finally:
        buffers.close()
        buffers.arena.unlink()
    expected = (torch.full((size,), 1 / 7) + torch.full((size,), 2 / 7) + torch.full((size,), 3 / 7)) / 3
    for g in grads:
        assert torch.equal(g[0], expected)


# ---------------------------------------------------------------- the engine


def test_gala_ring_run_logs_per_learner_metrics_and_checkpoints(tmp_path):
    summary, run_dir = _gala(tmp_path, "ring", "engine.envs=8", "run.total_frames=1600")
    assert summary["status"] == "complete" and summary["frames"] == 1600
    assert len(summary["learners"]) == 4
    assert all(entry["updates"] == 40 for entry in summary["learners"])  # 400 frames each = 40 x (2 envs x 5 steps)
    bound = summary["consensus_bound"]  # None: beyond float range (the delayed bound is a worst case)
    assert bound is None or summary["consensus_radius"] <= bound
    line = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    assert {"consensus_radius", "consensus_bound", "learners"} <= line.keys()
    assert ({"updates_per_s", "return_mean", "consensus_distance", "consensus_bound", "update_norm"}
            <= line["learners"][0].keys())
    average = load_checkpoint(run_dir)
    models = _learner_models(run_dir, 4)
    assert average["gala"]["learners"] == 4 and average["kind"] == "gala-average"
    for key, value in average["model"].items():
        assert torch.allclose(value, torch.stack([m[key] for m in models]).mean(0), atol=1e-6)
    assert not _equal(models[0], models[1])  # ring mixing does not make them identical


# sync: the same gossip, in the slow run
@pytest.mark.parametrize("base", [pytest.param("sync", marks=pytest.mark.slow), "hts"])
def test_allreduce_keeps_learners_bit_identical(tmp_path, base):
    summary, run_dir = _gala(tmp_path, "allreduce", "engine.envs=8", "run.total_frames=1600",
                             "gala.mixing='allreduce'", f"gala.base='{base}'", "engine.executors=2",
                             "engine.step_delay_s=0.001")
    models = _learner_models(run_dir, 4)
    for other in models[1:]:
        assert _equal(models[0], other)
    assert summary["consensus_radius"] == 0.0


# sync: the same gossip, in the slow run
@pytest.mark.parametrize("base", [pytest.param("sync", marks=pytest.mark.slow), "hts"])
def test_fixed_gossip_schedule_is_bit_reproducible_across_process_layouts(tmp_path, base):
    """gala.deterministic: the same seed with 1 or 2 executors/actors and random delays gives every
    learner bit-identical parameters."""
    runs = []
    for executors, actors in [(1, 1), (2, 2)]:
        _, run_dir = _gala(tmp_path, f"x{executors}a{actors}", "engine.envs=8", "run.total_frames=1600",
                           "gala.deterministic=true", f"gala.base='{base}'", f"engine.executors={executors}",
                           f"engine.actors={actors}", "engine.step_delay_s=0.002")
        runs.append(_learner_models(run_dir, 4))
    for first, second in zip(*runs):
        assert _equal(first, second)
    assert not _equal(runs[0][0], runs[0][1])  # the learners themselves differ: their envs differ
