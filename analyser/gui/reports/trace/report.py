"""The Execution Trace report: timeline(s), range summary, step details, BSP view and search.

In compare mode the second profile's timeline sits under the first with the same cycle axis, and
the range summary shows A, B and B − A for the visible window.
"""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent, Qt, QThreadPool, QTimer, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from analyser.gui.axes import short_cycles
from analyser.gui.items import settle_item_bounds
from analyser.gui.model.document import Document
from analyser.gui.model.trace import GROUP_MODES, HOST_EVENTS, STEP_TYPES, TraceWindow
from analyser.gui.model.trace_view import TraceView, build_trace_view
from analyser.gui.palette import busy_colors, hex_color
from analyser.gui.reports.base import Report
from analyser.gui.reports.trace.bsp import BspView
from analyser.gui.reports.trace.critical import CriticalPathControl
from analyser.gui.reports.trace.diff_lane import (
    LANE_HEIGHT,
    differences_view,
    hide_differences,
    show_differences,
)
from analyser.gui.reports.trace.overview import OverviewStrip
from analyser.gui.reports.trace.panels import (
    RangeSummaryPanel,
    SearchPanel,
    StepDetailsPanel,
)
from analyser.gui.reports.trace.timeline import (
    FLOW_ROWS,
    KEY_ZOOM,
    TRACE_KEYS,
    TimelineView,
)
from analyser.gui.widgets import ElidedLabel, PoolTask, Relay, tab_widget

GROUP_LABELS = {
    "flat": "Flat (one lane per IPU)",
    "stage": "Grouped by pipeline stage",
    "operation": "Grouped by operation (layer)",
    "program": "Grouped by program",
}

#: Delay after the last pan / zoom before the range summary and BSP view are recomputed (ms).
SUMMARY_DELAY_MS = 150


def _swatch(color: str, text: str) -> str:
    """A legend entry whose swatch never wraps away from its label (a no-break space)."""
    return (
        f"<span style='white-space:nowrap'><span style='color:{color}'>■</span>&nbsp;{text}</span>"
    )


def legend_html(step_types, host_kinds) -> str:
    """The trace legend: the step types run, the host's event kinds, and the overview's busy
    scale (its colours at 0%, 50% and 100%)."""
    parts = [_swatch(hex_color("step_types", t), t) for t in STEP_TYPES if t in step_types]
    host = [_swatch(hex_color("host_events", k), k) for k in HOST_EVENTS if k in host_kinds]
    if host:
        parts.append("·&nbsp;Host: " + " &nbsp; ".join(host))
    busy = busy_colors()
    scale = "".join(f"<span style='color:{c}'>■</span>" for c in busy)
    parts.append(
        f"·&nbsp;<span style='white-space:nowrap'>Overview busy: 0%&nbsp;{scale}&nbsp;100%</span>"
    )
    return " &nbsp; ".join(parts)


