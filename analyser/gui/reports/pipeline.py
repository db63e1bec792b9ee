"""The Pipeline view: stages x time of micro-batches, phases, per-stage load and stash memory.

The chart shows the first device iteration of the run: one row per pipeline stage, one box per
micro-batch and pass (forward, backward, weight update) spanning its executed steps, with the
ramp-up / main / ramp-down / weight-update phases shaded and labelled with their share of the
whole run (analysis core). Below: busy cycles per stage with the bottleneck stage marked (pipeline
throughput is bound by the longest stage), and stash memory per stage
(:class:`analyser.gui.reports.pipeline_bars.StageBarsView`). In compare mode B's chart is drawn
under A's on the same cycle axis, the per-stage bars of both share one plot each (A left, B
right and hatched, one y axis), and a table gives A, B and B − A.
"""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QCoreApplication, QEvent, Qt, QThreadPool, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetrics
from PySide6.QtWidgets import (
    QHeaderView,
    QScrollArea,
    QSizePolicy,
    QTableWidget,
    QVBoxLayout,
    QWidget,
)

from analyser.core.quantities import QUANTITIES
from analyser.core.units import (
    fmt_bytes,
    fmt_change,
    fmt_int,
    fmt_pct,
    fmt_pts_delta,
)
from analyser.gui.axes import CycleAxis, fixed_prefix_axes
from analyser.gui.items import BatchedRectsItem, PointLabelsItem
from analyser.gui.model.document import Document
from analyser.gui.model.pipeline import BAND_PHASES, PHASE_LABELS, PipelineChart
from analyser.gui.model.pipeline_view import PipelineView, build_pipeline_view
from analyser.gui.model.trace import HOST_EVENTS, HOST_LANES
from analyser.gui.palette import hex_color, qcolor
from analyser.gui.plots import LightPlotWidget
from analyser.gui.reports.base import Report
from analyser.gui.reports.pipeline_bars import StageBarsView
from analyser.gui.reports.trace.panels import _item
from analyser.gui.theme import chart_colors, style_plot
from analyser.gui.widgets import PoolTask, Relay, compact_rows, wrapped_label
from analyser.literal import html as lit
from analyser.viewmodels.critical_path import CriticalPathView, cached_view, of_document

#: Box colours per pass (shared palette "passes").
PASS_ORDER = ("forward", "backward", "loss", "update", "io")
#: Most micro-batch labels written inside boxes.
MAX_BOX_LABELS = 400
#: Where the phase labels sit above the stages (y grows downwards): the lowest row's bottom,
#: and the top of the y range (the room the labels have).
LABEL_BASE = -0.05
LABEL_TOP = -0.9


def _bounds_text(view: CriticalPathView, prefix: str = "") -> str:
    """The critical path's line: what bounds the step, or why there is no path."""
    if not view.available:
        return f"{prefix}What bounds the step: {view.reason}"
    marked = " (stages on the path marked on the busy-cycles bars)" if view.stage_shares() else ""
    return f"{prefix}{view.headline()}{marked}"


def theoretical_ramp_share(stages: int, ga: int) -> float | None:
    """2(S - 1) / (G + S - 1) (Graphcore pipelining documentation), for G >= S; None otherwise."""
    if stages < 2 or ga < stages:
        return None
    return 2 * (stages - 1) / (ga + stages - 1)


