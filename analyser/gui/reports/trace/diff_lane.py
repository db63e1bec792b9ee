"""The "differences" lane of the Execution Trace in compare mode: B - A per aligned step, drawn
under B's timeline on the same cycle axis (data: analyser.gui.model.diff_lane).

One row per IPU; a bar at each step of B that differs from its aligned step of A, as long as
B's step, coloured by the sign of B - A (red: B slower, green: B faster; a step only B runs is
red) and as tall as its share of the largest difference, so that the big changes stand out.
Hovering a bar names its step and its cycles in A and B; a click selects the step's cycles as
the range of both runs (their range statistics side by side) and selects B's step, its delta
under the lane.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QBrush
from PySide6.QtWidgets import QHBoxLayout, QWidget

from analyser.gui.axes import CycleAxis, fixed_prefix_axes, short_cycles
from analyser.gui.items import BatchedRectsItem
from analyser.gui.model.diff_lane import (
    DifferencesLane,
    ScreenBars,
    lane_of,
    ready_lane,
    screen_bars_of,
)
from analyser.gui.palette import qcolor
from analyser.gui.plots import LightPlotWidget
from analyser.gui.theme import style_plot
from analyser.gui.widgets import PoolTask, Relay

#: Most height the lane takes for one IPU (px; more IPUs, more height).
LANE_HEIGHT = 140


class DifferencesLaneView(LightPlotWidget):
    """Draws a :class:`DifferencesLane`; x-linked to A's timeline by the report. Emits
    ``differenceClicked(i)`` with the index of a clicked difference."""

    differenceClicked = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        # no context menu (setMenuEnabled(False) below): none to build (~9 ms of a view box's)
        super().__init__(parent, enableMenu=False, axisItems={"bottom": CycleAxis("bottom")})
        style_plot(self)
        fixed_prefix_axes(self)  # IPU rows and cycles: nothing to prefix
        self.setMouseEnabled(x=True, y=False)
        self.getPlotItem().hideButtons()
        self.getPlotItem().setMenuEnabled(False)
        # IPU 0 on top, as in the timelines above the lane
        self.getPlotItem().getViewBox().invertY(True)
        self.lane: DifferencesLane | None = None
        #: the drawn bars: one item, a group per colour (B slower, B faster), redrawn at
        #: screen resolution when a paint finds the range or the width changed (ScreenBars: a
        #: BarGraphItem per colour with 150,000 differences cost 30-45 ms a paint; redrawn at
        #: every range change, a compare first visit's layout passes redrew them 9 times,
        # ); empty when there is no lane
        self.bars: list[BatchedRectsItem] = []
        self._drawn_at: tuple | None = None
        #: the lane is computed on the report's pool; answers of an older request are dropped
        self.gen = 0
        self.relay = Relay(self)
        self.relay.done.connect(self._on_done)
        #: B's trace (its program names make the tooltip), set by the report
        self.trace_b = None
        self._names: np.ndarray | None = None
        self.hover_text = ""
        #: the clicked difference (index into the lane)
        self.selected: int | None = None
        self.scene().sigMouseMoved.connect(self._on_move)
        self.scene().sigMouseClicked.connect(self._on_click)

    def _data_at(self, scene_pos) -> tuple[float, float, float] | None:
        """(cycle, row, tolerance of 3 pixels in cycles) at a scene position in the plot."""
        vb = self.getPlotItem().getViewBox()
        if not vb.sceneBoundingRect().contains(scene_pos):
            return None
        p = vb.mapSceneToView(scene_pos)
        (x0, x1), _ = vb.viewRange()
        return float(p.x()), float(p.y()), 3 * (x1 - x0) / max(1.0, vb.width())

    @property
    def names(self) -> np.ndarray | None:
        """B's program names (the tooltip's), read on the first tooltip or selection: B's
         programs table (with its operations' names) is not read on the trace's first visit
        ."""
        if self._names is None and self.trace_b is not None:
            self._names = self.trace_b.programs["name"].astype(str)
        return self._names

    def drawn_colours(self) -> set[str]:
        """The colours of the bars drawn (``#rrggbb``) at the current range."""
        self._redraw_bars(in_paint=False)
        return {brush.color().name() for item in self.bars for brush in item.brushes()}

    def _redraw_bars(self, in_paint: bool = True) -> None:
        """The lane's bars for the visible range at screen resolution, made by the bar item's
        paint when the range or the width changed since the last (a later paint replays them).
        """
        lane = self.lane
        if lane is None or not self.bars:
            return
        vb = self.getPlotItem().getViewBox()
        (t0, t1), _ = vb.viewRange()
        width = max(1, int(vb.width()))
        at = (t0, t1, width)
        if at == self._drawn_at:
            return
        self._drawn_at = at
        colours = {1: qcolor("status", "oom"), -1: qcolor("status", "ok")}
        self.bars[0].set_groups(
            [(QBrush(colours[sign]), rects) for sign, rects in self._screen.at(t0, t1, width)],
            bounds=self.bars[0].boundingRect(),
            in_paint=in_paint,
        )

    def difference_at(self, x: float, y: float, tolerance: float = 0.0) -> int | None:
        """Index of the difference under cycle ``x`` on row ``y`` (see DifferencesLane.at)."""
        return None if self.lane is None else self.lane.at(x, y, tolerance)

    def describe(self, i: int) -> str:
        """The tooltip of difference ``i``."""
        return self.lane.describe(i, self.names) + " · click to select it in A and B"

    def _on_move(self, scene_pos) -> None:
        at = self._data_at(scene_pos)
        i = None if at is None else self.difference_at(*at)
        self.hover_text = "" if i is None else self.describe(i)
        self.setToolTip(self.hover_text)

    def _on_click(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        at = self._data_at(event.scenePos())
        i = None if at is None else self.difference_at(*at)
        if i is not None:
            self.differenceClicked.emit(i)

    def _on_done(self, gen: int, result: object) -> None:
        if gen != self.gen:
            return
        if isinstance(result, Exception):  # one sentence, not a lost thread exception
            self.set_lane(None)
            self.getPlotItem().setTitle(f"B − A differences unavailable: {result}", size="9pt")
            return
        lane, screen = result
        self.set_lane(lane, screen)
        self.box.setMaximumHeight(max(LANE_HEIGHT, 80 + 24 * lane.n_ipus))
        self.sync()

    def set_pending(self) -> None:
        """Empty, saying the steps are being aligned."""
        self.set_lane(None)
        self.getPlotItem().setTitle("B − A differences: aligning the steps…", size="9pt")

    def set_lane(self, lane: DifferencesLane | None, screen: ScreenBars | None = None) -> None:
        """Draw ``lane`` (None: empty); ``screen``: its :class:`ScreenBars` when computed
        already."""
        self.lane = lane
        self.selected = None
        for item in self.bars:
            self.removeItem(item)
        self.bars = []
        if lane is None:
            self.getPlotItem().setTitle(None)
            return
        self._drawn_at = None
        if lane.delta.size:
            # red: B slower (or only B runs it); green: B faster (drawn over the red)
            self._screen = screen if screen is not None else ScreenBars(lane)
            item = BatchedRectsItem()
            x_min = float(lane.start.min())
            x_end = float((lane.start + np.maximum(lane.cycles, 1)).max())
            # the lane's extent now; the bars themselves when a paint needs them (its range)
            item.set_groups([], bounds=QRectF(x_min, -0.5, x_end - x_min, lane.n_ipus))
            item.before_paint = self._redraw_bars
            self.addItem(item)
            self.bars.append(item)
        ticks = [(i, f"IPU {i}") for i in range(lane.n_ipus)]
        self.getPlotItem().getAxis("left").setTicks([ticks])
        self.setYRange(-0.6, lane.n_ipus - 0.4, padding=0)
        sign = "+" if lane.total > 0 else ""
        parts = [
            f"B − A differences: {sign}{short_cycles(lane.total)} cycles",
            f"{lane.delta.size:,} steps differ (red: B slower, green: B faster)",
        ]
        if lane.removed_steps:
            parts.append(f"{lane.removed_steps:,} steps only in A")
        if lane.left_out:
            parts.append(f"{lane.left_out:,} smallest not drawn")
        self.getPlotItem().setTitle(" · ".join(parts), size="9pt")


def _follow(view: DifferencesLaneView, timeline) -> None:
    """Keep ``view`` on ``timeline``'s cycle range, its plot area under the timeline's: the same
    left-axis width (a pyqtgraph x-link lines views up by their screen geometry, and the
    timeline has a scroll bar beside it)."""
    vb = timeline.getPlotItem().getViewBox()

    def sync(*_args) -> None:
        if not view.isVisible():
            return
        view.getPlotItem().getAxis("left").setWidth(
            int(timeline.getPlotItem().getAxis("left").width())
        )
        bar = timeline.scrollbar
        view.gap.setFixedWidth(bar.width() if bar.isVisible() else 0)
        view.getAxis("bottom").set_time(timeline.time_axis.clock_hz)
        x0, x1 = vb.viewRange()[0]
        view.setXRange(x0, x1, padding=0)

    vb.sigXRangeChanged.connect(sync)
    vb.sigResized.connect(sync)
    view.sync = sync


def differences_view(report) -> DifferencesLaneView:
    """The lane view of ``report`` (a TraceReport), built hidden under the timelines and made
    to follow A's cycle axis on first use (by the window's idle build in compare mode: a
    plot's construction is ~30 ms of a first visit)."""
    view = getattr(report, "differences", None)
    if view is None:
        view = DifferencesLaneView()
        view.setMouseEnabled(x=False, y=False)  # it follows A's timeline (pan / zoom there)
        box = QWidget()
        row = QHBoxLayout(box)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(0)
        row.addWidget(view, 1)
        view.gap = QWidget()  # where a timeline has its scroll bar when it shows one
        row.addWidget(view.gap)
        box.hide()  # shown by show_differences
        report.splitter.insertWidget(2, box)
        view.box = box
        _follow(view, report.timeline)
        view.differenceClicked.connect(lambda i: select_difference(report, i))
        report.differences = view
    return view


def show_differences(report, doc_a, doc_b) -> None:
    """Show B - A under B's timeline in ``report`` (a TraceReport in compare mode)."""
    view = differences_view(report)
    trace_b = report.trace_b
    view.trace_b, view._names = trace_b, None
    view.gen += 1
    style_plot(view)  # the current theme (a theme switch shows the documents again)
    view.box.show()
    ready = ready_lane(doc_a, doc_b)
    if ready is not None:  # computed with the open: drawn in the report's first paint
        view._on_done(view.gen, ready)
        return
    view.set_pending()
    view.box.setMaximumHeight(LANE_HEIGHT)
    view.sync()
    report._pool.start(
        PoolTask(
            lambda: (lane_of(doc_a, doc_b), screen_bars_of(doc_a, doc_b)), view.gen, view.relay
        )
    )


def select_difference(report, i: int) -> None:
    """A click on difference ``i``: its step's cycles become the selected range of A and B
    (the view fits them first when they are narrower than a few pixels), B's step is
    selected, and the lane's heading says its delta."""
    view = report.differences
    lane = view.lane
    if lane is None or not 0 <= i < lane.delta.size:
        return
    t0 = float(lane.start[i])
    t1 = t0 + float(max(1, lane.cycles[i]))
    tl = report.timeline
    x0, x1 = tl.x_range()
    if (t1 - t0) < 4 * (x1 - x0) / tl.pixel_width() or t1 < x0 or t0 > x1:
        pad = max((t1 - t0) * 2, 100.0)
        tl.set_x_range(t0 - pad, t1 + pad)
    tl.set_range(t0, t1)  # A's band; the report gives B the same band and range statistics
    b = report.timeline_b
    if b.trace is not None:
        row = b.trace.step_at(int(lane.ipu[i]), t0 + (t1 - t0) / 2, tolerance=0)
        if row is not None:
            b.select_row(row, center=False)
    view.selected = i
    view.getPlotItem().setTitle("Selected: " + lane.describe(i, view.names), size="9pt")


def hide_differences(report) -> None:
    """Hide the lane (a single profile, or B without a trace)."""
    view = getattr(report, "differences", None)
    if view is not None:
        view.gen += 1  # a lane still being computed is not shown
        view.set_lane(None)
        view.box.hide()
