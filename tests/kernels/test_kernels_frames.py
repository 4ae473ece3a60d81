"""The Atari frame kernels (csrc_free_kernels/frames.py) against their numpy references: the area resize, max-pool,
stack push and fill, and the palette-indexed, incremental path. On real emulator frames (``StepScreens``), and the
adapter they serve: tests/envs/test_atari.py.

Tolerances: max-pool, stack push and stack fill are exact. The area resize is exact against
the float64 reference for power-of-two weights (integer factors 2, 4) and constant images;
for other factors it is within 1 on a small fraction of pixels, where the exact average sits
within float32 rounding of a half (the kernel sums in float32, like OpenCV).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from csrc_free_kernels.frames import (
    area_resize,
    area_resize_reference,
    area_table,
    area_weights_reference,
    colors_known_kernel,
    indexed_maxpool_resize_push_kernel,
    learn_colors_kernel,
    make_resize_plan,
    maxpool,
    maxpool_reference,
    maxpool_resize_push,
    maxpool_resize_push_reference,
    push_reference,
    stack_fill,
    stack_fill_reference,
)

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

SHAPES = [(84, 84), (64, 64), (42, 42), (105, 80), (52, 40), (96, 72), (200, 170), (8, 8)]


def _frames(seed, shape=(210, 160)):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, shape, dtype=np.uint8), rng.integers(0, 256, shape, dtype=np.uint8)


# ---------------------------------------------------------------- resize, max-pool, stack


@pytest.mark.parametrize("src,dst", [(210, 84), (160, 84), (210, 64), (160, 42), (160, 170), (7, 3), (10, 10)])
def test_area_table_matches_dense_weights(src, dst):
    index, weight = area_table(src, dst)
    dense = np.zeros((dst, src))
    np.add.at(dense, (np.repeat(np.arange(dst), index.shape[1]), index.ravel()), weight.ravel())
    np.testing.assert_allclose(dense, area_weights_reference(src, dst), atol=2e-3)  # slivers < 1e-3 dropped
    np.testing.assert_allclose(weight.sum(axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("shape", SHAPES)
def test_resize_within_one_of_exact_average(shape):
    plan = make_resize_plan((210, 160), shape)
    for seed in range(3):
        src, _ = _frames(seed)
        got = area_resize(src, np.empty(shape, np.uint8), plan)
        diff = got.astype(int) - area_resize_reference(src, shape)
        assert np.abs(diff).max() <= 1
        assert np.count_nonzero(diff) <= 0.01 * diff.size


@pytest.mark.parametrize("shape", [(105, 80), (105, 40), (210, 160)])
def test_resize_exact_for_power_of_two_weights(shape):
    plan = make_resize_plan((210, 160), shape)
    src, _ = _frames(7)
    np.testing.assert_array_equal(area_resize(src, np.empty(shape, np.uint8), plan), area_resize_reference(src, shape))


def test_resize_of_constant_image_is_constant():
    plan = make_resize_plan()
    for value in (0, 1, 87, 142, 255):
        src = np.full((210, 160), value, np.uint8)
        assert (area_resize(src, np.empty((84, 84), np.uint8), plan) == value).all()


@pytest.mark.parametrize("shape", [(84, 84), (42, 42), (105, 80)])
@pytest.mark.parametrize("stack", [1, 2, 4])
def test_maxpool_resize_push_matches_reference(shape, stack):
    plan = make_resize_plan((210, 160), shape)
    a, b = _frames(stack)
    prev = np.random.default_rng(1).integers(0, 256, (stack, *shape), dtype=np.uint8)
    out = np.zeros_like(prev)
    maxpool_resize_push(a, b, prev, out, plan)
    want = maxpool_resize_push_reference(a, b, prev)
    np.testing.assert_array_equal(out[:-1], want[:-1])  # the shift is exact
    assert np.abs(out[-1].astype(int) - want[-1]).max() <= 1
    # Max-pool first, then resize: the same as resizing the max-pooled frame.
    np.testing.assert_array_equal(out[-1], area_resize(maxpool_reference(a, b), np.empty(shape, np.uint8), plan))


def test_push_in_place_equals_push_into_other_row():
    plan = make_resize_plan()
    a, b = _frames(3)
    prev = np.random.default_rng(2).integers(0, 256, (4, 84, 84), dtype=np.uint8)
    out = np.empty_like(prev)
    maxpool_resize_push(a, b, prev, out, plan)
    inplace = prev.copy()
    maxpool_resize_push(a, b, inplace, inplace, plan)
    np.testing.assert_array_equal(inplace, out)
    np.testing.assert_array_equal(out[:-1], push_reference(prev, out[-1])[:-1])


def test_maxpool_and_stack_fill_exact():
    a, b = _frames(5)
    np.testing.assert_array_equal(maxpool(a, b, np.empty_like(a)), maxpool_reference(a, b))
    stack = np.random.default_rng(0).integers(0, 256, (4, 84, 84), dtype=np.uint8)
    want = stack_fill_reference(stack)
    np.testing.assert_array_equal(stack_fill(stack), want)


def test_kernel_rejects_mismatched_shapes():
    plan = make_resize_plan()
    a, b = _frames(0)
    with pytest.raises(ValueError):
        maxpool_resize_push(a, b, np.zeros((4, 84, 84), np.uint8), np.zeros((4, 64, 64), np.uint8), plan)
    with pytest.raises(ValueError):
        maxpool_resize_push(a[:200], b[:200], np.zeros((4, 84, 84), np.uint8), np.zeros((4, 84, 84), np.uint8), plan)


# ---------------------------------------------------------------- palette-indexed, incremental path


def _indexed_push(a, b, a_ref, b_ref, lut, state, prev, plan, full, may_differ=None):
    frame, small, changed = state
    out = np.empty_like(prev)
    may_differ = np.ones((1, a.shape[0]), np.bool_) if may_differ is None else may_differ
    rows = indexed_maxpool_resize_push_kernel(a, b, a_ref, b_ref, lut, frame, small, prev, out, *plan, changed, full,
                                              may_differ)
    return out, rows


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), colours=st.integers(1, 128), change=st.floats(0.0, 1.0))
def test_indexed_push_equals_the_gray_path_step_after_step(seed, colours, change):
    """A sequence of palette-index frames with sparse changes: the incremental kernel's output is,
    bit for bit, the full kernel's on the frames' gray levels, at every step (and the recomputed
    output rows are only those reading a changed source row)."""
    rng = np.random.default_rng(seed)
    plan = make_resize_plan()
    palette = rng.choice(np.arange(0, 256, 2), colours, replace=False).astype(np.uint8)
    lut = np.full(256, -1, np.int16)
    lut[palette] = rng.integers(0, 256, colours)
    state = (np.zeros((210, 160), np.uint8), np.zeros((84, 84), np.uint8), np.zeros(210, np.bool_))
    a_ref = b_ref = np.zeros((210, 160), np.uint8)
    a, b = (palette[rng.integers(colours, size=(210, 160))] for _ in range(2))
    prev = np.zeros((4, 84, 84), np.uint8)
    for step in range(6):
        out, rows = _indexed_push(a, b, a_ref, b_ref, lut, state, prev, plan, step == 0)
        want = np.empty_like(prev)
        maxpool_resize_push(lut[a].astype(np.uint8), lut[b].astype(np.uint8), prev, want, plan)
        np.testing.assert_array_equal(out, want)
        assert rows == 84 or step > 0
        prev, a_ref, b_ref = out, a, b
        a, b = a.copy(), b.copy()
        for frame in (a, b):  # a few changed blocks, sometimes none
            for _ in range(int(rng.integers(0, 4) * change)):
                y, x = rng.integers(0, 200), rng.integers(0, 150)
                frame[y:y + 10, x:x + 10] = palette[rng.integers(colours)]


def _pushed_once():
    """Random index frames a, b pushed once in full: (plan, lut, a, b, kernel state, output, rows)."""
    plan = make_resize_plan()
    lut = np.arange(256, dtype=np.int16)
    a, b = _frames(0)
    state = (np.zeros((210, 160), np.uint8), np.zeros((84, 84), np.uint8), np.zeros(210, np.bool_))
    first, rows = _indexed_push(a, b, a, b, lut, state, np.zeros((4, 84, 84), np.uint8), plan, True)
    return plan, lut, a, b, state, first, rows


def test_indexed_push_recomputes_nothing_when_nothing_changed():
    plan, lut, a, b, state, first, rows = _pushed_once()
    again, rows_again = _indexed_push(a, b, a, b, lut, state, first, plan, False)
    assert rows == 84 and rows_again == 0
    np.testing.assert_array_equal(again[-1], first[-1])
    np.testing.assert_array_equal(again[:-1], first[1:])


def test_indexed_push_reads_only_rows_that_may_differ():
    """Rows outside the ``may_differ`` bound are skipped unread; the bound's rows are updated."""
    plan, lut, a, b, state, first, _ = _pushed_once()
    a2, b2 = a.copy(), b.copy()
    a2[10:20] = 255
    b2[100:110] = 255
    bound = np.zeros((3, 210), np.bool_)
    bound[0, 10:20] = True  # b's change lies outside the bound: left as it was
    _, rows = _indexed_push(a2, b2, a, b, lut, state, first, plan, False, bound)
    assert 0 < rows < 84 and (state[0][10:20] == 255).all() and not (state[0][100:110] == 255).all()
    bound[2, 100:110] = True  # any flag row counts
    _, rows_both = _indexed_push(a2, b2, a, b, lut, state, first, plan, False, bound)
    assert (state[0][100:110] == 255).all() and rows_both > 0


