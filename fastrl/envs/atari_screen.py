"""The screens of one ALE agent step, turned into the next frame of the observation stack.

The protocol wants max(gray of the second-to-last frame, gray of the last frame), area-resized.
ALE's gray screen costs a palette lookup per pixel inside ALE (13 us a frame, where fetching
the palette indices costs 1 us), and consecutive Atari frames differ in few pixels. So the
screens are fetched as indices and the pooled gray frame and its resize are brought up to
date only where an index changed (``csrc_free_kernels.frames.indexed_maxpool_resize_push_kernel``).

Which rows to look at is known before the pool/resize reads anything: each fetch is compared
with a frame already known (for its colours, below), and that comparison's changed rows bound
where the step's two screens can differ from the last step's: the mid frame from the last
step's mid through (last step's last vs its mid) and (this mid vs last step's last), the last
frame through (this mid vs last step's last) and (this last vs this mid). So rows that changed
in none of those three comparisons are never read again.

The gray level of each index is learned from ALE itself: a fetched frame holding an index the
table has not seen yet (checked only where the frame differs from one already known) is fetched
once more as ALE's gray screen, while the emulator still shows it, and every index in it is
learned. The result is ALE's gray path bit for bit; tests compare the two frame by frame.
"""

from __future__ import annotations

import numpy as np

from csrc_free_kernels.frames import (
    ResizePlan,
    colors_known_kernel,
    indexed_maxpool_resize_push_kernel,
    learn_colors_kernel,
)

_MID, _LAST, _BEFORE = 0, 1, 2  # rows of StepScreens._rows


class StepScreens:
    """Holds the last two screens of the current step and the previous step's, double-buffered."""

    def __init__(self, ale, plan: ResizePlan):
        self._ale = ale
        self._plan = plan
        shape = tuple(ale.getScreenDims())
        if shape[1] % 8:  # the kernels compare frames 8 pixels (one 64-bit word) at a time
            raise ValueError(f"ALE screen width {shape[1]} is not a multiple of 8; the frame kernels need one")
        self._mid = [np.zeros(shape, np.uint8), np.zeros(shape, np.uint8)]  # second-to-last frame
        self._last = [np.zeros(shape, np.uint8), np.zeros(shape, np.uint8)]
        self._cur = 0  # which buffer of each pair this step fills; the other holds the last step's
        self._gray = np.zeros(shape, np.uint8)  # ALE's gray screen, fetched when a colour is new
        self._lut = np.full(256, -1, np.int16)
        self._frame = np.zeros(shape, np.uint8)  # the pooled gray frame of the last step
        self._small = np.zeros((plan.y_index.shape[0], plan.x_index.shape[1]), np.uint8)
        self._changed_rows = np.ones(shape[0], np.bool_)
        # rows that differ: [this mid vs the last step's last, this last vs what it was checked
        # against, the last step's last vs its mid]; their union bounds what the push must read
        self._rows = np.ones((3, shape[0]), np.bool_)
        self._full = True  # no last step to update from: recompute everything
        self._mid_fetched = False
        self._pooled = False

    def restart(self) -> None:
        """The emulator jumped (reset, restored state): the next push recomputes everything."""
        self._full = True

    def fetch_mid(self) -> None:
        """The second-to-last frame of the step, while the emulator shows it."""
        self._fetch(self._mid[self._cur], self._last[1 - self._cur], self._rows[_MID])
        self._mid_fetched = True

    def fetch_last(self, pool: bool = True) -> None:
        """The last frame of the step; ``pool=False`` (a single-frame step, or one cut short by
        game over before its second-to-last frame) pools the last frame with itself."""
        c = self._cur
        known = self._mid[c] if self._mid_fetched else self._last[1 - c]
        self._fetch(self._last[c], known, self._rows[_LAST])
        if not self._mid_fetched:  # last vs the last step's last already covers both frames
            self._rows[_MID] = False
        self._pooled = pool
        if not pool:
            self._mid[c][:] = self._last[c]

    def _fetch(self, screen: np.ndarray, known: np.ndarray, rows_differ: np.ndarray) -> None:
        self._ale.getScreen(screen)
        if colors_known_kernel(screen, known, self._lut, self._full, rows_differ):
            return
        self._ale.getScreenGrayscale(self._gray)
        if not learn_colors_kernel(screen, self._gray, self._lut):
            raise RuntimeError("ALE's gray screen maps one palette index to two gray levels; cannot pool indices")

    def push(self, prev: np.ndarray, out: np.ndarray) -> None:
        """out = prev's stack shifted by one, with this step's frame last (``prev`` may be ``out``)."""
        c = self._cur
        indexed_maxpool_resize_push_kernel(
            self._mid[c],
            self._last[c],
            self._mid[1 - c],
            self._last[1 - c],
            self._lut,
            self._frame,
            self._small,
            prev,
            out,
            *self._plan,
            self._changed_rows,
            self._full,
            self._rows,
        )
        # next step's bound: this last vs this mid, or nothing when the mid became a copy of the last
        if self._pooled:
            self._rows[_BEFORE] = self._rows[_LAST]
        else:
            self._rows[_BEFORE] = False
        self._full = False
        self._mid_fetched = False
        self._cur = 1 - c