class TraceReport(Report):
    title = "Execution Trace"
    key = "trace"
    data_needs = ("target", "execution", "trace_window")
    view_builder = staticmethod(build_trace_view)
    compare_cost = 5  # A's and B's timelines (two each) and the differences lane
    compare_part = ("_timeline_b", "timeline_b")
    needs_execution = True
    no_execution_text = (
        "{name} has no execution trace: the program does not fit in memory "
        "(see the Memory Report and Insights), so it never ran."
    )

    #: The visible-range summary was updated (or its failure said in its header).
    summaryReady = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(1)
        self._summary_gen = 0
        self._relay = Relay(self)
        self._relay.done.connect(self._on_summary)
        self.trace: TraceWindow | None = None
        self.trace_b: TraceWindow | None = None
        self._init_view_state()
        self.lay_out_with_empty_states()

        body = QWidget()
        lay = QVBoxLayout(body)
        lay.setContentsMargins(4, 4, 4, 4)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("View:"))
        self.group_combo = QComboBox()
        for g in GROUP_MODES:
            self.group_combo.addItem(GROUP_LABELS[g], g)
        self.group_combo.currentIndexChanged.connect(self._on_group)
        bar.addWidget(self.group_combo)
        self.zoom_in_button = QPushButton("Zoom in (W)")
        self.zoom_out_button = QPushButton("Zoom out (S)")
        self.reset_button = QPushButton("Whole run (Home)")
        self.zoom_in_button.clicked.connect(lambda: self.timeline.zoom(KEY_ZOOM))
        self.zoom_out_button.clicked.connect(lambda: self.timeline.zoom(1 / KEY_ZOOM))
        self.reset_button.clicked.connect(lambda: self.timeline.reset_zoom())
        for w in (self.zoom_in_button, self.zoom_out_button, self.reset_button):
            bar.addWidget(w)
        bar.addWidget(QLabel("Axis:"))
        self.axis_combo = QComboBox()
        self.axis_combo.addItem("cycles", False)
        self.axis_combo.addItem("time (s / ms / µs)", True)
        self.axis_combo.setToolTip("Read the time axis in cycles or in time at the IPU clock")
        self.axis_combo.currentIndexChanged.connect(self._on_axis)
        bar.addWidget(self.axis_combo)
        self.flows_box = QCheckBox("Flows")
        self.flows_box.setChecked(True)
        self.flows_box.setToolTip(
            "Arrows for cross-IPU exchanges and syncs (drawn when fewer than "
            f"{FLOW_ROWS:,} steps are in view)"
        )
        self.flows_box.toggled.connect(self._on_flows)
        bar.addWidget(self.flows_box)
        self.critical = CriticalPathControl(self)  # its box before the legend, its line under it
        bar.addWidget(QLabel("Run:"))
        self.run_combo = self._make_run_combo()
        bar.addWidget(self.run_combo)
        bar.addWidget(QLabel("BSP IPU:"))
        self.bsp_ipu = QSpinBox()
        self.bsp_ipu.valueChanged.connect(lambda _v: self._schedule_details())
        bar.addWidget(self.bsp_ipu)
        # a long read-out must not widen the window: it gives way, left-aligned beside the
        # legend, so the cycles stay and the tail ends in "…" (the full text is its tooltip)
        self.status = ElidedLabel("")
        bar.addStretch(1)
        lay.addLayout(bar)
        # the legend, and the window's read-out at the right of the same line
        legend_row = QHBoxLayout()
        legend_row.addWidget(self.critical.box, 0, Qt.AlignmentFlag.AlignTop)
        self.legend = QLabel("")
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        # it wraps between entries when the window is narrow: unwrapped, a compare-mode legend
        # (step types and four host kinds) made the report 1,341 px wide at least, and a
        # 1,280-px window grew past its screen
        self.legend.setWordWrap(True)
        legend_row.addWidget(self.legend, 3)
        legend_row.addSpacing(16)
        legend_row.addWidget(self.status, 1)
        lay.addLayout(legend_row)
        lay.addWidget(self.critical.label)

        self.overview = OverviewStrip()
        lay.addWidget(self.overview)
        self.splitter = QSplitter(Qt.Orientation.Vertical)
        self.timeline = TimelineView(title="")
        self.splitter.addWidget(self._with_scrollbar(self.timeline))
        #: B's timeline (compare mode), built into this box the first time it is needed
        #: (a timeline is a pyqtgraph plot: ~20 ms of the report's first visit)
        self._timeline_b: TimelineView | None = None
        self.timeline_b_box = self._with_scrollbar(None)
        self.splitter.addWidget(self.timeline_b_box)
        self.timeline_b_box.hide()
        self.tabs = tab_widget()
        self.summary = RangeSummaryPanel()
        self.details = StepDetailsPanel()
        self.bsp = BspView()
        # the BSP view follows the timeline's cycle axis pixel for pixel (_align_bsp): not a
        # pyqtgraph x-link, which lines views up by their screen geometry at the moment of a
        # change and is left a few pixels off when the tab is laid out later
        self.bsp.follow_timeline = True
        self.bsp.plotResized.connect(self._align_bsp)
        tl_vb = self.timeline.getPlotItem().getViewBox()
        tl_vb.sigResized.connect(self._align_bsp)
        tl_vb.sigXRangeChanged.connect(self._align_bsp)
        self.search = SearchPanel()
        self.tabs.addTab(self.summary, "Visible range")
        self.tabs.addTab(self.details, "Selected step")
        self.tabs.addTab(self.bsp, "BSP (tiles × time)")
        self.tabs.addTab(self.search, "Search")
        self.tabs.currentChanged.connect(lambda _i: self._schedule_details())
        self.splitter.addWidget(self.tabs)
        self.splitter.setSizes([330, 0, 300])
        lay.addWidget(self.splitter, 1)
        self.set_content(body)
        self.body = body

        self._detail_timer = QTimer(self)
        self._detail_timer.setSingleShot(True)
        self._detail_timer.setInterval(SUMMARY_DELAY_MS)
        self._detail_timer.timeout.connect(self.update_details)
        #: set by a fill until the report's first paint (see _start_details_after_fill)
        self._details_after_paint = False
        #: a range summary was dropped when the report was hidden (see hideEvent)
        self._summary_dropped = False
        #: the generation of the range summary shown (see summary_pending)
        self._summary_shown = 0
        self.timeline.windowChanged.connect(self._on_window)
        self.overview.windowRequested.connect(self._on_overview)
        self.timeline.stepSelected.connect(lambda row: self._on_selected(self.timeline, row))
        self.timeline.hostSelected.connect(lambda row: self._on_host(self.timeline, row))
        # a selected range of cycles: both timelines show the band, the summary is of it
        self.timeline.rangeSelected.connect(lambda t0, t1: self._on_range(self._timeline_b, t0, t1))
        self.timeline.rangeCleared.connect(lambda: self._on_range(self._timeline_b, None, None))
        self.summary.groupingChanged.connect(lambda _by: self._schedule_details())
        self.search.activated.connect(self._on_search_hit)
        self.search.finished.connect(
            lambda: self.timeline.setFocus(Qt.FocusReason.OtherFocusReason)
        )
        find = QShortcut(QKeySequence.StandardKey.Find, self)
        find.activated.connect(self.focus_search)
        # a control keeps the focus after a click (the View box after choosing a grouping):
        # the trace's keys pressed there drive the timeline instead of the control (Home used
        # to put the View box back to Flat, W to pick an item starting with W)
        self._key_sources = (
            self.group_combo,
            self.axis_combo,
            self.run_combo,
            self.flows_box,
            self.critical.box,
            self.zoom_in_button,
            self.zoom_out_button,
            self.reset_button,
            self.tabs.tabBar(),
        )
        for w in self._key_sources:
            w.installEventFilter(self)

    def _init_view_state(self) -> None:
        #: the explained comparison of A with B shown (the range summary quotes it)
        self._explained: object | None = None
        #: the documents shown, A or B alone when only B ran (see show_documents)
        self._shown_docs: tuple[Document | None, Document | None] = (None, None)
        #: the view range and selected step a theme switch keeps until its view-model is shown
        self._kept: tuple[tuple[float, float], int | None] | None = None

    def _make_run_combo(self) -> QComboBox:
        """The run selector (filled by :meth:`_fill_runs`)."""
        combo = QComboBox()
        combo.setToolTip("Jump to one host call (run) of the program and keep the view inside it")
        combo.currentIndexChanged.connect(self._on_run)
        # as wide as the runs of the trace shown: sized on its first show (Qt's default), it
        # kept the width of what it held then (nothing, when the report first showed "Reading"
        # while its view-model was built; another profile's runs after a switch)
        combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        return combo

    def prebuild(self, compare: bool) -> bool:
        """B's timeline, then (at the next idle tick) the differences lane's plot, laid out
        for the comparison while the report is hidden (:meth:`_lay_out_compare`)."""
        if super().prebuild(compare):
            return True
        if compare and getattr(self, "differences", None) is None:
            differences_view(self)
            if not self.isVisible():
                self._lay_out_compare()
            return True
        return False

    def _lay_out_compare(self) -> None:
        """The compare-mode layout: B's timeline and the differences lane shown under A's,
        the splitter's height shared. Set while the report is hidden (the idle build, or the
        window before it shows a report it just built), the report's first show lays the
        plots out once at their final size; set only by the fill, they were resized four
        more times there, each resize fitting the lanes and ranging the plot again."""
        self.timeline_b_box.show()
        lane = differences_view(self)
        lane.box.setMaximumHeight(LANE_HEIGHT)  # its height for the lane's IPUs: when drawn
        lane.box.show()
        # A, B, the lane (at most its fixed height) and the tabs share the height
        self.splitter.setSizes([260] * self.splitter.count())

    def report_key(self, event) -> bool:
        if (
            event.key() in TRACE_KEYS
            and not event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier
            and self.timeline.trace is not None
        ):
            self.timeline.keyPressEvent(event)
            return True
        return False

    def eventFilter(self, obj, event) -> bool:
        if (
            obj in self._key_sources
            and event.type() == QEvent.Type.KeyPress
            and self.report_key(event)
        ):
            return True
        return super().eventFilter(obj, event)

    def show_place(self, place) -> bool:
        """The BSP view ("BSP view / Program Tree"), the host lanes ("host lane", "host
        phase": on the timeline), or the steps a word names, searched ("StreamCopyMid")."""
        item = place.item
        if "BSP" in item:
            self.tabs.setCurrentWidget(self.bsp)
            return True
        if item.lower().startswith("host"):
            self.timeline.reset_zoom()
            return True
        word = item.split(" ")[0]
        self.tabs.setCurrentWidget(self.search)
        res = self.search.run(word)
        return res is not None and res.total > 0

    def focus_search(self) -> None:
        self.tabs.setCurrentWidget(self.search)
        self.search.edit.setFocus()
        self.search.edit.selectAll()

    @staticmethod
    def _with_scrollbar(timeline: TimelineView | None) -> QWidget:
        """A box with ``timeline`` and its scroll bar side by side (empty for ``None``: the
        timeline is added later with :meth:`_fill_box`)."""
        box = QWidget()
        row = QHBoxLayout(box)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(0)
        if timeline is not None:
            TraceReport._fill_box(box, timeline)
        return box

    @staticmethod
    def _fill_box(box: QWidget, timeline: TimelineView) -> None:
        box.layout().addWidget(timeline, 1)
        box.layout().addWidget(timeline.scrollbar)

    @property
    def timeline_b(self) -> TimelineView:
        """B's timeline under A's in compare mode, x-linked to it; built on first use."""
        if self._timeline_b is None:
            tl = TimelineView(title="")
            tl.setXLink(self.timeline)
            self._fill_box(self.timeline_b_box, tl)
            tl.windowChanged.connect(lambda *_: self._schedule_details())
            tl.stepSelected.connect(lambda row: self._on_selected(tl, row))
            tl.hostSelected.connect(lambda row: self._on_host(tl, row))
            tl.rangeSelected.connect(lambda t0, t1: self._on_range(self.timeline, t0, t1))
            tl.rangeCleared.connect(lambda: self._on_range(self.timeline, None, None))
            # the view's choices so far (set on A's timeline, and on B's once it exists)
            tl.set_flows_visible(self.flows_box.isChecked())
            tl.set_time_axis(self.axis_combo.currentData())
            self._timeline_b = tl
        return self._timeline_b

    def _timelines(self) -> tuple[TimelineView, ...]:
        """A's timeline, and B's once built."""
        return (self.timeline,) if self._timeline_b is None else (self.timeline, self._timeline_b)

    # -- Report interface ------------------------------------------------------------------------
    def export_parts(self) -> list[QWidget]:
        """The overview, the timelines and the differences lane, without the timelines' scroll
        bars or the tabs below them."""
        lane = getattr(self, "differences", None)
        parts = [self.overview, self.timeline]
        if self._timeline_b is not None:
            parts.append(self._timeline_b)
        if lane is not None:
            parts.append(lane)
        return parts

    def chart_widget(self) -> QWidget:
        return self.splitter

    def only_compare_has_execution(self, doc: Document, other: Document) -> None:
        self.statusMessage.emit(
            f"{doc.name} does not fit in memory, so only {other.name} has a trace."
        )

    def show_documents(self, doc: Document, other: Document | None) -> None:
        # a theme switch keeps the view range and the selected step
        self._kept = (
            (self.timeline.getPlotItem().getViewBox().viewRange()[0], self.timeline.selected_row)
            if self.keep_state and self.trace is not None
            else None
        )
        # the documents shown, for the differences lane and the critical path (computed
        # apart, in the background) and the heading
        self._shown_docs = (doc, other)
        super().show_documents(doc, other)

    def show_view(self, view: TraceView) -> None:
        kept, self._kept = self._kept, None
        doc, other = self._shown_docs
        if doc is None:  # pragma: no cover - show_documents sets them before any view comes
            return
        self._show_view(view, doc, other)
        if self.isVisible():
            # the layouts the fill changed (the legend's wrap, B's timeline and the lane in the
            # splitter, the panels' scroll bars) settle now, before the first paint, not in
            # three more layout passes that resized and repainted every plot
            QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
            settle_item_bounds(self)
        if kept is not None:
            (x0, x1), row = kept
            self.timeline.set_x_range(x0, x1)
            if row is not None:
                self.timeline.select_row(row, center=False)

    def _show_view(self, view: TraceView, doc: Document, other: Document | None) -> None:
        self._details_after_paint = True  # the redraws below do not schedule the summary
        self.summary.units = self.details.units = self.units
        self.trace = view.trace_a
        self.trace_b = view.trace_b
        self._explained = view.explained
        group = self.group_combo.currentData()
        # the report's heading names a single profile; the plot titles tell A from B
        title = f"A: {view.name_a}" if other is not None else ""
        if doc is not self.document:
            title = f"B: {view.name_a} (A: {self.document.name} does not fit, so it has no trace)"
        self.timeline.getPlotItem().setTitle(title or None, size="9pt")
        if self.trace_b is not None:
            # the compare-mode layout first (B's timeline and the differences lane shown, the
            # splitter's shares): the timelines then get their traces at about their final
            # height. Shown after them, every timeline was resized four times more, each
            # resize fitting its lanes and re-ranging its plot again
            self.timeline_b.getPlotItem().setTitle(f"B: {view.name_b}", size="9pt")
            self._lay_out_compare()  # with B's timeline in it (else shown a pass later)
        # the overview's range before A's timeline marks its window on it (the band's bounds
        # are then worked out for the range it is painted in, not again after the paint)
        self.overview.set_trace(self.trace)
        self.timeline.set_trace(self.trace, group)
        self.timeline.set_time_axis(self.axis_combo.currentData())
        self._fill_runs()
        if self.trace_b is not None:
            self.timeline_b.set_trace(self.trace_b, group)
            self.timeline_b.set_time_axis(self.axis_combo.currentData())
            show_differences(self, doc, other)  # (its box shown and the height shared above)
        else:
            if other is not None:
                self.statusMessage.emit(f"{view.name_b} has no execution trace to compare with.")
            if self._timeline_b is not None:
                self._timeline_b.set_trace(None)
            self.timeline_b_box.hide()
            hide_differences(self)
        # the union of both runs is reachable; start on the whole of A and B
        if self.trace_b is not None:
            a0, a1 = self.timeline.full_range()
            b0, b1 = self.timeline_b.full_range()
            lo, hi = min(a0, b0), max(a1, b1)
            pad = (hi - lo) * 0.05
            # the host lanes of either run may reach before cycle 0 / after the last step
            (c0, c1), (d0, d1) = self.timeline.allowed_range(), self.timeline_b.allowed_range()
            shared = (lo, hi + pad / 5, min(lo - pad, c0, d0), max(hi + pad, c1, d1))
            for tl in reversed(self._timelines()):  # A last: B is x-linked to it
                tl.shared_range = shared  # Home on either timeline shows both runs
                tl.reset_zoom()  # both get the same pan limits (a link obeys B's too)
        self.bsp_ipu.setRange(0, max(0, self.trace.n_ipus - 1))
        self.search.set_trace(self.trace)
        self.details.show_details(None)
        if self.isVisible():
            # the plots laid out now (the lane labels' axis width set with the traces): the
            # redraws read their width in pixels, and a width changed after them meant each
            # timeline drawn twice
            QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        self.timeline.redraw()
        if self.trace_b is not None:
            self.timeline_b.redraw()
        self.critical.refresh()
        # the range summary reads the visible rows: after the first paint, not before it
        self._detail_timer.stop()
        QTimer.singleShot(1000, self, self._start_details_after_fill)

    def set_document(self, doc, compare_doc=None) -> None:
        # the window may already have closed the previous profile: stop everything that could
        # still read it before the new documents are shown
        self._summary_gen += 1
        self.critical.cancel()
        self._detail_timer.stop()
        for tl in self._timelines():
            tl.stop()
        super().set_document(doc, compare_doc)

    def shutdown(self) -> None:
        self._summary_gen += 1  # running summaries stop at their next chunk
        self._pool.waitForDone(30_000)
        self.critical.shutdown()
        self.bsp.shutdown()
        self._detail_timer.stop()
        for tl in self._timelines():
            tl.stop()

    def clear(self) -> None:
        self.trace = self.trace_b = None
        self._explained = None
        self.critical.refresh()
        self.bsp.clear()
        self.overview.set_trace(None)
        for tl in self._timelines():
            tl.set_trace(None)
        self.search.set_trace(None)

    # -- events ----------------------------------------------------------------------------------
    def _on_group(self, _index: int) -> None:
        group = self.group_combo.currentData()
        try:
            for tl in self._timelines():
                if tl.trace is not None:
                    tl.set_group(group)
        except Exception as exc:  # a grouping the profile cannot give: back to the one shown
            self.group_combo.blockSignals(True)
            self.group_combo.setCurrentIndex(self.group_combo.findData(self.timeline.group))
            self.group_combo.blockSignals(False)
            for tl in self._timelines():
                if tl.trace is not None:
                    tl.set_group(self.timeline.group)
            self.say_profile_problem(exc)

    def _fill_runs(self) -> None:
        """The run selector: the whole trace, then each host call (run) with its cycles."""
        self.runs = self.trace.runs() if self.trace is not None else None
        self.run_combo.blockSignals(True)
        self.run_combo.clear()
        n = 0 if self.runs is None else len(self.runs)
        self.run_combo.addItem(f"whole trace ({n:,} run{'s' if n != 1 else ''})", None)
        for i, (a, b) in enumerate(self.runs if n > 1 else []):
            self.run_combo.addItem(
                f"run {i + 1}: {short_cycles(a)} – {short_cycles(b)} cycles", (float(a), float(b))
            )
        self.run_combo.setEnabled(n > 1)
        self.run_combo.blockSignals(False)

    def _on_run(self, _index: int) -> None:
        """Jump to the chosen run and keep the view inside it (or back to the whole trace)."""
        if self.trace is None:
            return
        self.timeline.restrict(self.run_combo.currentData())
        self.critical.refresh()  # the sentence gives the chosen run's shares

    def _on_overview(self, t0: float, t1: float) -> None:
        """The overview strip asked for a window: keep it inside the run's reachable range."""
        lo, hi = self.timeline.allowed_range()
        span = min(t1 - t0, hi - lo)
        t0 = min(max(t0, lo), hi - span)
        self.timeline.set_x_range(t0, t0 + span)

    def _on_flows(self, on: bool) -> None:
        for tl in self._timelines():
            tl.set_flows_visible(on)

    def _on_axis(self, _index: int) -> None:
        for tl in self._timelines():
            tl.set_time_axis(self.axis_combo.currentData())

    def _on_range(self, other: TimelineView | None, t0: float | None, t1: float | None) -> None:
        """A range was selected (or cleared) on one timeline: the other shows the same band,
        and the summary tab is of the range."""
        if other is not None and other.trace is not None:
            if t0 is None:
                other.clear_range(emit=False)
            else:
                other.set_range(t0, t1, emit=False)
        self.tabs.setTabText(
            self.tabs.indexOf(self.summary), "Visible range" if t0 is None else "Selected range"
        )
        if t0 is not None and self.tabs.currentWidget() is not self.search:
            self.tabs.setCurrentWidget(self.summary)
        self._schedule_details()

    def summary_range(self) -> tuple[float, float, str]:
        """The range the summary is of: the selected range, else the visible window."""
        if self.timeline.range_sel is not None:
            return (*self.timeline.range_sel, "Selected range")
        return (*self.timeline.x_range(), "Visible range")

    def _on_window(self, t0: float, t1: float) -> None:
        self.overview.show_window(t0, t1)
        self.overview.align_left(int(self.timeline.lane_axis.width()))
        n = self.timeline.n_steps_visible
        src = {r.source.split(" (")[0] for r in self.timeline.results.values()}
        lo, hi = self.timeline.full_range()
        a, b = max(t0, lo), min(t1, hi)  # the part of the view the run covers
        # compare mode: the figures are A's (its run, its steps), and say so
        who = "A: " if self.trace_b is not None else ""
        if a < b:
            text = who + f"{a:,.0f} – {b:,.0f} cycles ({short_cycles(b - a)}) · {n:,} steps"
        else:
            # the view lies wholly past one end of the run (B's longer run panned to its end):
            # a range whose start is after its end would be a figure that lies
            where = f"after its end at {hi:,.0f}" if t0 >= hi else f"before its start at {lo:,.0f}"
            text = who + f"no cycles of the run in view ({where} cycles) · {n:,} steps"
        self.status.setText(text)
        # how the view is drawn is for whoever asks (the header is for what it shows)
        self.status.setToolTip(
            f"{text}\n{self.timeline.n_rects:,} rectangles drawn ({', '.join(sorted(src))})"
        )
        # every step type the run executed, whatever is in view: a zoomed-out view paints a
        # pixel with the type that dominates it, and a legend of the painted types only would
        # say the others are absent
        present = set()
        for tl in self._timelines():
            if tl.trace is not None:
                present.update(tl.trace.step_types())
        kinds = set()
        for tl in self._timelines():
            if tl.trace is not None and tl.host_lanes:
                kinds.update(tl.host["kind"])
        self.legend.setText(legend_html(present, kinds))
        self._schedule_details()

    def _schedule_details(self) -> None:
        if self._details_after_paint:
            return  # a fill: the report's first paint starts the timer (see paintEvent)
        self._detail_timer.start()

    def paintEvent(self, event) -> None:
        super().paintEvent(event)
        self._start_details_after_fill()

    def hideEvent(self, event) -> None:
        """Another report was shown: a range summary still to come or under way stops (at its
        next chunk) and is computed again when this report is next shown. It reads every
        visible row in the report's pool thread, which shares the interpreter lock with the GUI
        thread: left running, it slowed the next report's first visit (a compare-mode Pipeline
        clicked 0.3 s after the Trace's first paint: 106-165 ms against 46-73
        item 11)."""
        super().hideEvent(event)
        if self._detail_timer.isActive() or self._pool.activeThreadCount():
            self._summary_gen += 1
            self._detail_timer.stop()
            self._summary_dropped = True

    def showEvent(self, event) -> None:
        super().showEvent(event)  # fills the report if it is not (its fill schedules the summary)
        if self._summary_dropped:
            self._summary_dropped = False
            self._schedule_details()

    def _start_details_after_fill(self) -> None:
        """The range summary of a fill is computed :data:`SUMMARY_DELAY_MS` after the report's
        first paint (or a second after the fill, should no paint come), not after the fill
        itself: on a busy machine the first paint took longer than the delay, and the
        summary's thread (it reads every visible row) then ran beside it."""
        if self._details_after_paint:
            self._details_after_paint = False
            self._detail_timer.start()

    def update_details(self) -> None:
        """Recompute the visible-range summary (in the background: it reads every visible row)
        and, when shown, the BSP view."""
        self._detail_timer.stop()
        if self.trace is None or self.document is None:
            return  # the document was closed while an update was pending
        t0, t1, what = self.summary_range()
        by = self.summary.grouping
        self._summary_gen += 1
        gen = self._summary_gen
        trace_a, trace_b = self.trace, self.trace_b
        names = (self.document.name, self.compare_doc.name if self.compare_doc else "")

        def stale() -> bool:
            return gen != self._summary_gen

        explained_ab = self._explained

        def compute():
            a = [trace_a.range_summary(i, t0, t1, stale) for i in range(trace_a.n_ipus)]
            b = None
            explained = None
            if trace_b is not None:
                b = [trace_b.range_summary(i, t0, t1, stale) for i in range(trace_b.n_ipus)]
                explained = explained_ab
            stats = trace_a.range_statistics(t0, t1, by=by, cancelled=stale)
            stats_b = (
                trace_b.range_statistics(t0, t1, by=by, cancelled=stale)
                if trace_b is not None
                else None
            )
            if stats is None or (trace_b is not None and stats_b is None):
                return None  # cancelled: a newer window superseded it
            if any(x is None for x in a + (b or [])):
                return None
            return a, b, names, explained, (stats, stats_b)

        self.summary.set_pending(t0, t1, what)
        self._pool.start(PoolTask(compute, gen, self._relay))
        if self.tabs.currentWidget() is self.bsp:
            self.update_bsp()

    @property
    def summary_pending(self) -> bool:
        """True while the range summary shown is not the one of the window shown: its fill's
        summary is still to be scheduled (after the first paint), scheduled, or being
        computed; :attr:`summaryReady` is emitted when it is shown."""
        if self.trace is None or self.document is None:
            return False
        return (
            self._details_after_paint
            or self._detail_timer.isActive()
            or self._summary_shown != self._summary_gen
        )

    def _on_summary(self, gen: int, result: object) -> None:
        if gen != self._summary_gen or result is None or self.trace is None:
            return
        self._summary_shown = gen
        if isinstance(result, Exception):
            self.summary.header.setText(f"The range summary failed: {result}")
            self.summaryReady.emit()
            return
        a, b, names, explained, (stats, stats_b) = result
        if b is not None:
            self.summary.set_summaries(a, b, names)
        else:
            self.summary.set_summaries(a)
        if b is not None:
            self.summary.set_compared_statistics(stats, stats_b, names)
        else:
            self.summary.set_statistics(stats)
        self.summary.set_explanations(explained)
        self.summaryReady.emit()

    def wait_for_summary(self, msecs: int = 30_000) -> bool:
        """Block until background summaries finish (tests, shutdown)."""
        return self._pool.waitForDone(msecs)

    def update_bsp(self) -> None:
        if self.trace is None:
            return
        t0, t1 = self.timeline.x_range()
        ipu = min(self.bsp_ipu.value(), self.trace.n_ipus - 1)
        self._align_bsp()
        self.bsp.show_range(
            self.trace, ipu, t0, t1, self.timeline.pixel_width(), trace_b=self.trace_b
        )

    def _data_left(self, plot) -> int:
        """x (in this report's pixels) where the data area of ``plot`` begins."""
        vb = plot.getPlotItem().getViewBox()
        left = plot.mapFromScene(vb.sceneBoundingRect().topLeft())
        return plot.mapTo(self, left).x()

    def _align_bsp(self, *args) -> None:
        """Give the BSP plot's tile axis the width that puts its data's left edge under the
        timeline's (the tab frame and margins, and the lane labels' width, differ), so a cycle
        sits at the same x in both. Re-run when either plot is resized."""
        if not (self.bsp.isVisible() and self.timeline.isVisible()):
            return
        axis = self.bsp.plot.getPlotItem().getAxis("left")
        delta = self._data_left(self.timeline) - self._data_left(self.bsp.plot)
        if delta:
            axis.setWidth(max(20, int(axis.width()) + delta))
            return  # the resize this causes calls back here
        # same left edge: the same cycles per pixel from there on
        tl_vb = self.timeline.getPlotItem().getViewBox()
        vb = self.bsp.plot.getPlotItem().getViewBox()
        t0, t1 = self.timeline.x_range()
        if tl_vb.width() > 0 and vb.width() > 0:
            t1 = t0 + (t1 - t0) * vb.width() / tl_vb.width()
        vb.setXRange(t0, t1, padding=0)

    def _on_selected(self, timeline: TimelineView, row: int) -> None:
        trace = timeline.trace
        if trace is None:
            return
        details = trace.step_details(row)
        note = timeline.critical.note(row)
        if note:
            details["critical path"] = note.removeprefix("On the critical path: ")
        if timeline is self._timeline_b:
            details = {"profile": f"B: {self.compare_doc.name}", **details}
        tiles = trace.tile_cycles_of_step(row)
        self.details.show_details(details, tiles)
        self.bsp_ipu.setValue(details["ipu"])
        if self.tabs.currentWidget() is not self.search:
            self.tabs.setCurrentWidget(self.details)
        self.statusMessage.emit(
            f"{details['type']} {details['name']}: {details['cycles']:,} cycles on IPU "
            f"{details['ipu']} at cycle {details['start']:,}"
        )

    def _on_host(self, timeline: TimelineView, row: int) -> None:
        """A host event was clicked: its kind, lane, start, cycles and samples."""
        details = timeline.host_details(row)
        if timeline is self._timeline_b:
            details = {"profile": f"B: {self.compare_doc.name}", **details}
        self.details.show_details(details)
        if self.tabs.currentWidget() is not self.search:
            self.tabs.setCurrentWidget(self.details)
        self.statusMessage.emit(
            f"host {details['kind']} on the {details['lane']} lane: {details['cycles']:,} cycles "
            f"at cycle {details['start']:,}"
        )

    def _on_search_hit(self, row: int) -> None:
        self.timeline.select_row(row, center=True)