def test_colors_known_looks_only_where_the_frame_changed():
    lut = np.full(256, -1, np.int16)
    lut[[0, 2]] = [10, 20]
    ref = np.zeros((210, 160), np.uint8)
    frame = ref.copy()
    frame[5, 7] = 2
    rows = np.zeros(210, np.bool_)
    assert colors_known_kernel(frame, ref, lut, False, rows) and np.flatnonzero(rows).tolist() == [5]
    assert colors_known_kernel(frame, ref, lut, True, rows) and rows.all()
    ref[100, 100] = frame[100, 100] = 8  # unknown, but unchanged from a frame already known
    assert colors_known_kernel(frame, ref, lut, False, rows) and not colors_known_kernel(frame, ref, lut, True, rows)
    frame[50, 3] = 6
    frame[150, 3] = 2
    assert not colors_known_kernel(frame, ref, lut, False, rows)
    assert np.flatnonzero(rows).tolist() == [5, 50, 150]  # every changed row, past the unknown colour


def test_learn_colors_refuses_a_second_gray_level_for_one_index():
    lut = np.full(256, -1, np.int16)
    frame = np.array([[4, 4, 6]], np.uint8)
    assert learn_colors_kernel(frame, np.array([[30, 30, 40]], np.uint8), lut)
    assert lut[4] == 30 and lut[6] == 40 and (np.delete(lut, [4, 6]) == -1).all()
    assert not learn_colors_kernel(frame, np.array([[31, 30, 40]], np.uint8), lut)
