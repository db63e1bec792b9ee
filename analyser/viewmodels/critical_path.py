"""The critical path as the Execution Trace and the Pipeline show it, with no Qt.

:func:`critical_path_view` runs the analysis core's :func:`analyser.core.critical_path.critical_path`
once per profile (the caller runs it off the GUI thread and keeps the result: see
:func:`of_document`) and hands over a :class:`CriticalPathView`, complete: the links with their
kind and share of the call, the path's steps (rows, IPU, cycles, stage, program, link), the
sentence "What bounds the step: ..." and, when there is no path to show, the one sentence that
says why (:attr:`CriticalPathView.reason`).

What the trace draws of it (:meth:`CriticalPathView.window`, :func:`pixel_runs`): the path's
steps merged into *segments* (consecutive rows of one IPU on one lane and one link, each drawn
over the cycles it adds to the path), then, for the visible window, the pixels of each lane
where the path mostly is, as outlined runs, and the rest of each visible lane dimmed.
Whole-array numpy: a ``searchsorted`` per IPU for the window and one per lane in view, no loop
over steps, at most a rectangle per pixel and lane whatever the trace's length.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: What each kind of link is, in the words the tooltip and the side panel use.
KIND_TEXT = {
    "stage": "a pipeline stage on its IPU",
    "ipu": "an IPU's steps outside its stages",
    "stream": "an IPU's stream copies",
    "host": "the host, outside the device trace",
}
#: The cache key of the view on a document (:func:`of_document`).
CACHE_KEY = "critical_path_view"
#: The step columns the path reads, and the program column (their absence is the reason given).
NEEDED = (
    *(f"/execution/steps/{c}" for c in ("ipu", "start", "cycles", "program", "type", "stage")),
    "/execution/steps/iteration",
    "/programs/nodes/cycles",
)


@dataclass(frozen=True)
class LinkView:
    """One link of the path as shown: what it is, its cycles and its share of the call."""

    index: int
    key: str
    kind: str
    label: str
    ipu: int
    stage: int
    cycles: int
    share: float
    #: the layers it spends most of its cycles in ("layer3.0.conv2 12%, ..."), "" for none
    layers: str = ""

    @property
    def kind_text(self) -> str:
        return KIND_TEXT.get(self.kind, self.kind)

    def describe(self, share: float | None = None, of: str = "the call") -> str:
        """'stage 0 on IPU 0 (a pipeline stage on its IPU): 6.0% of the call'."""
        value = self.share if share is None else share
        return f"{self.label} ({self.kind_text}): {100 * value:.1f}% of {of}"


@dataclass
class Segments:
    """The path's steps merged into segments (consecutive rows of one IPU, lane and link),
    in row order (so grouped by IPU, each IPU's in time order); ``start`` is the first cycle a
    segment adds to the path (its first step's predecessor's end), ``end`` its last."""

    ipu: np.ndarray
    lane: np.ndarray
    start: np.ndarray
    end: np.ndarray
    link: np.ndarray
    #: [IPUs + 1] first segment of each IPU
    offsets: np.ndarray
    #: running maximum of ``end`` within each IPU (the window's lower bound)
    end_max: np.ndarray


@dataclass
class CriticalPathView:
    """The critical path of one profile, or the reason there is none to show."""

    #: one sentence when there is no path to show ("" when there is)
    reason: str = ""
    links: list[LinkView] = field(default_factory=list)
    call_cycles: int = 0
    device_cycles: int = 0
    host_cycles: int = 0
    clock_hz: float = 0.0
    n_ipus: int = 0
    #: [path steps] sorted global rows and each one's IPU, start, end, stage, program, link
    #: (index into ``links``) and contribution (cycles it adds to the path)
    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    ipu: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    start: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    end: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    stage: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    program: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    link: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    contribution: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    #: segments per grouping key (see :meth:`segments`)
    _segments: dict[Any, Segments] = field(default_factory=dict, repr=False)

    @property
    def available(self) -> bool:
        return not self.reason and self.rows.size > 0

    # -- which steps ---------------------------------------------------------------------------
    def on_path(self, rows: np.ndarray) -> np.ndarray:
        """[rows] True for the global step rows on the path (one ``searchsorted``)."""
        rows = np.asarray(rows, dtype=np.int64)
        if not self.rows.size:
            return np.zeros(rows.shape, dtype=bool)
        at = np.clip(np.searchsorted(self.rows, rows), 0, self.rows.size - 1)
        return self.rows[at] == rows

    def link_of_row(self, row: int) -> LinkView | None:
        """The link step ``row`` belongs to, None when it is not on the path."""
        if not self.rows.size:
            return None
        at = int(np.searchsorted(self.rows, row))
        if at >= self.rows.size or self.rows[at] != row:
            return None
        k = int(self.link[at])
        return self.links[k] if 0 <= k < len(self.links) else None

    def row_note(self, row: int, span: tuple[float, float] | None = None) -> str:
        """'On the critical path: <link> (<kind>): x% of the call' for a step on the path
        (of the run ``span`` when one is chosen), "" otherwise."""
        link = self.link_of_row(row)
        if link is None:
            return ""
        if span is not None:
            shares = {lv.index: share for lv, _c, share in self.span_links(*span)}
            return "On the critical path: " + link.describe(shares.get(link.index), "the run")
        return "On the critical path: " + link.describe()

    # -- shares --------------------------------------------------------------------------------
    def span_links(self, t0: float, t1: float) -> list[tuple[LinkView, int, float]]:
        """(link, cycles, share of the span) of the path's cycles inside ``[t0, t1)`` (one
        host call of a trace of several: each step's part of the path, from its
        predecessor's end to its own, cut to the span), longest first: one bincount."""
        if not self.rows.size or not t1 > t0:
            return []
        begin = np.maximum(self.end - self.contribution, t0)
        inside = np.clip(np.minimum(self.end, t1) - begin, 0, None).astype(np.float64)
        known = self.link >= 0
        cyc = np.bincount(self.link[known], weights=inside[known], minlength=len(self.links))
        span = float(t1 - t0)
        out = [(self.links[i], round(c), c / span) for i, c in enumerate(cyc.tolist()) if c > 0]
        return sorted(out, key=lambda t: -t[1])

    def stage_shares(self) -> dict[int, float]:
        """{pipeline stage: share of the call} of the stages whose steps lie on the path."""
        out: dict[int, float] = {}
        for link in self.links:
            if link.kind == "stage" and link.stage >= 0:
                out[link.stage] = out.get(link.stage, 0.0) + link.share
        return out

    def headline(self, n: int = 3, span: tuple[float, float] | None = None) -> str:
        """'What bounds the step: <longest link> x% of the call; then ...' (of the run
        ``span`` when one is chosen), or the reason there is no path."""
        if not self.available:
            return self.reason
        if span is not None:
            parts = [(lv, share) for lv, _c, share in self.span_links(*span)[:n]]
            of = "the run (its device time)"
        else:
            parts = [(lv, lv.share) for lv in self.links[:n]]
            of = "the call"
        if not parts:
            return "What bounds the step: no step of the critical path lies in this run."
        first, share = parts[0]
        text = f"What bounds the step: {first.label}, {100 * share:.1f}% of {of}"
        rest = ", ".join(f"{lv.label} {100 * s:.1f}%" for lv, s in parts[1:])
        return text + (f"; then {rest}." if rest else ".")

    # -- drawing -------------------------------------------------------------------------------
    def segments(
        self, key: Any = "flat", lanes: Callable[[], np.ndarray] | None = None
    ) -> Segments:
        """The path's steps merged into segments for a grouping (``key``; ``lanes``: gives
        the lane of every path step under it, None for one lane per IPU), computed once per
        key (``lanes`` is called only then)."""
        seg = self._segments.get(key)
        if seg is None:
            seg = _segments(self, None if lanes is None else lanes())
            self._segments[key] = seg
        return seg

    def window(self, seg: Segments, ipu: int, t0: float, t1: float) -> slice:
        """The segments of ``ipu`` that may overlap ``[t0, t1)`` (two ``searchsorted``)."""
        if ipu < 0 or ipu + 1 >= seg.offsets.size:
            return slice(0, 0)
        lo, hi = int(seg.offsets[ipu]), int(seg.offsets[ipu + 1])
        a = lo + int(np.searchsorted(seg.end_max[lo:hi], t0, side="right"))
        b = lo + int(np.searchsorted(seg.start[lo:hi], t1, side="left"))
        return slice(a, max(a, b))


def _segments(view: CriticalPathView, lanes: np.ndarray | None) -> Segments:
    n = view.rows.size
    lane = np.zeros(n, dtype=np.int64) if lanes is None else np.asarray(lanes, dtype=np.int64)
    brk = np.ones(n, dtype=bool)
    if n > 1:
        brk[1:] = (
            (view.rows[1:] != view.rows[:-1] + 1)
            | (view.ipu[1:] != view.ipu[:-1])
            | (lane[1:] != lane[:-1])
            | (view.link[1:] != view.link[:-1])
        )
    first = np.flatnonzero(brk)
    ipu = view.ipu[first]
    # a step is drawn over the cycles it adds to the path (from its predecessor's end): a sync
    # that waited for another IPU is on the path only from its release, the other IPU's work
    # before it is (so the path's segments never overlap in time)
    begin = np.minimum.reduceat(view.end - view.contribution, first) if n else view.start
    end = np.maximum.reduceat(view.end, first) if n else np.zeros(0, dtype=np.int64)
    n_ipus = max(view.n_ipus, int(ipu.max()) + 1 if ipu.size else 0)
    offsets = np.searchsorted(ipu, np.arange(n_ipus + 1))
    # the running maximum restarts at each IPU: offset each IPU's ends above the one before
    end_max = end.astype(np.float64)
    if end.size:
        span = float(end.max()) - float(begin.min()) + 1.0
        shift = (ipu - ipu.min()).astype(np.float64) * span
        end_max = np.maximum.accumulate(end_max + shift) - shift
    return Segments(ipu, lane[first], begin, end, view.link[first], offsets, end_max)


#: A pixel of a lane is drawn as on the path when the path holds that lane for at least this
#: share of the pixel's cycles (zoomed out, a path hopping between IPUs touches every pixel of
#: several lanes: it is drawn where it mostly is, not wherever it passes).
PIXEL_SHARE = 0.5


def _mask_runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first, end) pixel of every run of True in ``mask``."""
    d = np.diff(np.r_[0, mask.astype(np.int8), 0])
    return np.flatnonzero(d == 1), np.flatnonzero(d == -1)


def pixel_runs(
    x0: np.ndarray,
    x1: np.ndarray,
    y: np.ndarray,
    rows_y: np.ndarray,
    t0: float,
    t1: float,
    width: int,
) -> tuple[np.ndarray, np.ndarray]:
    """What the trace draws of the path's segments ``[x0, x1)`` on rows ``y`` in the window
    ``[t0, t1)`` of ``width`` pixels, over the visible rows ``rows_y``: ``(on, off)``, each an
    ``(n, 3)`` array of start, end (cycles, on pixel edges) and row, ``on`` the runs of pixels
    where the path holds the row for at least :data:`PIXEL_SHARE` of the pixel's cycles (a
    path step a few pixels wide is one run; steps off the path wider than a pixel keep the
    runs apart), ``off`` the rest of the rows (dimmed). A loop over the rows in view only: per
    row, the path's cycles before each pixel edge from one ``searchsorted`` over its segments."""
    width = max(1, int(width))
    pixel = (t1 - t0) / width
    edges = t0 + pixel * np.arange(width + 1)
    rows_y = np.unique(np.asarray(rows_y, dtype=np.float64))
    order = np.lexsort((x0, y))
    x0, x1, y = x0[order], x1[order], y[order]
    lo = np.searchsorted(y, rows_y, side="left")
    hi = np.searchsorted(y, rows_y, side="right")
    on: list[np.ndarray] = []
    off: list[np.ndarray] = []
    for row, a, b in zip(rows_y.tolist(), lo.tolist(), hi.tolist(), strict=True):
        mask = np.zeros(width, dtype=bool)
        if b > a:
            s = x0[a:b]
            length = np.maximum(x1[a:b] - s, 0.0)
            before = np.r_[0.0, np.cumsum(length)]
            k = np.searchsorted(s, edges, side="right") - 1
            kk = np.maximum(k, 0)
            covered = np.where(k >= 0, before[kk] + np.clip(edges - s[kk], 0.0, length[kk]), 0.0)
            mask = np.diff(covered) >= PIXEL_SHARE * pixel
        for want, out in ((True, on), (False, off)):
            first, end = _mask_runs(mask == want)
            if first.size:
                out.append(np.column_stack((edges[first], edges[end], np.full(first.size, row))))
    empty = np.zeros((0, 3))
    return (
        np.concatenate(on) if on else empty,
        np.concatenate(off) if off else empty,
    )


