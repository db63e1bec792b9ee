"""The execution-trace timeline: one block of lanes per IPU, steps coloured by type.

Drawing is driven by :class:`analyser.trace.window.TraceWindow`, and where each lane sits and
what is drawn there by the Qt-free view-model :mod:`analyser.gui.model.timeline` (this module
paints and handles input): on every pan or zoom the
view asks for the rectangles of the visible window of each visible IPU at the plot's pixel width
(level of detail: never more than pixels x types x lanes rectangles) and paints them with one
``QPainter.drawRects`` call per step type from buffers filled by numpy (no Python loop over steps).

The host's timeline of the call (profile format 1.2, ``/execution/host``: preparing samples,
the call's round trip, waiting for the device or the loader) is drawn under the IPUs as "Host"
lanes (main, loader), one colour per event kind; the view may then pan back to the host's first
event, before cycle 0 of the device trace. Profiles without it show no host lanes.

Step names are drawn inside the slices wide enough to hold a few letters (elided, as Perfetto
does): only single steps in view at least :attr:`SliceLabelsItem.MIN_PX` pixels wide are
labelled, so the labels never cost more than the pixels in view.

Mouse: wheel zooms around the cursor, drag pans, click selects a step; a drag on the time axis
(or Shift + drag over the lanes) selects a range of cycles (Perfetto's area selection), shown as
a shaded band with its duration (Esc or a click clears it). Keyboard (Perfetto-style): W / S or
+ / - zoom in / out, A / D or Left / Right pan, Home or 0 shows the whole run, F fits the
selection (the selected range, step or host event), P pins (or unpins) the lane under the
pointer, else the selected step's, to the top (Perfetto's pinned tracks: it stays there while
the other lanes scroll; a right click on a lane or its label offers pin and fold).
"""

from __future__ import annotations

import functools
import weakref

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, QThreadPool, QTimer, Signal
from PySide6.QtGui import QBrush, QColor, QCursor, QPen
from PySide6.QtWidgets import QGraphicsRectItem, QScrollBar

from analyser.core.units import fmt_seconds
from analyser.gui.axes import CycleAxis, fixed_prefix_axes, short_cycles
from analyser.gui.items import (
    ArrowsItem,
    BatchedRectsItem,
    SliceLabelsItem,
)
from analyser.gui.model import timeline as model
from analyser.gui.model.timeline import LANE_FILL, MAX_FLOWS, LaneLayout, lane_label
from analyser.gui.model.trace import (
    HOST_EVENTS,
    STEP_TYPES,
    ColumnTable,
    TraceWindow,
    WindowResult,
)
from analyser.gui.palette import qcolor
from analyser.gui.plots import LightPlotWidget
from analyser.gui.reports.trace.critical import CriticalPathOverlay
from analyser.gui.reports.trace.lane_groups import LaneGroups
from analyser.gui.reports.trace.lane_items import (
    LANE_AXIS_PX,
    GridLines,
    LaneAxis,
    TraceViewBox,
    light_fill,
)
from analyser.gui.reports.trace.marks import Marks
from analyser.gui.theme import chart_colors, selection_hatch, style_plot
from analyser.gui.widgets import PoolTask, Relay
from profiles.errors import UserFacingError

#: Smallest lane height in pixels; more lanes than fit scroll vertically.
MIN_LANE_PX = 18
#: Zoom factor of one key press.
KEY_ZOOM = 1.6
#: Share of the visible width one key press pans.
KEY_PAN = 0.2
#: Narrowest window, in cycles.
MIN_SPAN = 20.0
#: Flow arrows are drawn when the window holds at most this many steps, at most MAX_FLOWS.
FLOW_ROWS = 20_000
#: The flows are queried once the view has rested this long (ms).
FLOW_DELAY_MS = 120
# the trace's own keys (W / S zoom, A / D pan, Home / 0 whole run), also taken from the report's
# controls that have no use for them (the View box, the buttons, the tabs): see TraceReport
TRACE_KEYS = frozenset(
    (
        Qt.Key.Key_W,
        Qt.Key.Key_S,
        Qt.Key.Key_A,
        Qt.Key.Key_D,
        Qt.Key.Key_Plus,
        Qt.Key.Key_Minus,
        Qt.Key.Key_Equal,
        Qt.Key.Key_Left,
        Qt.Key.Key_Right,
        Qt.Key.Key_Home,
        Qt.Key.Key_0,
        Qt.Key.Key_F,
        Qt.Key.Key_M,
        Qt.Key.Key_P,
        Qt.Key.Key_Escape,
    )
)


__all__ = ["LANE_AXIS_PX", "LANE_FILL", "TimelineView", "lane_label"]

#: A timeline's host lanes without a trace: none (an empty table, only ever read; numpy
#: columns: the trace draws without pandas).
_NO_HOST = ColumnTable(
    {
        c: np.zeros(0, dtype=object if c in ("lane", "kind") else np.int64)
        for c in ("lane", "kind", "start", "end", "samples")
    }
)


