import os

import numpy as np
import pytest
import torch

from fastrl.buffers import BufferPlan, RunBuffers
from fastrl.buffers.arena import Arena, ShmSpaceError, check_space, list_segments
from fastrl.buffers.layout import ALIGN, Layout
from fastrl.buffers.params import SharedParams
from fastrl.buffers.slots import SlotShape

pytestmark = pytest.mark.unit  # the fast tier: no engine run


def test_layout_aligns_every_field():
    layout = Layout.plan([("a", (3,), "uint8"), ("b", (5, 7), "float64"), ("c", (1,), "int64")])
    assert all(f.offset % ALIGN == 0 for f in layout.fields)
    assert layout.nbytes >= sum(f.nbytes for f in layout.fields)


def test_attach_sees_the_same_memory_and_only_the_owner_unlinks():
    layout = Layout.plan([("x", (4, 6), "float32")])
    owner = Arena.create(layout)
    try:
        reader = Arena.attach(owner.spec)
        owner.arrays["x"][2, 3] = 7.5
        assert reader.arrays["x"][2, 3] == 7.5
        with pytest.raises(RuntimeError, match="only the process that created"):
            reader.unlink()
        reader.close()
    finally:
        owner.close()
        owner.unlink()
    assert owner.spec.name not in list_segments()


def test_segment_names_carry_the_owner_pid():
    owner = Arena.create(Layout.plan([("x", (1,), "int64")]))
    try:
        assert owner.spec.name.startswith(f"fastrl_{os.getpid()}_")
    finally:
        owner.close()
        owner.unlink()


def test_space_check_names_both_numbers_and_the_knob():
    with pytest.raises(ShmSpaceError, match=r"need .* GiB of shared memory, but .* GiB free .* lower engine.envs"):
        check_space(1 << 60)


def test_storage_is_a_view_of_contiguous_slots():
    plan = BufferPlan(SlotShape(slots=6, steps=4, obs_shape=(3,), obs_dtype="float32"), n_params=10, learners=1,
                      workers=3)
    buffers = RunBuffers.create(plan)
    try:
        storage = buffers.slots.storage(3, 3)
        assert storage["obs"].shape == (3, 5, 3)
        assert np.shares_memory(storage["obs"], buffers.slots.rows["obs"])
        row = buffers.slots.row(4, 2)
        buffers.slots.rows["reward"][row] = 9.0
        assert storage["reward"][1, 2] == 9.0
    finally:
        buffers.close()
        buffers.arena.unlink()


def test_layer_arrays_sit_between_the_weights_and_the_control_block():
    """The segment's order every worker maps: slots, published weights, the layers' own arrays (as their plans
    named them), control."""
    shape = SlotShape(2, 3, (4,), "float32")
    arrays = (("probe", (2, 10), "float32"), ("probe_header", (2, 8), "int64"))
    layout = BufferPlan(shape, n_params=10, learners=2, workers=3, weight_slots=2, layer_arrays=arrays).layout()
    names = [f.name for f in layout.fields]
    assert names[names.index("params_header") + 1 : names.index("params_header") + 3] == ["probe", "probe_header"]
    assert [layout.field(name).shape for name in ("probe", "probe_header")] == [(2, 10), (2, 8)]
    assert layout.field("params").shape == (4, 10)  # learner l's weight slot k is row l * 2 + k
    assert names.index("probe_header") < names.index("flags")  # the control block's first array


def test_params_publish_and_load_by_version():
    model = torch.nn.Linear(3, 2)
    n = sum(t.numel() for t in model.state_dict().values())
    plan = BufferPlan(SlotShape(1, 1, (3,), "float32"), n_params=n, learners=1, workers=1)
    buffers = RunBuffers.create(plan)
    try:
        shared: SharedParams = buffers.shared_params(0)
        shared.publish(model, 5)
        copy = torch.nn.Linear(3, 2)
        assert shared.load_into(copy, -1) == 5
        assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), copy.state_dict().values()))
        with torch.no_grad():
            copy.weight.zero_()
        assert shared.load_into(copy, 5) == 5  # same version: nothing copied
        assert not copy.weight.any()
    finally:
        buffers.close()
        buffers.arena.unlink()


@pytest.mark.parametrize("weight_slots", [1, 2])
def test_a_learner_killed_while_publishing_leaves_its_last_whole_weights(weight_slots):
    """Version 6 half-written (odd counter, garbage in the slot) as a kill -9 mid-copy leaves it: the main process
    still gets version 5 whole, from the rescue copy (one slot) or from the other slot (two)."""
    from fastrl.buffers.params import SEQ

    model = torch.nn.Linear(3, 2)
    n = sum(t.numel() for t in model.state_dict().values())
    plan = BufferPlan(SlotShape(1, 1, (3,), "float32"), n_params=n, learners=1, workers=1, weight_slots=weight_slots)
    buffers = RunBuffers.create(plan)
    try:
        slot = buffers.shared_params(0, slot=5 % weight_slots)
        slot.publish(model, 5)
        rescue = buffers.rescue_params(0)
        assert (rescue is None) == (weight_slots == 2)
        if rescue is not None:  # as Learner.publish keeps it
            rescue.write_flat(slot.flat, 5)
        torn = buffers.shared_params(0, slot=6 % weight_slots)
        torn.header[SEQ] += 1  # the learner died here, in the middle of publishing version 6
        torn.flat.fill_(float("nan"))
        copy = torch.nn.Linear(3, 2)
        assert buffers.snapshot_last_whole(copy, torn_wait_s=0.05) == 5
        assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), copy.state_dict().values()))
    finally:
        buffers.close()
        buffers.arena.unlink()


def test_nothing_published_gives_no_weights():
    plan = BufferPlan(SlotShape(1, 1, (3,), "float32"), n_params=8, learners=1, workers=1)
    buffers = RunBuffers.create(plan)
    try:
        assert buffers.snapshot_last_whole(torch.nn.Linear(3, 2), torn_wait_s=0.05) is None
    finally:
        buffers.close()
        buffers.arena.unlink()