class PipelineChartView(QWidget):
    """The header and the timeline chart of one profile (the per-stage bars of one or two
    profiles are :class:`StageBarsView`'s)."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.header = wrapped_label(rich=True)
        lay.addWidget(self.header)
        #: "What bounds the step: ..." from the critical path (filled when it is computed)
        self.bounds = wrapped_label()
        lay.addWidget(self.bounds)
        # the cycle axis given at construction (replacing pyqtgraph's built one cost another
        # AxisItem and a relayout)
        self.chart = LightPlotWidget(enableMenu=False, axisItems={"bottom": CycleAxis("bottom")})
        style_plot(self.chart)
        self.chart.setMenuEnabled(False)
        self.chart.hideButtons()
        self.chart.getViewBox().invertY(True)
        self.chart.getViewBox().setMouseEnabled(x=True, y=False)
        self.chart.setLabel("bottom", "cycles (first device iteration)")
        self.chart.getPlotItem().getAxis("left").setWidth(130)
        # the phase bands: one rectangle per band over the whole y range, one item kept across
        # refreshes (a LinearRegionItem per band and refresh cost ~0.7 ms each to build)
        self.band_rects = BatchedRectsItem()
        self.band_rects.setZValue(-10)
        self.chart.addItem(self.band_rects)
        self.boxes = BatchedRectsItem()
        self.chart.addItem(self.boxes)
        # the host's timeline (/execution/host) in lanes under the stages
        self.host_boxes = BatchedRectsItem()
        self.chart.addItem(self.host_boxes)
        self.host_lanes: tuple[str, ...] = ()
        # the micro-batch numbers inside the boxes, one item for all (drawn where they fit)
        self.box_labels = PointLabelsItem()
        self.chart.addItem(self.box_labels)
        lay.addWidget(self.chart, 1)
        fixed_prefix_axes(self.chart)  # labels without units: nothing to prefix
        # sized by the space available, not by pyqtgraph's size hints: the word-wrapped header
        # makes the scroll area size the body by height-for-width, which sums the hints and
        # would push the per-stage charts below the fold
        self.chart.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Ignored)
        self.chart.setMinimumHeight(260)
        # height-for-width layouts may hand the view less than its parts' minimums (they then
        # overlap): an explicit minimum for the whole view (header and chart)
        self.setMinimumHeight(260 + 110)
        # the application's font, bold: QFont("") fell back to a serif face in a real X server
        self._band_font = QFont(self.font())
        self._band_font.setPointSize(9)
        self._band_font.setBold(True)
        self._band_metrics = QFontMetrics(self._band_font)
        #: (label, band start, band end, text) of the phase bands, laid out by _fit_labels
        self.band_items: list[tuple[pg.TextItem, float, float, str]] = []
        #: the phase labels' items, kept across refreshes (the extra ones hidden)
        self._band_pool: list[pg.TextItem] = []
        for i in range(len(BAND_PHASES) + 1):  # the bands of a run and the host's: built now
            self._band_label(i)
        # laid out once per paint, at the view's final range and size: the range changes and
        # resizes of a fill and its layout passes (13 in a compare-mode first visit) only mark
        # them stale (the explicit set_x_range lays them out at once)
        self._labels_stale = False
        self.chart.getViewBox().sigXRangeChanged.connect(self._mark_labels_stale)
        self.chart.getViewBox().sigResized.connect(self._mark_labels_stale)
        self.chart.scene().sigPrepareForPaint.connect(self._fit_stale_labels)
        self.data: PipelineChart | None = None
        self.band_labels: dict[str, str] = {}
        #: the axis break at the left edge: how much of the host's time before the device the
        #: view hides, and its length
        self.break_label = pg.TextItem("", anchor=(0, 0.5))
        self.break_label.setZValue(20)

    def _mark_labels_stale(self, *args) -> None:
        self._labels_stale = True

    def _fit_stale_labels(self) -> None:
        if self._labels_stale:
            self._fit_labels()

    def _fit_labels(self, *args) -> None:
        """Lay out the phase labels for the current zoom (the micro-batch numbers pick the
        boxes they fit in when painted: :class:`PointLabelsItem`)."""
        self._labels_stale = False
        vb = self.chart.getViewBox()
        (x0, x1), _ = vb.viewRange()
        px_per_cycle = vb.width() / (x1 - x0) if x1 > x0 else 0.0
        self._lay_out_band_labels(x0, x1, px_per_cycle)
        self._place_break(x0)

    def _place_break(self, x0: float) -> None:
        c = self.data
        text = c.hidden_host_text(x0) if c is not None else ""
        self.break_label.setVisible(bool(text))
        if text and c is not None:
            if self.break_label.scene() is None:
                self.chart.addItem(self.break_label)
            self.break_label.setColor(chart_colors().foreground)
            self.break_label.fill = pg.mkBrush(chart_colors().background)
            self.break_label.setText(text)
            self.break_label.setPos(x0, c.n_stages + 0.5)

    #: Rows of phase labels above the stages at most (as many as fit in the space the y range
    #: leaves there).
    LABEL_ROWS = 4

    def _lay_out_band_labels(self, x0: float, x1: float, px_per_cycle: float) -> None:
        """Each phase label starts at its band (or at the view's left edge when the band began
        before it), on the first row where it does not run into the label before it: short
        bands side by side ("ramp-down" beside "weight update") no longer print on each other."""
        row_end: list[float] = []  # right edge (pixels) of the last label of each row
        step, rows = self._label_row_step()
        for item, a, z, text in sorted(self.band_items, key=lambda t: t[1]):
            if z <= x0 or a >= x1 or px_per_cycle <= 0:
                item.setVisible(False)
                continue
            width = self._band_metrics.horizontalAdvance(text) + 8
            # from its band's start, or the view's left edge; kept inside the right edge
            x = max(x0, min(max(a, x0), x1 - width / px_per_cycle))
            left = (x - x0) * px_per_cycle
            right = left + width
            row = next((r for r, end in enumerate(row_end) if end <= left), len(row_end))
            if row >= rows:
                item.setVisible(False)
                continue
            if row == len(row_end):
                row_end.append(right)
            else:
                row_end[row] = right
            item.setPos(x, LABEL_BASE - step * row)
            item.setVisible(True)

    def _label_row_step(self) -> tuple[float, int]:
        """(rows apart in data units, rows that fit above the stages): a label's height in
        pixels, at least 0.2 of a lane (with the loader's lane the chart has a row more and 0.2
        of a lane was less than a line: labels printed on each other in a real X server)."""
        vb = self.chart.getViewBox()
        (_y0, _y1) = vb.viewRange()[1]
        px_per_unit = vb.height() / (_y1 - _y0) if _y1 > _y0 else 0.0
        line = self._band_metrics.height() + 2  # a line of text (the item's box has padding)
        step = max(0.2, line / px_per_unit) if px_per_unit > 0 else 0.2
        room = LABEL_BASE - LABEL_TOP  # above the stages, inside the y range
        return step, max(1, min(self.LABEL_ROWS, int(room / step + 1e-9)))

    def set_x_range(self, x0: float, x1: float) -> None:
        """Show cycles ``x0`` .. ``x1`` (compare mode gives A and B one range), widening the
        pan limits when the range goes past them."""
        vb = self.chart.getViewBox()
        lim = vb.state["limits"]["xLimits"]
        lo = x0 if lim[0] is None else min(lim[0], x0)
        hi = x1 if lim[1] is None else max(lim[1], x1)
        vb.setLimits(xMin=lo, xMax=hi)
        self.chart.setXRange(x0, x1, padding=0.01)
        self._fit_labels()

    def _band_label(self, i: int) -> pg.TextItem:
        """The ``i``-th phase label's item (built and added to the chart the first time)."""
        while len(self._band_pool) <= i:
            label = pg.TextItem("", anchor=(0, 1))
            label.setFont(self._band_font)
            label.setVisible(False)
            self.chart.addItem(label)
            self._band_pool.append(label)
        return self._band_pool[i]

    def show_chart(
        self, c: PipelineChart, name: str, x_range: tuple[float, float] | None = None
    ) -> None:
        """Draw profile ``c`` (``name`` heads it) over cycles ``x_range`` (default: its own
        first view; compare mode gives A and B one range)."""
        self.data = c
        rc = c.run_config
        ga = int(rc.get("gradient_accumulation", 0) or 0)
        theo = theoretical_ramp_share(c.n_stages, ga)
        ramp = c.phase_share.get("rampUp", 0.0) + c.phase_share.get("rampDown", 0.0)
        parts = [
            f"<b>{lit(name)}</b>: {c.n_stages} stage(s)"
            + (f", schedule {rc.get('schedule')}" if c.pipelined and rc.get("schedule") else "")
            + (f", gradient accumulation {ga}" if ga else "")
            + f"; ramp-up + ramp-down {100 * ramp:.1f}% of the run"
            + (f" (2(S−1)/(G+S−1) = {100 * theo:.1f}%)" if theo is not None else "")
            + f", weight update {100 * c.phase_share.get('weightUpdate', 0.0):.1f}%."
        ]
        if c.pipelined:
            parts.append(
                f"Bottleneck: stage {c.bottleneck} (IPU {c.stage_ipu[c.bottleneck]}), "
                f"longest / mean stage = {c.imbalance:.2f}."
            )
        else:
            parts.append("Not pipelined: one stage; phases are shown for the run.")
        self.header.setText(" ".join(parts))

        passes = self._draw_boxes(c)
        host_kinds = self._draw_host(c)
        self._draw_bands(c)
        n_rows = c.n_stages + len(self.host_lanes)
        self.chart.getPlotItem().getAxis("left").setTicks(
            [
                [(s + 0.5, f"stage {s} · IPU {c.stage_ipu[s]}") for s in range(c.n_stages)]
                + [
                    (c.n_stages + i + 0.5, f"host · {lane}")
                    for i, lane in enumerate(self.host_lanes)
                ],
                [],
            ]
        )
        lo, hi = c.x_limits
        pad = 0.02 * max(hi - lo, 1.0)
        self.chart.getViewBox().setLimits(
            yMin=-1.0, yMax=n_rows + 0.2, xMin=lo - pad, xMax=hi + pad
        )
        self.chart.setYRange(LABEL_TOP, n_rows + 0.1, padding=0)
        self.set_x_range(*(x_range if x_range is not None else c.x_range))
        legend_items = [
            f"<span style='color:{hex_color('passes', p)}'>■</span> {p}" for p in passes
        ] + [
            f"<span style='color:{hex_color('host_events', k)}'>■</span> host {k}"
            for k in host_kinds
        ]
        self.chart.setTitle(" &nbsp; ".join(legend_items), size="9pt")

    def _draw_boxes(self, c: PipelineChart) -> list[str]:
        """A box per stage, micro-batch and pass, one group per pass (numpy columns: a
        DataFrame filter per pass cost ~1.5 ms each), with the micro-batch numbers inside
        (drawn where they fit: :class:`PointLabelsItem`); returns the passes drawn."""
        b = c.boxes
        pass_name = b["pass_name"].to_numpy()
        start = b["start"].to_numpy(dtype=float)
        end = b["end"].to_numpy(dtype=float)
        stage = b["stage"].to_numpy(dtype=float)
        rects = np.empty((len(b), 4))
        rects[:, 0] = start
        rects[:, 1] = stage + 0.15
        rects[:, 2] = np.maximum(1.0, end - start)
        rects[:, 3] = 0.7
        groups, passes = [], []
        for p in PASS_ORDER:
            sel = pass_name == p
            if sel.any():
                groups.append((QBrush(qcolor("passes", p, 220)), rects[sel]))
                passes.append(p)
        self.boxes.set_groups(groups)
        if len(b) <= MAX_BOX_LABELS:
            mb = b["micro_batch"].to_numpy()
            self.box_labels.set_labels(
                (start + end) / 2,
                stage + 0.5,
                end - start,
                [str(m) if m >= 0 else "weight update" for m in mb.tolist()],
            )
        else:
            self.box_labels.set_labels(np.zeros(0), np.zeros(0), np.zeros(0), [])
        return passes

    def _draw_host(self, c: PipelineChart) -> list[str]:
        """The host's lanes under the stages (preparation, the call, the waits), a group per
        kind of event; returns the kinds drawn."""
        h = c.host_events
        lanes = h["lane"] if h is not None else np.zeros(0, dtype=object)
        self.host_lanes = tuple(lane for lane in HOST_LANES if (lanes == lane).any())
        host_groups = []
        host_kinds: list[str] = []
        if self.host_lanes:
            lane_y = np.zeros(len(lanes))
            for i, lane in enumerate(self.host_lanes):
                lane_y[lanes == lane] = i
            rects = np.empty((len(h), 4))
            rects[:, 0] = h["start"].astype(float)
            rects[:, 1] = c.n_stages + lane_y + 0.15
            rects[:, 2] = np.maximum(1.0, (h["end"] - h["start"]).astype(float))
            rects[:, 3] = 0.7
            kind = h["kind"]
            host_kinds = [k for k in HOST_EVENTS if (kind == k).any()]
            host_groups = [
                (QBrush(qcolor("host_events", k, 220)), rects[kind == k]) for k in host_kinds
            ]
        self.host_boxes.set_groups(host_groups)
        return host_kinds

    def _draw_bands(self, c: PipelineChart) -> None:
        """The phase bands, shaded over the whole y range (the view's y limits), each labelled
        with its share of the run; the host's time before the device with the host-inclusive
        host wait share (the analysis core's metric, as the Summary shows it)."""
        self.band_labels = {}
        self.band_items = []
        host_q = QUANTITIES["host_wait_share"]
        n_rows = c.n_stages + len(self.host_lanes)
        groups = []
        for i, (phase, a, z) in enumerate(c.bands):
            rect = np.array([[a, -1.0, max(z - a, 0.0), n_rows + 1.2]])
            groups.append((QBrush(qcolor("phases", phase, 45)), rect))
            if phase == "host" and c.host_wait_share is not None:
                text = f"{host_q.label} {host_q.format(c.host_wait_share)}"
            else:
                text = f"{PHASE_LABELS[phase]} {100 * c.phase_share.get(phase, 0.0):.1f}%"
            self.band_labels[phase] = text
            label = self._band_label(i)
            label.setText(text, color=hex_color("phases", phase))
            label.setPos(a, LABEL_BASE)
            self.band_items.append((label, a, z, text))
        for label in self._band_pool[len(c.bands) :]:
            label.setVisible(False)
        self.band_rects.set_groups(groups)


