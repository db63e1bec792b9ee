"""The Execution Trace's "differences" lane in compare mode, shaped from the analysis core's
aligned diff (:func:`analyser.core.diff.aligned_deltas`, the alignment ``analyse diff`` uses):
every step of B whose cycles differ from its aligned step of A (same program name and
occurrence on the same IPU), or that only B runs, drawn at B's start with B's cycles and signed
by B - A. Qt-free: the widget (analyser/gui/reports/trace/diff_lane.py) only draws it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: At most this many bars are drawn (the largest differences); the rest are counted.
MAX_BARS = 200_000


@dataclass(frozen=True)
class DifferencesLane:
    """Steps of B that differ from A: one row each, on B's cycle axis."""

    ipu: np.ndarray
    start: np.ndarray
    cycles: np.ndarray
    #: B - A cycles (a step only B runs: its cycles)
    delta: np.ndarray
    #: True for a step only B runs
    added: np.ndarray
    n_ipus: int
    #: steps only A runs and their cycles (they have no place on B's axis)
    removed_steps: int
    removed_cycles: int
    #: differing steps left out beyond :data:`MAX_BARS` (the smallest)
    left_out: int = 0
    #: B's program of each step (None: not recorded)
    program: np.ndarray | None = None

    @property
    def sign(self) -> np.ndarray:
        """+1 where B is slower, -1 where B is faster (0 never: equal steps are not listed)."""
        return np.sign(self.delta).astype(np.int8)

    @property
    def total(self) -> int:
        """B - A over the listed steps and the steps only A runs (minus their cycles)."""
        return int(self.delta.sum()) - self.removed_cycles

    def at(self, x: float, y: float, tolerance: float = 0.0) -> int | None:
        """Index of the difference drawn under cycle ``x`` on the row of height ``y`` (the
        IPU rows are at 0, 1, ...; within ``tolerance`` cycles, the nearest), or None."""
        ipu = int(np.floor(y + 0.5))
        on = np.flatnonzero(self.ipu == ipu)
        if not on.size:
            return None
        s, e = self.start[on], self.start[on] + np.maximum(self.cycles[on], 1)
        dist = np.where(x < s, s - x, np.where(x >= e, x - e, 0.0))
        i = int(np.argmin(dist))
        return int(on[i]) if dist[i] <= tolerance else None

    def describe(self, i: int, names: np.ndarray | None = None) -> str:
        """What difference ``i`` is, in words: the step, its cycles in A and B and B - A."""
        name = ""
        if names is not None and self.program is not None:
            p = int(self.program[i])
            name = f"{names[p]} " if 0 <= p < len(names) else ""
        where = f"{name}on IPU {int(self.ipu[i])} at cycle {int(self.start[i]):,}"
        b, d = int(self.cycles[i]), int(self.delta[i])
        if self.added[i]:
            return f"{where}: only B runs it ({b:,} cycles)"
        return f"{where}: B − A {d:+,} cycles (A {b - d:,}, B {b:,})"


def differences_lane(analysis_a, analysis_b, max_bars: int = MAX_BARS) -> DifferencesLane:
    """The lane of B (``analysis_b``) against A; the ``max_bars`` largest differences."""
    # imported here: ~0.1 s of CPU that a single profile never needs
    from analyser.core.diff import aligned_deltas

    d = aligned_deltas(analysis_a, analysis_b)
    delta = np.asarray(d["delta"], np.int64)
    keep = np.arange(delta.size)
    left_out = 0
    if delta.size > max_bars:
        keep = np.sort(np.argpartition(-np.abs(delta), max_bars - 1)[:max_bars])
        left_out = delta.size - max_bars
    ipu = np.asarray(d["ipu"], np.int64)
    n_ipus = max(
        int(ipu.max()) + 1 if ipu.size else 0,
        len(analysis_b.execution.cycles_by_type),
        1,
    )
    return DifferencesLane(
        ipu=ipu[keep],
        start=np.asarray(d["start"], np.int64)[keep],
        cycles=np.asarray(d["cycles"], np.int64)[keep],
        delta=delta[keep],
        added=np.asarray(d["cycles_a"], np.int64)[keep] < 0,
        n_ipus=n_ipus,
        removed_steps=int(d["removed"][0]),
        removed_cycles=int(d["removed"][1]),
        left_out=left_out,
        program=np.asarray(d["program"], np.int64)[keep],
    )


def lane_of(doc_a, doc_b) -> DifferencesLane:
    """The lane of compare-mode documents A and B (cached on B per A)."""
    return doc_b.cached(
        f"differences_lane:{doc_a.path}",
        lambda: differences_lane(doc_a.analysis, doc_b.analysis),
    )