def _layers_text(link: Any) -> str:
    if not link.cycles:
        return ""
    return ", ".join(f"{n} {100 * c / link.cycles:.0f}%" for n, c in link.layers)


def _reason(analysis: Any, has: Callable[[str], bool]) -> str:
    """The one sentence on why ``analysis`` has no path to show, "" when it may have one."""
    name = getattr(analysis, "name", "the profile")
    if not analysis.has_execution:
        return f"{name} has no execution (it does not fit in memory), so it has no critical path."
    missing = [p for p in NEEDED if not has(p)]
    if missing:
        return f"{name} lacks {missing[0]}, so its critical path cannot be computed."
    src = analysis.src
    if not src.n_steps:
        return f"{name} has no executed steps (no host call ran), so it has no critical path."
    offsets = np.asarray(src.ipu_offsets())
    if int((np.diff(offsets) > 0).sum()) < 2:
        return (
            f"{name} runs on one IPU, whose steps follow one another: the whole trace is its "
            "critical path, so there is nothing to single out."
        )
    return ""


def critical_path_view(analysis: Any) -> CriticalPathView:
    """The critical path of ``analysis``'s run as the GUI shows it (see the module docstring);
    a profile without one gives a view whose :attr:`~CriticalPathView.reason` says why, never
    an exception."""
    from analyser.core.critical_path import critical_path
    from analyser.viewmodels.profile_reads import has_dataset

    try:
        reason = _reason(analysis, lambda p: has_dataset(analysis, p))
        path = None if reason else critical_path(analysis.src)
    except Exception as exc:  # a damaged profile: its sentence, not a traceback
        text = str(exc).strip().rstrip(".") or type(exc).__name__
        return CriticalPathView(reason=f"The critical path cannot be computed: {text}.")
    if reason:
        return CriticalPathView(reason=reason)
    if path is None or not path.steps.size:
        return CriticalPathView(reason="The trace has no step on a critical path.")
    links = [
        LinkView(
            i, lk.key, lk.kind, lk.label, lk.ipu, lk.stage, lk.cycles, lk.share, _layers_text(lk)
        )
        for i, lk in enumerate(path.links)
    ]
    offsets = np.asarray(analysis.src.ipu_offsets())
    return CriticalPathView(
        links=links,
        call_cycles=path.call_cycles,
        device_cycles=path.device_cycles,
        host_cycles=path.host_cycles,
        clock_hz=path.clock_hz,
        n_ipus=int(offsets.size - 1),
        # narrow types where the values allow (3.6 million path steps on BERT-Large's 11.8
        # million: 64 MB less than int64 throughout)
        rows=np.asarray(path.steps, dtype=np.int64),
        ipu=path.step_ipu.astype(np.int16),
        start=path.step_start,
        end=path.step_end,
        stage=path.step_stage.astype(np.int32),
        program=path.step_program.astype(np.int32),
        link=path.step_link.astype(np.int32),
        contribution=np.asarray(path.contribution, dtype=np.int64),
    )


def of_document(doc: Any) -> CriticalPathView:
    """The view of an open document (anything with ``cached(key, fn)`` and ``analysis``: the
    GUI's ``Document``), computed on the first call and kept: call it off the GUI thread."""
    return doc.cached(CACHE_KEY, lambda: critical_path_view(doc.analysis))


def cached_view(doc: Any) -> CriticalPathView | None:
    """The document's view when it was computed already, else None (nothing computed)."""
    is_cached = getattr(doc, "is_cached", None)
    if is_cached is None or not is_cached(CACHE_KEY):
        return None
    return doc.cached(CACHE_KEY, lambda: None)