class PipelineReport(Report):
    title = "Pipeline"
    key = "pipeline"
    data_needs = ("target", "execution", "trace_window", "pipeline_chart")
    view_builder = staticmethod(build_pipeline_view)
    compare_cost = 4
    compare_part = ("_view_b", "view_b")
    needs_execution = True
    no_execution_text = (
        "{name} has no execution (it does not fit in memory), so there is no pipeline to show."
    )

    #: The critical path's line and its marks on the stage bars are shown.
    pathShown = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        #: the documents shown (see show_documents)
        self._shown_docs: tuple[Document | None, Document | None] = (None, None)
        self.lay_out_with_empty_states()
        # the critical path is computed once per profile in this pool (seconds for millions of
        # steps), and drawn when it arrives
        self._path_pool = QThreadPool(self)
        self._path_pool.setMaxThreadCount(1)
        self._path_relay = Relay(self)
        self._path_relay.done.connect(self._on_paths)
        self._path_gen = 0
        self.body = QWidget()
        lay = QVBoxLayout(self.body)
        lay.setEnabled(False)  # until the first fill (show_documents) lays the body out
        self.view_a = PipelineChartView()
        self._view_b: PipelineChartView | None = None  # built on the first comparison
        self._body_layout = lay
        self.table = QTableWidget(0, 4)
        self.table.setHorizontalHeaderLabels(["", "A", "B", "B − A"])
        self.table.verticalHeader().setVisible(False)
        compact_rows(self.table)
        # every column as wide as its header and values (B − A used to take the width while
        # the A / B headers and the row labels were cut)
        header = self.table.horizontalHeader()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.setMaximumHeight(220)
        self.explain = wrapped_label(rich=True)
        #: busy cycles and stash memory per stage, of A alone or of A and B side by side
        self.bars = StageBarsView()
        lay.addWidget(self.view_a, 3)
        lay.addWidget(self.bars, 2)
        lay.addWidget(self.explain)
        lay.addWidget(self.table, 1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.body)
        self.set_content(scroll)
        self.scroll = scroll

    @property
    def view_b(self) -> PipelineChartView:
        """Profile B's header and chart, created when first needed (a plot single mode does not
        pay for), under A's: the two timelines on one cycle axis read together."""
        if self._view_b is None:
            self._view_b = PipelineChartView()
            self._view_b.hide()
            self._body_layout.insertWidget(1, self._view_b, 3)
        return self._view_b

    def chart_widget(self) -> QWidget:
        return self.body

    def set_document(self, doc, compare_doc=None) -> None:
        self._path_gen += 1  # a path still being computed is of the previous documents
        super().set_document(doc, compare_doc)

    def show_documents(self, doc: Document, other: Document | None) -> None:
        # the documents shown, for their critical paths (computed apart, in the background)
        self._shown_docs = (doc, other)
        super().show_documents(doc, other)

    def show_view(self, view: PipelineView) -> None:
        # the body is laid out once, at its final contents, by _settle_layout: with its layout
        # on, showing view_b (a child of a shown widget activates its parent's layout at once)
        # and the content's first show laid it out twice more, each time resizing and
        # re-ranging the four plots
        self._body_layout.setEnabled(False)
        compared = False
        try:
            compared = self._fill(view)
        finally:
            self._settle_layout(compared)

    def _fill(self, view: PipelineView) -> bool:
        """Draw A (and B compared with it); True when both are shown."""
        a, b = view.a, view.b
        compare = view.name_b is not None
        # one cycle axis in compare mode: both charts show the same range, set once
        x_range = a.x_range
        if b is not None:
            x_range = (min(a.x_range[0], b.x_range[0]), max(a.x_range[1], b.x_range[1]))
        self.view_a.show_chart(a, f"A: {view.name_a}" if compare else view.name_a, x_range)
        if b is not None or self._view_b is not None:
            self.view_b.setVisible(b is not None)
        self.table.setVisible(b is not None)
        self.explain.setVisible(b is not None)
        self.bars.show_profiles(a, b, self.units)
        if b is not None:
            self.view_b.chart.setXLink(None)  # B's range set as its own, then linked
            self.view_b.show_chart(b, f"B: {view.name_b}", x_range)
            # pan / zoom together
            self.view_b.chart.setXLink(self.view_a.chart)
            self._fill_table(a, b, view.name_a, str(view.name_b))
            self._explain(view.explanations, view.option_changes)
        elif self._view_b is not None:
            self._view_b.chart.setXLink(None)
        doc, other = self._shown_docs
        self._show_paths(doc, other if b is not None else None)
        return b is not None

    def _show_paths(self, doc: Document, other: Document | None) -> None:
        """The critical paths of ``doc`` (and ``other``): drawn now when computed already
        (the Execution Trace may have), else computed in the background and drawn then."""
        self._path_gen += 1
        a, b = cached_view(doc), cached_view(other) if other is not None else None
        if a is not None and (other is None or b is not None):
            self._draw_paths((a, b))
            return
        for view in (self.view_a, self._view_b if other is not None else None):
            if view is not None:
                view.bounds.setText("What bounds the step: finding the critical path…")
        self.bars.show_path({})
        self._path_pool.start(
            PoolTask(
                lambda: (of_document(doc), of_document(other) if other is not None else None),
                self._path_gen,
                self._path_relay,
            )
        )

    def _on_paths(self, gen: int, result: object) -> None:
        if gen != self._path_gen or self.document is None:
            return
        if isinstance(result, Exception):  # the view-model gives reasons, not exceptions
            self.view_a.bounds.setText(f"The critical path could not be computed ({result}).")
            self.pathShown.emit()
            return
        self._draw_paths(result)

    def _draw_paths(self, paths: tuple[CriticalPathView, CriticalPathView | None]) -> None:
        a, b = paths
        self.view_a.bounds.setText(_bounds_text(a, "A: " if b is not None else ""))
        shares = {"A": a.stage_shares()}
        if b is not None and self._view_b is not None:
            self._view_b.bounds.setText(_bounds_text(b, "B: "))
            shares["B"] = b.stage_shares()
        self.bars.show_path(shares)
        self.pathShown.emit()

    def shutdown(self) -> None:
        self._path_gen += 1
        self._path_pool.waitForDone(30_000)

    def _settle_layout(self, compared: bool) -> None:
        """Lay the body out at its final size now, before the first paint: otherwise the scroll
        area grows the body to its height-for-width (the word-wrapped headers, two views)
        and then shows its scroll bar, narrowing every plot, in two more layout passes, each
        resizing and repainting the four plots. Compared, the body is always
        taller than the view: its scroll bar is kept on (as it would show anyway)."""
        self._body_layout.setEnabled(True)
        self.scroll.setVerticalScrollBarPolicy(
            Qt.ScrollBarPolicy.ScrollBarAlwaysOn
            if compared
            else Qt.ScrollBarPolicy.ScrollBarAsNeeded
        )
        if self.isVisible():
            # the scroll area sizes its widget on a LayoutRequest: handled here, not queued
            # (the body's layout then lays it out once, at that size; activated after, for
            # a refill that left the body's size as it was)
            QCoreApplication.sendEvent(self.scroll, QEvent(QEvent.Type.LayoutRequest))
            self._body_layout.activate()

    def _explain(self, explanations: tuple, options: str) -> None:
        """The analysis core's explanations of the differences between the whole runs."""
        self.explanations = list(explanations)
        items = "".join(f"<li>{html.escape(e.text)}</li>" for e in self.explanations[:8])
        self.explain.setText(
            f"<b>Why they differ (analysis core):</b> run options: {html.escape(options)}."
            + (f"<ul style='margin:2px'>{items}</ul>" if items else "")
        )

    def _fill_table(self, a: PipelineChart, b: PipelineChart, name_a: str, name_b: str) -> None:
        self.table.setHorizontalHeaderLabels(["", f"A: {name_a}", f"B: {name_b}", "B − A"])
        rows: list[tuple[str, str, str, str, QColor | None]] = []
        for phase in ("rampUp", "main", "rampDown", "weightUpdate"):
            va, vb = a.phase_share.get(phase, 0.0), b.phase_share.get(phase, 0.0)
            rows.append(
                (
                    f"{PHASE_LABELS[phase]} share of the run",
                    fmt_pct(va),
                    fmt_pct(vb),
                    fmt_pts_delta(va, vb),
                    qcolor("phases", phase),
                )
            )
        # the host wait: the analysis core's host-inclusive metric and the catalogue's format,
        # as in the Summary and the explanations above (the device trace's own host phase is
        # a few cycles since the host's time left it, format 1.2)
        q = QUANTITIES["host_wait_share"]
        ha, hb = a.host_wait_share, b.host_wait_share
        rows.append(
            (
                q.title,
                q.format(ha),
                q.format(hb),
                fmt_pts_delta(ha, hb),
                qcolor("phases", "host"),
            )
        )
        for s in range(max(a.n_stages, b.n_stages)):
            ca = float(a.stage_cycles[s]) if s < a.n_stages else None
            cb = float(b.stage_cycles[s]) if s < b.n_stages else None
            rows.append(
                (f"stage {s} busy cycles", fmt_int(ca), fmt_int(cb), fmt_change(ca, cb), None)
            )
            sa = int(a.stash_bytes[s]) if s < len(a.stash_bytes) else None
            sb = int(b.stash_bytes[s]) if s < len(b.stash_bytes) else None
            delta = fmt_change(sa, sb, self.units.value)
            rows.append(
                (
                    f"stage {s} stash memory",
                    fmt_bytes(sa, self.units),
                    fmt_bytes(sb, self.units),
                    delta,
                    None,
                )
            )
        rows.append(("bottleneck stage", str(a.bottleneck), str(b.bottleneck), "", None))
        self.table.setRowCount(len(rows))
        for r, (label, va, vb, d, color) in enumerate(rows):
            self.table.setItem(r, 0, _item(label, color=color))
            self.table.setItem(r, 1, _item(va, True))
            self.table.setItem(r, 2, _item(vb, True))
            self.table.setItem(r, 3, _item(d, True))