class TimelineView(LaneGroups, LightPlotWidget):
    """Timeline of one profile. Emits ``stepSelected(row)`` and ``windowChanged(t0, t1)``."""

    stepSelected = Signal(int)
    hostSelected = Signal(int)  # row of TraceWindow.host_lane()
    windowChanged = Signal(float, float)
    #: a range of cycles was selected (t0, t1) by a drag on the time axis or Shift + drag
    rangeSelected = Signal(float, float)
    rangeCleared = Signal()
    #: the flows of the view arrived from the background query and are drawn
    flowsReady = Signal()
    #: step names read in the background were drawn
    namesReady = Signal()
    redrawn = Signal()

    def __init__(self, parent=None, title: str = "") -> None:
        self.lane_axis = LaneAxis()
        self.time_axis = CycleAxis("bottom")
        vb = TraceViewBox()
        super().__init__(
            parent, viewBox=vb, axisItems={"left": self.lane_axis, "bottom": self.time_axis}
        )
        vb.range_drag = self._range_drag
        self.lane_axis.clicked = self.toggle_group_at
        self.lane_axis.menu = self.show_lane_menu
        #: folded lane groups ("ipu", i) / ("host",) and pinned lanes, kept per trace (per
        #: document, and so across a theme switch, which shows the same traces again)
        self._lanes_by_trace: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        #: where the lanes sit (the view-model)
        self.lane_layout = LaneLayout()
        style_plot(self)
        fixed_prefix_axes(self)  # lane labels and cycles: nothing to prefix
        self.trace: TraceWindow | None = None
        self.group = "flat"
        self.results: dict[int, WindowResult] = {}
        self.selected_row: int | None = None
        self.selected_host: int | None = None
        #: Perfetto's M: the pinned bands (built on the first M)
        self.marks: Marks | None = None
        self.host = _NO_HOST
        self.redraw_count = 0
        #: the highlighted step or host event: (start, cycles, lane group, row of the group)
        self._highlighted: tuple[float, float, tuple, int] | None = None
        self._sep_items: list = []
        self.restricted: tuple[float, float] | None = None
        #: compare mode: (view from, view to, pan limit from, pan limit to) over both runs, set
        #: by the report; Home shows it, so a shorter A does not hide the rest of B
        self.shared_range: tuple[float, float, float, float] | None = None
        plot = self.getPlotItem()
        plot.setMenuEnabled(False)
        plot.hideButtons()
        plot.addItem(GridLines(plot))
        plot.setLabel("bottom", "cycles")
        if title:
            plot.setTitle(title, size="9pt")
        vb = plot.getViewBox()
        vb.invertY(True)
        vb.setMouseEnabled(x=True, y=False)
        vb.setDefaultPadding(0.0)
        self.items = BatchedRectsItem()
        self._step_brushes = {t: QBrush(qcolor("step_types", t)) for t in STEP_TYPES}
        plot.addItem(self.items)
        self._step_dark = {t: light_fill(qcolor("step_types", t)) for t in STEP_TYPES}
        self.host_items = BatchedRectsItem()
        self._host_brushes = {k: QBrush(qcolor("host_events", k)) for k in HOST_EVENTS}
        plot.addItem(self.host_items)
        self.labels = SliceLabelsItem()
        plot.addItem(self.labels)
        self.host_labels = SliceLabelsItem()
        plot.addItem(self.host_labels)
        # flow arrows between IPUs (cross-IPU exchanges, external syncs) of the visible window
        self.flows_item = ArrowsItem()
        plot.addItem(self.flows_item)
        self.show_flows = True
        self.flows = None
        self._flows_cache = None
        self._flow_gen = 0
        self._label_gen = 0
        self._flow_pool = QThreadPool(self)
        self._flow_pool.setMaxThreadCount(1)
        self._flow_relay = Relay(self)
        self._flow_relay.done.connect(self._on_flows)
        self._flow_timer = self._rest_timer(self._query_flows)
        self._label_rows = np.zeros(0, dtype=np.int64)
        self._label_relay = Relay(self)
        self._label_relay.done.connect(self._on_label_rows)
        self._label_timer = self._rest_timer(self._read_label_rows)

        exchange = QPen(qcolor("step_types", "GlobalExchange").darker(140))
        sync = QPen(QColor(chart_colors().foreground))
        for pen in (exchange, sync):
            pen.setWidthF(1.4)
        self._flow_pens = {"exchange": exchange, "sync": sync}
        # the selected range of cycles: a shaded band over every lane, its duration above it
        self.range_sel: tuple[float, float] | None = None
        self._drag_from = 0.0
        # (the band and its label: built on the first selection, see band)
        self._band: pg.LinearRegionItem | None = None
        self._band_label: pg.TextItem | None = None
        # the selected step or host event: outlined and hatched, never tinted (a yellow tint
        # turned a selected GlobalExchange into the DoExchange orange)
        self.highlight = QGraphicsRectItem()
        pen = QPen(QColor(chart_colors().foreground))
        pen.setCosmetic(True)
        pen.setWidth(2)
        self.highlight.setPen(pen)
        self.highlight.setBrush(selection_hatch())
        self.highlight.setZValue(10)
        self.highlight.hide()
        plot.addItem(self.highlight)
        #: the critical path's highlight (off until the report's check box is ticked)
        self.critical = CriticalPathOverlay(self)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(0)
        self._timer.timeout.connect(self._redraw_if_moved)
        #: what the last redraw drew (see _view_state)
        self._drawn: tuple | None = None
        vb.sigXRangeChanged.connect(self._schedule)
        vb.sigResized.connect(self._fit_lanes)
        self.scrollbar = QScrollBar(Qt.Orientation.Vertical)
        self.scrollbar.hide()
        self.scrollbar.valueChanged.connect(self._fit_lanes)
        self.scene().sigMouseClicked.connect(self._on_click)
        self._hover_pos = None
        self._hover_timer = QTimer(self)
        self._hover_timer.setSingleShot(True)
        self._hover_timer.setInterval(80)
        self._hover_timer.timeout.connect(self._update_hover)
        self.scene().sigMouseMoved.connect(self._on_move)
        self.hover_text = ""
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)

    # -- data ------------------------------------------------------------------------------------
    def set_trace(self, trace: TraceWindow | None, group: str = "flat") -> None:
        if self.marks is not None and trace is not self.trace:  # marks belong to one run
            self.marks.clear()
        self.trace = trace
        self.group = group
        self.selected_row = None
        self.selected_host = None
        self._highlighted = None
        self.highlight.hide()
        self.clear_range(emit=False)
        self.restricted = None
        self.shared_range = None
        self._flow_timer.stop()
        self._label_timer.stop()
        self._flow_gen += 1
        self._label_gen += 1
        self._flows_cache = None
        self.host = trace.host_lane() if trace is not None else _NO_HOST
        self.critical.view = None  # a path belongs to one trace (the report sets the new one)
        self._layout_lanes()
        if trace is not None:
            self.reset_zoom()
        else:
            self.items.set_groups([])

    def set_group(self, group: str) -> None:
        if group != self.group:
            previous, self.group = self.group, group
            try:
                self._layout_lanes()
            except Exception:
                # the grouping cannot be shown (a damaged profile): keep the previous lanes
                # (a half-built layout broke every later redraw) and say why (the caller)
                self.group = previous
                self._layout_lanes()
                raise
            self.redraw()
            if self.selected_row is not None:
                self.select_row(self.selected_row, center=False)
            elif self.selected_host is not None:  # the host lanes moved with the IPUs' lanes
                self.select_host(self.selected_host)

    def _layout_lanes(self) -> None:
        """Lay the lanes out again (trace, grouping, folds or pins changed), scrolled to the
        top."""
        state = self._lane_state()
        self.lane_layout = LaneLayout.build(
            self.trace, self.group, self.host, state["folded"], state["pinned"]
        )
        longest = self.lane_layout.longest_label()
        self.lane_axis.setWidth(int(min(LANE_AXIS_PX, max(56, 6.5 * longest + 16))))
        vb = self.getPlotItem().getViewBox()
        vb.setLimits(yMin=-0.2, yMax=self.n_lanes + 0.2)
        self.scrollbar.blockSignals(True)
        self.scrollbar.setValue(0)
        self.scrollbar.blockSignals(False)
        self._fit_lanes(force=True)

    def _apply_layout(self) -> None:
        """Show the layout's placement: labels, separators, host events, the highlight."""
        for line in self._sep_items:
            self.getPlotItem().removeItem(line)
        self._sep_items = []
        for sy in self.lane_layout.separators[:-1]:
            line = pg.InfiniteLine(sy, angle=0, pen=pg.mkPen("#888888", width=1))
            self.getPlotItem().addItem(line)
            self._sep_items.append(line)
        self.lane_axis.set_labels(self.lane_layout.labels)
        self._draw_host()
        self._place_highlight()

    def visible_lanes(self) -> int:
        """Lanes that fit at a readable height (at least MIN_LANE_PX pixels each)."""
        h = self.getPlotItem().getViewBox().height()
        return max(2, int(h // MIN_LANE_PX)) if h > 0 else self.n_lanes

    def _fit_lanes(self, *args, force: bool = False) -> None:
        """Show all lanes when they fit, else the pinned lanes and a window of the others
        moved by the scroll bar."""
        vis = min(self.n_lanes, self.visible_lanes())
        extra = self.lane_layout.max_scroll(vis)
        self.scrollbar.blockSignals(True)
        self.scrollbar.setRange(0, max(0, extra))
        self.scrollbar.setPageStep(max(1, vis - self.lane_layout.n_pinned))
        self.scrollbar.blockSignals(False)
        self.scrollbar.setVisible(extra > 0)
        top = min(self.scrollbar.value(), max(0, extra))
        if force or top != self.lane_layout.scroll:
            self.lane_layout.place(top)
            self._apply_layout()
        vb = self.getPlotItem().getViewBox()
        vb.setYRange(-0.1, vis + 0.1, padding=0)
        self._schedule()

    def y_range(self) -> tuple[float, float]:
        _, (y0, y1) = self.getPlotItem().getViewBox().viewRange()
        return float(y0), float(y1)

    def full_range(self) -> tuple[float, float]:
        """The device run (or the run, host call, the view is restricted to)."""
        if self.trace is None:
            return 0.0, 1.0
        if self.restricted is not None:
            return self.restricted
        t0, t1 = self.trace.full_extent()
        return t0, max(t1, t0 + MIN_SPAN)

    def restrict(self, run: tuple[float, float] | None) -> None:
        """Restrict the view to cycles ``run`` (one host call of the program; None: the whole
        trace): Home shows it, panning stops at its ends; the view moves to it."""
        self.restricted = (
            None if run is None else (float(run[0]), float(max(run[1], run[0] + MIN_SPAN)))
        )
        self.reset_zoom()

    def allowed_range(self) -> tuple[float, float]:
        """The device run, widened to the host lane's events (which start before cycle 0);
        only the run when the view is restricted to one."""
        t0, t1 = self.full_range()
        if self.restricted is not None:
            return t0, t1
        if self.host_lanes:
            t0 = min(t0, float(self.host["start"].min()))
            t1 = max(t1, float(self.host["end"].max()))
        return t0, t1

    def reset_zoom(self) -> None:
        """Home: the whole run (both runs in compare mode), or the run the view is restricted
        to."""
        vb = self.getPlotItem().getViewBox()
        if self.shared_range is not None and self.restricted is None:
            t0, t1, lo, hi = self.shared_range
            vb.setLimits(xMin=lo, xMax=hi, minXRange=MIN_SPAN)
            vb.setXRange(t0, t1, padding=0)
            self._schedule()
            return
        t0, t1 = self.full_range()
        pad = (t1 - t0) * 0.01 if self.restricted is None else 0.0
        lo, hi = self.allowed_range()
        # the run starts at its first cycle (no negative cycles on the axis, as in PopVision)
        # unless the host lane records time before it; a little room after the last step keeps
        # it visible at the right edge
        vb.setLimits(xMin=lo, xMax=max(hi, t1 + pad * 5), minXRange=MIN_SPAN)
        vb.setXRange(t0, t1 + pad, padding=0)
        self._schedule()

    def x_range(self) -> tuple[float, float]:
        (x0, x1), _ = self.getPlotItem().getViewBox().viewRange()
        return float(x0), float(x1)

    def set_x_range(self, t0: float, t1: float) -> None:
        self.getPlotItem().getViewBox().setXRange(t0, t1, padding=0)

    def pixel_width(self) -> int:
        return max(50, int(self.getPlotItem().getViewBox().width()))

    # -- drawing ---------------------------------------------------------------------------------
    def _schedule(self, *args) -> None:
        if not self._timer.isActive():
            self._timer.start()

    def _view_state(self) -> tuple:
        """What a redraw draws from: the trace, the grouping, the lanes' layout and scroll,
        the cycles in view, the plot's width in pixels and the lanes in view."""
        layout = self.lane_layout
        return (
            self.trace,
            self.group,
            layout,
            layout.scroll,
            self.x_range(),
            self.pixel_width(),
            self.y_range(),
        )

    def _redraw_if_moved(self) -> None:
        """A scheduled redraw (the range or the plot's size changed): skipped when the view
        is what the last redraw drew. A fill redraws, then lays the report out: the plots'
        heights change, and a redraw of the same lanes and cycles used to follow (~15 ms per
        timeline of a compare-mode first visit)."""
        drawn, state = self._drawn, self._view_state()
        if (
            drawn is not None
            and drawn[0] is state[0]
            and drawn[2] is state[2]
            and drawn[1] == state[1]
            and drawn[3:] == state[3:]
        ):
            return
        self.redraw()

    def redraw(self) -> None:
        """Fetch the visible window of every IPU and repaint (one call per step type)."""
        self._timer.stop()
        self._drawn = None
        if self.trace is None:
            return
        t0, t1 = self.x_range()
        width = self.pixel_width()
        min_label = SliceLabelsItem.MIN_PX * (t1 - t0) / width
        parts: dict[str, list[np.ndarray]] = {}
        labelled: list[tuple[np.ndarray, np.ndarray, bool]] = []
        self.results = {}
        # only the IPUs in view are read (as PopVision loads visible IPUs)
        for ipu in self.lane_layout.ipus_between(*self.y_range()):
            # zoomed out, each pixel of a lane is striped by its step types' shares of
            # cycles (a minority type stays visible)
            res = self.trace.window(ipu, t0, t1, width, self.group_of(ipu), stripes=True)
            self.results[ipu] = res
            placed = functools.partial(self.lane_layout.lane_y, ipu)
            rects, named = model.step_rects(res, placed, min_label)
            for name, arr in rects.items():
                parts.setdefault(name, []).append(arr)
            # single steps wide enough for a few letters get their name
            labelled.extend((arr, rows, self._step_dark[name]) for name, arr, rows in named)
        # fixed order: later step types paint over earlier ones
        self.items.set_groups(
            [(self._step_brushes[t], np.concatenate(parts[t])) for t in STEP_TYPES if t in parts]
        )
        self._draw_labels(labelled, t0, t1)
        self.critical.redraw(t0, t1, width)
        self._draw_flows(t0, t1)
        self._place_band_label()
        self._drawn = self._view_state()
        self.redraw_count += 1
        self.windowChanged.emit(t0, t1)
        self.redrawn.emit()

    def _draw_labels(self, labelled, t0: float, t1: float) -> None:
        """The names of the labelled single steps (the widest :data:`MAX_LABELS` in view)."""
        if not labelled:
            self.labels.set_labels(np.zeros((0, 4)), [], np.zeros(0, dtype=bool))
            return
        rects = np.concatenate([a for a, _r, _d in labelled])
        rows = np.concatenate([r for _a, r, _d in labelled])
        dark = np.concatenate([np.full(len(r), d) for _a, r, d in labelled])
        rects, rows, dark = model.pick_labels(rects, rows, dark, t0, t1)
        try:
            # names from the blocks already read; the others are read in the background
            # once the view rests (a first visit to a part of a long trace), then redrawn
            prog = self.trace.column_of_rows(rows, "program", cached_only=True)
            names = self._program_names()[np.maximum(prog, 0)]
        except UserFacingError:  # the profile went away: no names this time
            prog = np.full(len(rows), -1)
            names = np.full(len(rows), "")
        unknown = prog < 0
        if unknown.any():
            self._label_rows = rows[unknown]
            self._label_timer.start()
        known = ~unknown
        self.labels.set_labels(rects[known], names[known], dark[known])

    def set_flows_visible(self, on: bool) -> None:
        """Show or hide the flow arrows."""
        self.show_flows = bool(on)
        self._draw_flows(*self.x_range())

    def _draw_flows(self, t0: float, t1: float) -> None:
        """Arrows of the window's cross-IPU exchanges and external syncs (none when hidden or
        when the window holds more than FLOW_ROWS steps: ``flows.too_many``). They come from
        the kept flows of a wider window when it covers this one; otherwise they are queried
        in the background once the view rests (FLOW_DELAY_MS), off the pan / zoom path, and
        drawn when they arrive (``flowsReady``)."""
        self.flows = None
        if not self.show_flows or self.trace is None or self.trace.n_ipus < 2:
            self._flow_timer.stop()
            self.flows_item.set_arrows([])
            return
        fl = model.kept_flows(self._flows_cache, t0, t1)
        if fl is None:
            self.flows_item.set_arrows([])
            self._flow_timer.start()
            return
        self.flows = fl
        if not len(fl):
            self.flows_item.set_arrows([])
            return
        y0 = self._lane_y(fl.src_ipu, fl.src_row)
        y1 = self._lane_y(fl.dst_ipu, fl.dst_row)
        xy = np.stack([fl.x0, y0, fl.x1, y1], axis=1)
        shown = np.isfinite(xy).all(axis=1)  # not to or from a lane scrolled under the pins
        self.flows_item.set_arrows(
            [(pen, xy[(fl.kind == kind) & shown]) for kind, pen in self._flow_pens.items()]
        )

    def _query_flows(self) -> None:
        """Query the flows of the window widened by its width on each side, in the pool."""
        if self.trace is None or not self.show_flows:
            return
        t0, t1 = self.x_range()
        self._flow_gen += 1
        gen, trace, span = self._flow_gen, self.trace, t1 - t0

        def query():
            lo, hi = t0 - span, t1 + span
            fl = trace.flows(lo, hi, max_rows=FLOW_ROWS, limit=MAX_FLOWS)
            if fl.too_many or len(fl) >= MAX_FLOWS:  # too wide: the window itself
                lo, hi = t0, t1
                fl = trace.flows(lo, hi, max_rows=FLOW_ROWS, limit=MAX_FLOWS)
            return (lo, hi), fl

        self._flow_pool.start(PoolTask(query, gen, self._flow_relay))

    def _rest_timer(self, slot) -> QTimer:
        """A single-shot timer calling ``slot`` once the view has rested FLOW_DELAY_MS."""
        timer = QTimer(self)
        timer.setSingleShot(True)
        timer.setInterval(FLOW_DELAY_MS)
        timer.timeout.connect(slot)
        return timer

    @property
    def background_pending(self) -> bool:
        """True while what the view reads in the background after a redraw is still to come:
        its flow arrows or its slices' names, waiting for the view to rest or being read on
        the pool (each arrives as a queued result: :attr:`flowsReady`, :attr:`namesReady`)."""
        return (
            self._flow_timer.isActive()
            or self._label_timer.isActive()
            or self._flow_pool.activeThreadCount() > 0
        )

    def _program_names(self) -> np.ndarray:
        """The program names of the shown trace, as a numpy array of str (kept)."""
        if getattr(self, "_names_of", None) is not self.trace:
            self._names = self.trace.programs["name"].astype(str)
            self._names_of = self.trace
        return self._names

    def _read_label_rows(self) -> None:
        """Read, in the pool, the blocks of the steps whose names the last redraw lacked."""
        if self.trace is None or not len(self._label_rows):
            return
        trace, rows = self.trace, self._label_rows
        self._label_rows = np.zeros(0, dtype=np.int64)
        self._flow_pool.start(
            PoolTask(lambda: trace.programs_of_rows(rows), self._label_gen, self._label_relay)
        )

    def _on_label_rows(self, gen: int, result: object) -> None:
        if gen != self._label_gen or isinstance(result, Exception) or self.trace is None:
            return
        self.redraw()  # the names are in the cache now
        self.namesReady.emit()

    def _on_flows(self, gen: int, result: object) -> None:
        if gen != self._flow_gen or isinstance(result, Exception) or self.trace is None:
            return  # superseded, or the profile went away under the query
        self._flows_cache = result
        self._draw_flows(*self.x_range())
        self.flowsReady.emit()

    def _lane_y(self, ipus: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The middle of the lane of each step (``rows`` of IPUs ``ipus``) in the current
        grouping (NaN for a lane scrolled away)."""
        if self.group != "flat":
            lanes = self.trace.lanes_of_rows(rows, self.group)
        else:
            lanes = np.zeros(len(rows), dtype=np.int64)
        y = np.full(len(rows), np.nan)
        for ipu in np.unique(ipus):  # a loop over the IPUs, not over the arrows
            m = ipus == ipu
            y[m] = self.lane_layout.lane_y(int(ipu), lanes[m]) + 0.5
        return y

    @property
    def n_rects(self) -> int:
        return self.items.n_rects

    @property
    def n_steps_visible(self) -> int:
        return sum(r.n_steps for r in self.results.values())

    # -- selection -------------------------------------------------------------------------------
    def lane_at(self, y: float) -> tuple[int, int] | None:
        """(IPU, global lane id) of the lane at height ``y``."""
        return self.lane_layout.lane_at(y)

    def _on_click(self, event) -> None:
        if self.trace is None or event.button() not in (
            Qt.MouseButton.LeftButton,
            Qt.MouseButton.RightButton,
        ):
            return
        vb = self.getPlotItem().getViewBox()
        if not vb.sceneBoundingRect().contains(event.scenePos()):
            return
        p = vb.mapSceneToView(event.scenePos())
        if event.button() == Qt.MouseButton.RightButton:
            self.show_lane_menu(p.y(), event.screenPos().toPoint())
            return
        if self.range_sel is not None:  # a click ends the range selection (as in Perfetto)
            self.clear_range()
        row = self.select_at(p.x(), p.y())
        if row is not None and event.double():
            self.zoom_to_row(row)

    def zoom_to_row(self, row: int) -> None:
        """Fit the view to step ``row`` with a margin (double-click)."""
        if self.trace is None:
            return
        d = self.trace.step_details(row)
        pad = max(d["cycles"] * 0.25, MIN_SPAN)
        self.set_x_range(d["start"] - pad, d["end"] + pad)

    def _on_move(self, scene_pos) -> None:
        self._hover_pos = scene_pos
        self._hover_timer.start()

    def stop(self) -> None:
        """Stop pending redraw / hover / flow work (before the profile is closed); a flow
        query still running is waited for."""
        self._timer.stop()
        self._hover_timer.stop()
        self._flow_timer.stop()
        self._label_timer.stop()
        self._flow_gen += 1
        self._label_gen += 1
        self._flow_pool.waitForDone(30_000)

    def _update_hover(self) -> None:
        if self.trace is None or self._hover_pos is None:
            return
        vb = self.getPlotItem().getViewBox()
        if not vb.sceneBoundingRect().contains(self._hover_pos):
            self.setToolTip("")
            return
        p = vb.mapSceneToView(self._hover_pos)
        try:
            self.hover_text = self.describe_at(p.x(), p.y())
        except UserFacingError:  # the profile went away under the cursor: no tooltip
            self.hover_text = ""
        self.setToolTip(self.hover_text)

    def describe_at(self, x: float, y: float) -> str:
        """Tooltip text of the step under data point (x, y) ("" when none)."""
        if self.trace is None:
            return ""
        t0, t1 = self.x_range()
        pw = (t1 - t0) / self.pixel_width()
        host = self.host_at(x, y, 2 * pw)
        if host is not None:
            text, note = model.host_text(self.host_details(host)), self.critical.host_note(host)
            return f"{text}\n{note}" if note else text
        hit = self.lane_at(y)
        if hit is None:
            return ""
        ipu, lane = hit
        res = self.results.get(ipu)
        if res is not None and res.source != "rows":
            # aggregated view: say how many steps the pixel holds instead of reading rows
            return model.aggregate_text(res, ipu, lane, x, pw)
        row = self.trace.step_at(ipu, x, lane, self.group_of(ipu), tolerance=2 * pw)
        if row is None:
            return ""
        text = model.step_text(self.trace.step_details(row), ipu)
        note = self.critical.note(row)
        return f"{text}\n{note}" if note else text

    def select_at(self, x: float, y: float) -> int | None:
        """Select the step at data point (x cycles, y lane); returns its row or None."""
        if self.trace is None:
            return None
        t0, t1 = self.x_range()
        tol = 3 * (t1 - t0) / self.pixel_width()
        host = self.host_at(x, y, tol)
        if host is not None:
            self.select_host(host)
            return None
        hit = self.lane_at(y)
        if hit is None:
            return None
        ipu, lane = hit
        row = self.trace.step_at(ipu, x, lane, self.group_of(ipu), tolerance=tol)
        if row is not None:
            self.select_row(row, center=False)
        return row

    def select_row(self, row: int, center: bool = True) -> None:
        """Highlight step ``row`` (global row); with ``center`` the view moves to it, zooming
        in so that the step is at least a tenth of the view when it is smaller."""
        if self.trace is None:
            return
        d = self.trace.step_details(row)
        self.selected_row = row
        self.selected_host = None
        ipu = d["ipu"]
        key, index = ("ipu", ipu), 0
        block = self.lane_layout.block(key)
        if self.group_of(ipu) != "flat" and block is not None:
            lane_fn, cols = self.trace._lane_fn(self.group)
            data = self.trace.access.read_cached(row, row + 1, cols)
            at = np.flatnonzero(block.ids == int(lane_fn(data)[0]))
            index = int(at[0]) if len(at) else 0
        start, cycles = float(d["start"]), float(max(1, d["cycles"]))
        if center:
            t0, t1 = self.x_range()
            span = min(t1 - t0, max(cycles * 10, MIN_SPAN))
            mid = start + cycles / 2
            self.set_x_range(mid - span / 2, mid + span / 2)
        self._highlighted = (start, cycles, key, index)
        self._scroll_to_highlight()
        self._place_highlight()
        self.stepSelected.emit(row)

    def select_host(self, row: int) -> None:
        """Highlight host event ``row`` (of ``TraceWindow.host_lane()``)."""
        d = self.host_details(row)
        self.selected_row = None
        self.selected_host = row
        index = model.host_lane_index(self.lane_layout, self.host, row)
        self._highlighted = (float(d["start"]), float(d["cycles"]), ("host",), index)
        self._scroll_to_highlight()
        self._place_highlight()
        self.hostSelected.emit(row)

    def _scroll_to_highlight(self) -> None:
        """Scroll the lanes so that the highlighted lane shows (when they scroll)."""
        if self._highlighted is None or not self.scrollbar.isVisible():
            return
        vis = min(self.n_lanes, self.visible_lanes())
        _s, _c, key, index = self._highlighted
        top = self.lane_layout.scroll_to(key, index, vis)
        if top is not None:
            self.scrollbar.setValue(top)  # lays the lanes out there (and redraws)

    def _place_highlight(self) -> None:
        """Put the highlight on its lane where the lanes now sit (hidden when scrolled away)."""
        if self._highlighted is None:
            self.highlight.hide()
            return
        start, cycles, key, index = self._highlighted
        y = float(self.lane_layout.row_y(key, index))
        if not np.isfinite(y):
            self.highlight.hide()
            return
        t0, t1 = self.x_range()
        min_w = (t1 - t0) / self.pixel_width() * 3
        self.highlight.setRect(QRectF(start, y + 0.02, max(cycles, min_w), 0.96))
        self.highlight.show()

    # -- keyboard --------------------------------------------------------------------------------
    def zoom(self, factor: float, center: float | None = None) -> None:
        """Zoom by ``factor`` (>1 zooms in) around ``center`` (default: the middle)."""
        t0, t1 = self.x_range()
        c = (t0 + t1) / 2 if center is None else center
        span = max(MIN_SPAN, (t1 - t0) / factor)
        frac = (c - t0) / (t1 - t0)
        self.set_x_range(c - frac * span, c + (1 - frac) * span)

    def pan(self, fraction: float) -> None:
        t0, t1 = self.x_range()
        d = (t1 - t0) * fraction
        self.set_x_range(t0 + d, t1 + d)

    def cursor_cycle(self) -> float | None:
        """The cycle under the mouse pointer when it is over the plot, else None."""
        vb = self.getPlotItem().getViewBox()
        scene = self.mapToScene(self.viewport().mapFromGlobal(QCursor.pos()))
        if not vb.sceneBoundingRect().contains(scene):
            return None
        return float(vb.mapSceneToView(scene).x())

    def keyPressEvent(self, event) -> None:
        k = event.key()
        K = Qt.Key
        if k in (K.Key_W, K.Key_Plus, K.Key_Equal):
            # about the cursor, as the wheel does (and Perfetto's W / S)
            self.zoom(KEY_ZOOM, self.cursor_cycle())
        elif k in (K.Key_S, K.Key_Minus):
            self.zoom(1 / KEY_ZOOM, self.cursor_cycle())
        elif k in (K.Key_A, K.Key_Left):
            self.pan(-KEY_PAN)
        elif k in (K.Key_D, K.Key_Right):
            self.pan(KEY_PAN)
        elif k in (K.Key_Home, K.Key_0):
            self.reset_zoom()
        elif k == K.Key_F:
            self.fit_selection()
        elif k == K.Key_M:
            self.mark_selection()
        elif k == K.Key_P:
            key = self.pin_key()
            if key is not None:
                self.toggle_pin(key)
        elif k == K.Key_Escape and self.range_sel is not None:
            self.clear_range()
        else:
            super().keyPressEvent(event)
            return
        event.accept()

    # -- range selection (Perfetto's area selection) and F ---------------------------------------
    def _range_drag(self, ev) -> None:
        vb = self.getPlotItem().getViewBox()
        x = float(vb.mapSceneToView(ev.scenePos()).x())
        if ev.isStart():
            self._drag_from = float(vb.mapSceneToView(ev.buttonDownScenePos()).x())
        a, b = sorted((self._drag_from, x))
        self.set_range(a, b, emit=ev.isFinish())

    def set_range(self, t0: float, t1: float, emit: bool = True) -> None:
        """Select cycles ``[t0, t1)`` (clipped to the run and its host lanes): the shaded band
        and its duration; ``rangeSelected`` is emitted unless ``emit`` is False (while
        dragging). A range narrower than two pixels clears the selection."""
        lo, hi = self.allowed_range()
        t0, t1 = max(t0, lo), min(t1, hi)
        x0, x1 = self.x_range()
        if t1 - t0 < 2 * (x1 - x0) / self.pixel_width():
            self.clear_range(emit=emit)
            return
        self.range_sel = (t0, t1)
        self.band.setRegion((t0, t1))
        self.band.show()
        self.band_label.setText(self.duration_text(t1 - t0))
        self.band_label.show()
        self._place_band_label()
        if emit:
            self.rangeSelected.emit(t0, t1)

    @property
    def band(self) -> pg.LinearRegionItem:
        """The selected range's shaded band over every lane (its duration above it in
        :attr:`band_label`), built on the first selection: the two items and their plot
        bookkeeping were about 1 ms of each timeline's construction, on the Execution Trace's
        first visit."""
        if self._band is None:
            plot = self.getPlotItem()
            edge = pg.mkPen(chart_colors().foreground, width=2)
            band = pg.LinearRegionItem((0, 1), movable=False, brush=selection_hatch(), pen=edge)
            band.setZValue(8)
            band.hide()
            plot.addItem(band, ignoreBounds=True)
            label = pg.TextItem("", anchor=(0.5, 0.0), color=chart_colors().foreground)
            label.setZValue(12)
            label.hide()
            plot.addItem(label, ignoreBounds=True)
            self._band, self._band_label = band, label
        return self._band

    @property
    def band_label(self) -> pg.TextItem:
        """The selected range's duration, above its band (built with it)."""
        if self._band_label is None:
            self.band  # noqa: B018 - builds the band and its label
        return self._band_label

    def clear_range(self, emit: bool = True) -> None:
        had = self.range_sel is not None
        self.range_sel = None
        if self._band is not None:
            self._band.hide()
            self._band_label.hide()
        if had and emit:
            self.rangeCleared.emit()

    def _place_band_label(self) -> None:
        if self.range_sel is None:
            return
        t0, t1 = self.range_sel
        x0, x1 = self.x_range()
        mid = (max(t0, x0) + min(t1, x1)) / 2  # over the part of the band in view
        self.band_label.setPos(mid, self.y_range()[0])

    def duration_text(self, cycles: float) -> str:
        """``1.25M cycles`` and, when the profile records its clock, the time (``0.944 ms``)."""
        text = f"{short_cycles(cycles)} cycles"
        clock = self.trace.clock_hz if self.trace is not None else None
        return f"{text} · {fmt_seconds(cycles / clock)}" if clock else text

    def set_time_axis(self, on: bool) -> None:
        """Read the time axis in µs / ms at the profile's IPU clock (``on``) or in cycles."""
        clock = self.trace.clock_hz if self.trace is not None and on else None
        self.time_axis.set_time(clock)
        self.getPlotItem().setLabel("bottom", "time" if clock else "cycles")

    def selection_span(self) -> tuple[float, float] | None:
        """The selected range, else the selected step's or host event's cycles, else None."""
        if self.range_sel is not None:
            return self.range_sel
        if self.selected_row is not None and self.trace is not None:
            d = self.trace.step_details(self.selected_row)
            return float(d["start"]), float(d["end"])
        if self.selected_host is not None:
            d = self.host_details(self.selected_host)
            return float(d["start"]), float(d["end"])
        return None

    def mark_selection(self) -> bool | None:
        """M: mark the selection with a pinned band, or unmark it (Perfetto's M); True when
        marked, False when unmarked, None with nothing selected."""
        span = self.selection_span()
        if span is None:
            return None
        if self.marks is None:
            self.marks = Marks(self.getPlotItem())
        return self.marks.toggle(*span)

    def fit_selection(self) -> None:
        """F: fit the view to the selected range, else the selected step or host event (a
        margin of a tenth on each side), as Perfetto's F does."""
        span = self.selection_span()
        if span is None:
            return
        t0, t1 = span
        pad = max((t1 - t0) * 0.1, MIN_SPAN / 2)
        self.set_x_range(t0 - pad, t1 + pad)
