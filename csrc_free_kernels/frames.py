"""Atari frame preprocessing: max-pool two grayscale frames, area-resize, push into a stack.

    frame  = max(a, b)                                   (uint8 [H, W], pixel-wise)
    small  = area_resize(frame) -> [h, w]                (INTER_AREA semantics)
    out[:-1] = prev[1:];  out[-1] = small                (frame stack, oldest first)

Area resize: output pixel (y, x) covers the source rectangle
[y * H/h, (y+1) * H/h) x [x * W/w, (x+1) * W/w) and is the average of the source pixels
weighted by how much of each one it covers, for any scale factor (2.5 and 1.905 for
210x160 -> 84x84). The kernel uses OpenCV's ``cv::resize(..., INTER_AREA)`` weights for
8-bit images (per-axis float32 weights, slivers under 1e-3 of a pixel dropped, float32 sums,
round half to even) but sums rows first and columns second, where OpenCV does columns first:
on 210x160 -> 84x84 that is 2.5x fewer gathered loads (~15 instead of ~42 us a frame here).
So it matches OpenCV, hence ale-py's ``AtariVectorEnv``, to within 1 on a few pixels
(18 of 2.1 million over 300 Breakout frames) where a sum lands within float32 rounding of a
half. The numpy reference computes the exact average in float64 and rounds half to even;
the kernel differs from it by at most 1, on as rare pixels. (For integer factors OpenCV
switches to an integer code path; this kernel keeps the float one, within 1 of it as well.)

All kernels write into arrays they are given and allocate nothing, so the executor calls
them on rows of the shared trajectory buffer. ``prev`` may be ``out`` itself (in-place push).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np


class ResizePlan(NamedTuple):
    """Per-axis area weights padded to a fixed number of taps, plus two work rows.

    Output row ``y`` is ``sum_j y_weight[y, j] * source_row[y_index[y, j]]`` over taps ``j``
    in source order, and output column ``x`` likewise with ``x_index[j, x]`` / ``x_weight[j, x]``
    (tap-major, so the inner loop runs over contiguous columns). Padding taps have weight 0
    and repeat the last valid index (adding 0.0 changes no sum).
    """

    y_index: np.ndarray  # int32 [h, taps_y]   source rows
    y_weight: np.ndarray  # float32 [h, taps_y]
    x_index: np.ndarray  # int32 [taps_x, w]   source columns
    x_weight: np.ndarray  # float32 [taps_x, w]
    row: np.ndarray  # float32 [W]: one output row, resized along y only
    out_row: np.ndarray  # float32 [w]: the same row resized along x too


def area_table(src: int, dst: int) -> tuple[np.ndarray, np.ndarray]:
    """Source pixels covered by each of ``dst`` output pixels along one axis, and their weights.

    Mirrors OpenCV's ``computeResizeAreaTab``: weight = coverage / cell width (so each
    output's weights sum to 1), computed in float64 and stored as float32; partial pixels
    covered by less than 1e-3 are dropped (floating-point noise at cell edges). Returns
    ``index`` int32 [dst, taps] and ``weight`` float32 [dst, taps], padded as in ResizePlan.
    """
    if src < 1 or dst < 1:
        raise ValueError(f"area_table: sizes must be positive, got src={src}, dst={dst}")
    scale = src / dst
    rows: list[list[tuple[int, float]]] = []
    for d in range(dst):
        f1 = d * scale
        f2 = f1 + scale
        cell = min(scale, src - f1)
        s2 = min(math.floor(f2), src - 1)
        s1 = min(math.ceil(f1), s2)
        taps = []
        if s1 - f1 > 1e-3:
            taps.append((s1 - 1, (s1 - f1) / cell))
        taps += [(s, 1.0 / cell) for s in range(s1, s2)]
        if f2 - s2 > 1e-3:
            taps.append((s2, min(f2 - s2, 1.0, cell) / cell))
        rows.append(taps)
    width = max(len(taps) for taps in rows)
    index = np.zeros((dst, width), np.int32)
    weight = np.zeros((dst, width), np.float32)
    for d, taps in enumerate(rows):
        for j in range(width):
            s, w = taps[j] if j < len(taps) else (taps[-1][0], 0.0)
            index[d, j] = s
            weight[d, j] = w
    return index, weight


def make_resize_plan(src_shape: tuple[int, int] = (210, 160), dst_shape: tuple[int, int] = (84, 84)) -> ResizePlan:
    """Tables and work rows for resizing ``src_shape`` frames to ``dst_shape``; build once per env."""
    (src_h, src_w), (dst_h, dst_w) = src_shape, dst_shape
    y_index, y_weight = area_table(src_h, dst_h)
    x_index, x_weight = area_table(src_w, dst_w)
    return ResizePlan(
        y_index,
        y_weight,
        np.ascontiguousarray(x_index.T),
        np.ascontiguousarray(x_weight.T),
        np.empty(src_w, np.float32),
        np.empty(dst_w, np.float32),
    )


# ---------------------------------------------------------------- kernels


@numba.njit(cache=True)
def _resize_row(a, b, dst, dy, y_index, y_weight, x_index, x_weight, row, out_row):
    """dst[dy, :] = row dy of area_resize(max(a, b)): rows first, then columns, all loops contiguous."""
    src_w = a.shape[1]
    dst_w = dst.shape[1]
    taps_y = y_index.shape[1]
    taps_x = x_index.shape[0]
    sy = y_index[dy, 0]
    beta = y_weight[dy, 0]
    for sx in range(src_w):
        va = a[sy, sx]
        vb = b[sy, sx]
        row[sx] = beta * np.float32(va if va > vb else vb)
    for j in range(1, taps_y):
        sy = y_index[dy, j]
        beta = y_weight[dy, j]
        for sx in range(src_w):
            va = a[sy, sx]
            vb = b[sy, sx]
            row[sx] += beta * np.float32(va if va > vb else vb)
    for dx in range(dst_w):
        out_row[dx] = row[x_index[0, dx]] * x_weight[0, dx]
    for j in range(1, taps_x):
        for dx in range(dst_w):
            out_row[dx] += row[x_index[j, dx]] * x_weight[j, dx]
    for dx in range(dst_w):
        r = np.rint(out_row[dx])  # round half to even, like OpenCV's saturate_cast
        dst[dy, dx] = np.uint8(min(max(r, np.float32(0.0)), np.float32(255.0)))


@numba.njit(cache=True)
def _resize_into(a, b, dst, y_index, y_weight, x_index, x_weight, row, out_row):
    """dst[:, :] = area_resize(max(a, b))."""
    for dy in range(dst.shape[0]):
        _resize_row(a, b, dst, dy, y_index, y_weight, x_index, x_weight, row, out_row)


@numba.njit(cache=True)
def _copy_frame(src, dst):
    h, w = dst.shape
    for y in range(h):
        for x in range(w):
            dst[y, x] = src[y, x]


@numba.njit(cache=True)
def _shift_stack(prev, out, newest):
    """out[:-1] = prev[1:]; out[-1] = newest, over flat views (C-contiguous frames): one loop a copy whose index is
    the range's own, which LLVM vectorizes (a row-by-row loop of 84 bytes copied a byte an instruction). A forward
    copy, so ``prev`` may be ``out``."""
    n = newest.size
    kept = out.size - n
    src = prev.reshape(prev.size)[n:]
    dst = out.reshape(out.size)
    for i in range(kept):
        dst[i] = src[i]
    last = dst[kept:]
    flat = newest.reshape(n)
    for i in range(n):
        last[i] = flat[i]


@numba.njit(cache=True)
def maxpool_resize_push_kernel(a, b, prev, out, y_index, y_weight, x_index, x_weight, row, out_row):
    """out[:-1] = prev[1:]; out[-1] = area_resize(max(a, b)). ``prev`` may be ``out``."""
    stack = out.shape[0]
    # Forward copy: reads prev[s + 1] before anything writes it, so prev may alias out.
    for s in range(stack - 1):
        _copy_frame(prev[s + 1], out[s])
    _resize_into(a, b, out[stack - 1], y_index, y_weight, x_index, x_weight, row, out_row)


@numba.njit(cache=True)
def stack_fill_kernel(out):
    """Every frame of the stack becomes a copy of the newest one (reset padding)."""
    stack = out.shape[0]
    for s in range(stack - 1):
        _copy_frame(out[stack - 1], out[s])


@numba.njit(cache=True)
def maxpool_kernel(a, b, out):
    """out = max(a, b) pixel-wise (out may be a or b)."""
    h, w = out.shape
    for y in range(h):
        for x in range(w):
            va = a[y, x]
            vb = b[y, x]
            out[y, x] = va if va > vb else vb


# ---------------------------------------------------------------- palette-indexed, incremental
#
# ALE draws palette indices; its gray screen is a per-pixel palette lookup that costs 12x the
# fetch of the indices themselves (13 vs 1 us a 210x160 frame, measured). Consecutive Atari
# frames differ in few pixels, so the executor fetches indices and updates the max-pooled gray
# frame only where an index changed, then re-resizes only the output rows that read a changed
# source row. ``lut`` (int16 [256], -1 = not seen yet) maps an index to ALE's own gray level and
# is learned from ALE's gray screen the first time a colour appears, so the result is exactly
# the gray path's, pixel for pixel (tests compare them frame by frame).


@numba.njit(cache=True)
def colors_known_kernel(frame, ref, lut, full, rows_differ):
    """True when ``lut`` knows the gray level of every index in ``frame``. Unless ``full``, ``ref``
    is a frame whose colours are all known, and only pixels that differ from it are looked up,
    found 8 at a time (frames are compared as 64-bit words; the width must be a multiple of 8,
    as ALE's 160 is). ``rows_differ[y]``: whether row y differs from ``ref`` (every row if
    ``full``), for all rows."""
    h, w = frame.shape
    words, ref_words = frame.view(np.uint64), ref.view(np.uint64)
    known = True
    for y in range(h):
        if full:
            rows_differ[y] = True
            for x in range(w if known else 0):
                if lut[frame[y, x]] < 0:
                    known = False
                    break
            continue
        differs = _row_differs(words, ref_words, y)
        rows_differ[y] = differs
        if not differs or not known:
            continue  # a row that differs teaches nothing more once a colour is known to be new
        for k in range(w // 8):
            if words[y, k] == ref_words[y, k]:
                continue
            for x in range(8 * k, 8 * k + 8):
                v = frame[y, x]
                if lut[v] < 0 and v != ref[y, x]:
                    known = False
                    break
            if not known:
                break
    return known


@numba.njit(cache=True)
def _row_differs(words, ref_words, y):
    """Whether row y of two frames (as 64-bit words) differs: one branch-free pass, which LLVM vectorizes (most
    rows of a step are the same as the reference's, so this test is most of the work)."""
    acc = np.uint64(0)
    for k in range(words.shape[1]):
        acc |= words[y, k] ^ ref_words[y, k]
    return acc != 0


@numba.njit(cache=True)
def learn_colors_kernel(frame, gray, lut):
    """lut[frame] = gray for every pixel; False if an index already maps to another level."""
    h, w = frame.shape
    for y in range(h):
        for x in range(w):
            v = frame[y, x]
            g = gray[y, x]
            if lut[v] < 0:
                lut[v] = g
            elif lut[v] != g:
                return False
    return True


@numba.njit(cache=True)
def _update_max(a, b, a_ref, b_ref, lut, frame, changed_rows, full, may_differ):
    """frame = max(lut[a], lut[b]) where a or b differs from the last step's (everywhere if
    ``full``); changed_rows[y] says whether row y of ``frame`` changed. A row where neither may
    differ (no ``may_differ[k, y]`` set) is not read at all; in the others, 8-pixel words where
    neither differs are skipped after one compare each."""
    h, w = a.shape
    flags = may_differ.shape[0]
    words_a, words_b = a.view(np.uint64), b.view(np.uint64)
    words_a_ref, words_b_ref = a_ref.view(np.uint64), b_ref.view(np.uint64)
    for y in range(h):
        candidate = full
        for k in range(flags):
            candidate = candidate or may_differ[k, y]
        changed = full
        if candidate:
            for k in range(w // 8):
                if not full and words_a[y, k] == words_a_ref[y, k] and words_b[y, k] == words_b_ref[y, k]:
                    continue
                for x in range(8 * k, 8 * k + 8):
                    va = a[y, x]
                    vb = b[y, x]
                    if full or va != a_ref[y, x] or vb != b_ref[y, x]:
                        ga = lut[va]
                        gb = lut[vb]
                        g = np.uint8(ga if ga > gb else gb)
                        if g != frame[y, x]:
                            frame[y, x] = g
                            changed = True
        changed_rows[y] = changed


@numba.njit(cache=True)
def indexed_maxpool_resize_push_kernel(
    a,
    b,
    a_ref,
    b_ref,
    lut,
    frame,
    small,
    prev,
    out,
    y_index,
    y_weight,
    x_index,
    x_weight,
    row,
    out_row,
    changed_rows,
    full,
    may_differ,
):
    """out[:-1] = prev[1:]; out[-1] = area_resize(max(gray a, gray b)), a and b palette indices.

    ``frame`` (gray, source size) and ``small`` (its resize) hold the last step's results and are
    brought up to date: only pixels whose index changed since ``a_ref``/``b_ref`` and only output
    rows that read a changed source row are recomputed (all of them if ``full``). ``may_differ``
    [k, y]: flags whose union covers every row where a or b may differ from its reference (a
    superset will do; the other rows are skipped unread). Every index of a and b must be in
    ``lut`` (see colors_known_kernel); frames are C-contiguous, their width a multiple of 8.
    Returns the output rows recomputed."""
    _update_max(a, b, a_ref, b_ref, lut, frame, changed_rows, full, may_differ)
    recomputed = 0
    for dy in range(small.shape[0]):
        dirty = full
        for j in range(y_index.shape[1]):
            dirty = dirty or changed_rows[y_index[dy, j]]
        if dirty:
            _resize_row(frame, frame, small, dy, y_index, y_weight, x_index, x_weight, row, out_row)
            recomputed += 1
    _shift_stack(prev, out, small)
    return recomputed


# ---------------------------------------------------------------- checked wrappers


def _check_frames(a: np.ndarray, b: np.ndarray, plan: ResizePlan) -> None:
    src_ok = a.shape[0] > plan.y_index.max() and a.shape[1] == plan.row.shape[0]
    if a.dtype != np.uint8 or b.dtype != np.uint8 or a.shape != b.shape or not src_ok:
        raise ValueError(
            f"frames must be two uint8 arrays of the plan's source shape, got {a.dtype} {a.shape}, {b.dtype} {b.shape}"
        )


def maxpool_resize_push(a: np.ndarray, b: np.ndarray, prev: np.ndarray, out: np.ndarray, plan: ResizePlan) -> None:
    """Push area_resize(max(a, b)) onto the stack ``prev``, writing the new stack into ``out``.

    ``a``, ``b``: uint8 [H, W]; ``prev``, ``out``: uint8 [stack, h, w] (``prev`` may be ``out``).
    Hot loops call :func:`maxpool_resize_push_kernel` directly to skip these checks.
    """
    _check_frames(a, b, plan)
    dst_shape = (plan.y_index.shape[0], plan.x_index.shape[1])
    if out.dtype != np.uint8 or prev.shape != out.shape or out.shape[1:] != dst_shape:
        raise ValueError(f"prev/out must be uint8 [stack, *{dst_shape}], got {prev.shape}, {out.dtype} {out.shape}")
    maxpool_resize_push_kernel(a, b, prev, out, *plan)


def area_resize(src: np.ndarray, out: np.ndarray, plan: ResizePlan) -> np.ndarray:
    """out[:, :] = area_resize(src) for one uint8 [H, W] frame."""
    _check_frames(src, src, plan)
    _resize_into(src, src, out, *plan)
    return out


def maxpool(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out = max(a, b); all uint8 of one shape."""
    maxpool_kernel(a, b, out)
    return out


def stack_fill(out: np.ndarray) -> np.ndarray:
    """out[:-1] = out[-1]: start a stack from one frame, as after a reset."""
    stack_fill_kernel(out)
    return out


# ---------------------------------------------------------------- numpy references


def maxpool_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.maximum(a, b)


def area_weights_reference(src: int, dst: int) -> np.ndarray:
    """Dense float64 [dst, src]: the fraction of output cell d that source pixel s covers."""
    edges = np.arange(dst + 1, dtype=np.float64) * (src / dst)
    lo, hi = edges[:-1, None], edges[1:, None]
    s = np.arange(src, dtype=np.float64)[None, :]
    overlap = np.clip(np.minimum(hi, s + 1) - np.maximum(lo, s), 0.0, None)
    return overlap / overlap.sum(axis=1, keepdims=True)


def area_resize_reference(src: np.ndarray, dst_shape: tuple[int, int]) -> np.ndarray:
    """Exact area average in float64, rounded half to even, as uint8."""
    wy = area_weights_reference(src.shape[0], dst_shape[0])
    wx = area_weights_reference(src.shape[1], dst_shape[1])
    return np.clip(np.rint(wy @ src.astype(np.float64) @ wx.T), 0, 255).astype(np.uint8)


def push_reference(prev: np.ndarray, frame: np.ndarray) -> np.ndarray:
    return np.concatenate([prev[1:], frame[None]], axis=0)


def maxpool_resize_push_reference(a: np.ndarray, b: np.ndarray, prev: np.ndarray) -> np.ndarray:
    return push_reference(prev, area_resize_reference(maxpool_reference(a, b), prev.shape[1:]))


def stack_fill_reference(stack: np.ndarray) -> np.ndarray:
    return np.repeat(stack[-1:], stack.shape[0], axis=0)