class ScreenBars:
    """The lane's bars as drawn at screen resolution (:meth:`at`), from the lane's steps sorted
    once by sign, IPU and start (a redraw then merges neighbours with one ``reduceat``)."""

    def __init__(self, lane: DifferencesLane) -> None:
        self.n_ipus = lane.n_ipus
        self.signs: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        if not lane.delta.size:
            return
        x0 = lane.start.astype(float)
        x1 = x0 + np.maximum(lane.cycles, 1)
        height = 0.15 + 0.7 * np.abs(lane.delta) / float(np.abs(lane.delta).max())
        sign = lane.sign
        for s in (1, -1):  # red (B slower, or only B runs it) first, green drawn over it
            rows = np.flatnonzero(sign == s)
            rows = rows[np.lexsort((x0[rows], lane.ipu[rows]))]
            if rows.size:
                self.signs.append((s, lane.ipu[rows], x0[rows], x1[rows], height[rows]))

    def at(self, t0: float, t1: float, width_px: int) -> list[tuple[int, np.ndarray]]:
        """``[(sign, rects), ...]`` drawn between cycles ``t0`` and ``t1`` on ``width_px``
        pixels, ``rects`` an ``(n, 4)`` array of x, y, width, height. A bar at least two pixels
        wide is kept as it is; the narrower bars of one sign, IPU and pixel column become one
        bar, as tall as the tallest of them, from the column's start to its longest bar's end
        (as the timelines' level of detail draws a pixel), so a paint draws at most IPUs x
        (pixels + 3) bars per sign whatever the number of differing steps (150,000 bars cost
        30-45 ms a paint)."""
        if t1 <= t0:
            return []
        width_px = max(1, int(width_px))
        pw = (t1 - t0) / width_px
        cols = width_px + 3
        out = []
        for s, ipu, x0, x1, height in self.signs:
            seen = (x1 >= t0 - pw) & (x0 <= t1 + pw)
            wide = (x1 - x0) >= 2 * pw
            keep = np.flatnonzero(seen & wide)
            parts = [
                np.column_stack(
                    [x0[keep], ipu[keep] - height[keep] / 2, x1[keep] - x0[keep], height[keep]]
                )
            ]
            narrow = np.flatnonzero(seen & ~wide)  # in (IPU, start) order
            if narrow.size:
                pix = np.clip(np.floor((x0[narrow] - t0) / pw), -1, width_px).astype(np.int64)
                g = ipu[narrow] * cols + pix + 1  # non-decreasing
                first = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
                h = np.maximum.reduceat(height[narrow], first)
                end = np.maximum.reduceat(x1[narrow], first)
                lane_of_g, col = np.divmod(g[first], cols)
                left = t0 + (col - 1) * pw
                # the column filled, and on to the end of its longest bar (no hairline gaps)
                right = np.maximum(left + pw, end)
                parts.append(np.column_stack([left, lane_of_g - h / 2, right - left, h]))
            rects = np.concatenate(parts)
            if len(rects):
                out.append((s, rects))
        return out


def screen_bars(
    lane: DifferencesLane, t0: float, t1: float, width_px: int
) -> list[tuple[int, np.ndarray]]:
    """The lane's bars drawn between cycles ``t0`` and ``t1`` on ``width_px`` pixels (see
    :meth:`ScreenBars.at`; a view that redraws keeps a :class:`ScreenBars`)."""
    return ScreenBars(lane).at(t0, t1, width_px)


def screen_bars_of(doc_a, doc_b) -> ScreenBars:
    """The :class:`ScreenBars` of :func:`lane_of` (cached on B per A: sorted once, off the
    GUI thread with the lane)."""
    return doc_b.cached(f"differences_bars:{doc_a.path}", lambda: ScreenBars(lane_of(doc_a, doc_b)))


def ready_lane(doc_a, doc_b) -> tuple[DifferencesLane, ScreenBars] | None:
    """The lane and its :class:`ScreenBars` when both are computed already (the loader
    computes them with a compared pair), else None."""
    key = f"differences_bars:{doc_a.path}"
    if not doc_b.is_cached(key):
        return None
    return lane_of(doc_a, doc_b), screen_bars_of(doc_a, doc_b)


def warm_lane(doc_a, doc_b) -> None:
    """Compute the lane of A and B and its :class:`ScreenBars` (in the calling thread), when
    both profiles have an execution."""
    if doc_a.has_execution and doc_b.has_execution:
        screen_bars_of(doc_a, doc_b)
