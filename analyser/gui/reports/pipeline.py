"""The Pipeline view: stages x time of micro-batches, phases, per-stage load and stash memory.

The chart shows the first device iteration of the run: one row per pipeline stage, one box per
micro-batch and pass (forward, backward, weight update) spanning its executed steps, with the
ramp-up / main / ramp-down / weight-update phases shaded and labelled with their share of the
whole run (analysis core). Below: busy cycles per stage with the bottleneck stage marked (pipeline
throughput is bound by the longest stage), and stash memory per stage. In compare mode profile B
is drawn under A and a table gives A, B and B − A.
"""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetrics
from PySide6.QtWidgets import (
    QGridLayout,
    QLabel,
    QScrollArea,
    QSizePolicy,
    QTableWidget,
    QVBoxLayout,
    QWidget,
)

from analyser.core.units import fmt_bytes, fmt_change, fmt_int, fmt_pct, fmt_pts_delta
from analyser.gui.axes import use_cycle_axis
from analyser.gui.items import BatchedRectsItem
from analyser.gui.model import data as gui_data
from analyser.gui.model.document import Document
from analyser.gui.model.pipeline import PHASE_LABELS, PipelineChart
from analyser.gui.palette import hex_color, qcolor
from analyser.gui.reports.base import Report
from analyser.gui.reports.trace.panels import _item
from analyser.gui.theme import style_plot
from analyser.gui.widgets import compact_rows
from analyser.literal import html as lit

#: Box colours per pass (shared palette "passes").
PASS_ORDER = ("forward", "backward", "loss", "update", "io")
#: Most micro-batch labels written inside boxes.
MAX_BOX_LABELS = 400


def chart_of(doc: Document) -> PipelineChart:
    return gui_data.pipeline_chart(doc)


def theoretical_ramp_share(stages: int, ga: int) -> float | None:
    """2(S - 1) / (G + S - 1) (ipu-facts.md), for G >= S; None otherwise."""
    if stages < 2 or ga < stages:
        return None
    return 2 * (stages - 1) / (ga + stages - 1)


class PipelineChartView(QWidget):
    """The chart, the per-stage load and the stash bars of one profile."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        lay = QGridLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.header = QLabel("")
        self.header.setWordWrap(True)
        self.header.setTextFormat(Qt.TextFormat.RichText)
        lay.addWidget(self.header, 0, 0, 1, 2)
        self.chart = pg.PlotWidget()
        style_plot(self.chart)
        self.chart.setMenuEnabled(False)
        self.chart.hideButtons()
        self.chart.getViewBox().invertY(True)
        self.chart.getViewBox().setMouseEnabled(x=True, y=False)
        self.chart.setLabel("bottom", "cycles (first device iteration)")
        use_cycle_axis(self.chart, "bottom")
        self.chart.getPlotItem().getAxis("left").setWidth(130)
        self.boxes = BatchedRectsItem()
        self.chart.addItem(self.boxes)
        lay.addWidget(self.chart, 1, 0, 1, 2)
        self.load = pg.PlotWidget()
        style_plot(self.load)
        self.load.setMenuEnabled(False)
        use_cycle_axis(self.load, "left")
        self.load.setTitle(
            "Busy cycles per stage, whole run (wide bar: all steps; narrow: compute)", size="9pt"
        )
        self.stash = pg.PlotWidget()
        style_plot(self.stash)
        self.stash.setMenuEnabled(False)
        self.stash.setTitle("Stash memory per stage", size="9pt")
        lay.addWidget(self.load, 2, 0)
        lay.addWidget(self.stash, 2, 1)
        lay.setRowStretch(1, 3)
        lay.setRowStretch(2, 2)
        # sized by the space available, not by pyqtgraph's size hints: the word-wrapped header
        # makes the scroll area size the body by height-for-width, which sums the hints and
        # would push the per-stage charts below the fold
        for plot, min_h in ((self.chart, 260), (self.load, 170), (self.stash, 170)):
            plot.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Ignored)
            plot.setMinimumHeight(min_h)
        # height-for-width layouts may hand the view less than its parts' minimums (they then
        # overlap): an explicit minimum for the whole view (header, chart, per-stage charts)
        self.setMinimumHeight(260 + 170 + 90)
        self._extra: list = []
        self.box_labels: list[tuple[pg.TextItem, float, str]] = []
        self._metrics = QFontMetrics(QFont())
        self.chart.getViewBox().sigXRangeChanged.connect(self._fit_labels)
        self.chart.getViewBox().sigResized.connect(self._fit_labels)
        self.data: PipelineChart | None = None
        self.band_labels: dict[str, str] = {}

    def _fit_labels(self, *args) -> None:
        """Show a box's label only when the box is wider than the text at the current zoom
        (thin micro-batch boxes would otherwise print their numbers on top of each other)."""
        vb = self.chart.getViewBox()
        (x0, x1), _ = vb.viewRange()
        px_per_cycle = vb.width() / (x1 - x0) if x1 > x0 else 0.0
        for item, width, text in self.box_labels:
            item.setVisible(width * px_per_cycle >= self._metrics.horizontalAdvance(text) + 6)

    def _clear_extra(self) -> None:
        for plot, item in self._extra:
            plot.removeItem(item)
        self._extra = []
        self.load.clear()
        self.stash.clear()

    def _add(self, plot, item) -> None:
        plot.addItem(item)
        self._extra.append((plot, item))

    def show_chart(self, c: PipelineChart, name: str) -> None:
        self.data = c
        self._clear_extra()
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

        # boxes per pass
        groups = {}
        b = c.boxes
        for p in PASS_ORDER:
            sel = b[b["pass_name"] == p]
            if sel.empty:
                continue
            arr = np.empty((len(sel), 4))
            arr[:, 0] = sel["start"].to_numpy(dtype=float)
            arr[:, 1] = sel["stage"].to_numpy(dtype=float) + 0.15
            arr[:, 2] = np.maximum(1.0, (sel["end"] - sel["start"]).to_numpy(dtype=float))
            arr[:, 3] = 0.7
            groups[p] = (QBrush(qcolor("passes", p, 220)), arr)
        self.boxes.set_groups(
            [groups[p] for p in PASS_ORDER if p in groups]
            + [g for p, g in groups.items() if p not in PASS_ORDER]
        )
        self.chart.getPlotItem().getAxis("left").setTicks(
            [[(s + 0.5, f"stage {s} · IPU {c.stage_ipu[s]}") for s in range(c.n_stages)], []]
        )
        # phase bands with their share of the run
        self.band_labels = {}
        for i, (phase, a, z) in enumerate(c.bands):
            region = pg.LinearRegionItem(
                (a, z), movable=False, brush=qcolor("phases", phase, 45), pen=pg.mkPen(None)
            )
            region.setZValue(-10)
            self._add(self.chart, region)
            text = f"{PHASE_LABELS[phase]} {100 * c.phase_share.get(phase, 0.0):.1f}%"
            self.band_labels[phase] = text
            label = pg.TextItem(text, color=hex_color("phases", phase), anchor=(0, 1))
            label.setFont(QFont("", 9, QFont.Weight.Bold))
            y = -0.05 - 0.2 * (i % 4)
            label.setPos(a, y)
            self._add(self.chart, label)
        # micro-batch numbers inside the boxes, shown only where they fit (see _fit_labels)
        self.box_labels = []
        if len(b) <= MAX_BOX_LABELS:
            for row in b.itertuples():
                text = str(row.micro_batch) if row.micro_batch >= 0 else "weight update"
                t = pg.TextItem(text, color="w", anchor=(0.5, 0.5))
                t.setPos((row.start + row.end) / 2, row.stage + 0.5)
                self._add(self.chart, t)
                self.box_labels.append((t, float(row.end - row.start), text))
        self.chart.getViewBox().setLimits(yMin=-1.0, yMax=c.n_stages + 0.2)
        self.chart.setYRange(-0.9, c.n_stages + 0.1, padding=0)
        self.chart.setXRange(c.t0, c.t1, padding=0.01)
        self._fit_labels()
        legend_items = [
            f"<span style='color:{hex_color('passes', p)}'>■</span> {p}"
            for p in PASS_ORDER
            if p in groups
        ]
        self.chart.setTitle(" &nbsp; ".join(legend_items), size="9pt")

        # per-stage load with the bottleneck marked
        x = np.arange(c.n_stages)
        brushes = [
            qcolor("status", "critical")
            if (s == c.bottleneck and c.pipelined)
            else qcolor("passes", "forward")
            for s in range(c.n_stages)
        ]
        self.load.addItem(
            pg.BarGraphItem(x=x, height=c.stage_cycles, width=0.6, brushes=brushes, pen=None)
        )
        self.load.addItem(
            pg.BarGraphItem(
                x=x,
                height=c.stage_compute_cycles,
                width=0.3,
                brush=qcolor("step_types", "OnTileExecute", 255).lighter(140),
                pen=None,
            )
        )
        if c.pipelined and len(c.stage_cycles):
            mark = pg.TextItem(
                "bottleneck", color=hex_color("status_text", "critical"), anchor=(0.5, 1)
            )
            mark.setPos(c.bottleneck, float(c.stage_cycles[c.bottleneck]))
            self.load.addItem(mark)
        self.load.getPlotItem().getAxis("bottom").setTicks(
            [[(s, f"stage {s}") for s in range(c.n_stages)], []]
        )
        self.load.getPlotItem().getAxis("left").setWidth(64)
        top = float(c.stage_cycles.max()) if len(c.stage_cycles) else 1.0
        self.load.setYRange(0, max(1.0, top) * 1.15, padding=0)
        self.load.setXRange(-0.6, c.n_stages - 0.4, padding=0)
        self.stash.addItem(
            pg.BarGraphItem(
                x=x,
                height=c.stash_bytes / 2**20,
                width=0.6,
                brush=qcolor("variable_kinds", "stash"),
                pen=None,
            )
        )
        self.stash.getPlotItem().getAxis("bottom").setTicks(
            [[(s, f"stage {s}") for s in range(c.n_stages)], []]
        )
        self.stash.setLabel("left", "MiB")
        top = float(c.stash_bytes.max()) / 2**20 if len(c.stash_bytes) else 0.0
        self.stash.setYRange(0, max(1.0, top * 1.15), padding=0)
        self.stash.setXRange(-0.6, c.n_stages - 0.4, padding=0)


class PipelineReport(Report):
    title = "Pipeline"
    key = "pipeline"
    data_needs = ("target", "execution", "trace_window", "pipeline_chart")
    needs_execution = True
    no_execution_text = (
        "{name} has no execution (it does not fit in memory), so there is no pipeline to show."
    )

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.lay_out_with_empty_states()
        self.body = QWidget()
        lay = QVBoxLayout(self.body)
        self.view_a = PipelineChartView()
        self._view_b: PipelineChartView | None = None  # built on the first comparison
        self._body_layout = lay
        self.table = QTableWidget(0, 4)
        self.table.setHorizontalHeaderLabels(["", "A", "B", "B − A"])
        self.table.verticalHeader().setVisible(False)
        compact_rows(self.table)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setMaximumHeight(220)
        self.explain = QLabel("")
        self.explain.setWordWrap(True)
        self.explain.setTextFormat(Qt.TextFormat.RichText)
        lay.addWidget(self.view_a, 3)
        lay.addWidget(self.explain)
        lay.addWidget(self.table, 1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.body)
        self.set_content(scroll)
        self.scroll = scroll

    @property
    def view_b(self) -> PipelineChartView:
        """Profile B's view, created when first needed (three plots: half the cost of a first
        visit when nothing is compared)."""
        if self._view_b is None:
            self._view_b = PipelineChartView()
            self._view_b.hide()
            self._body_layout.insertWidget(1, self._view_b, 3)
        return self._view_b

    def chart_widget(self) -> QWidget:
        return self.body

    def show_documents(self, doc: Document, other: Document | None) -> None:
        a = chart_of(doc)
        self.view_a.show_chart(a, f"A: {doc.name}" if other is not None else doc.name)
        b = chart_of(other) if other is not None and other.has_execution else None
        if b is not None or self._view_b is not None:
            self.view_b.setVisible(b is not None)
        self.table.setVisible(b is not None)
        self.explain.setVisible(b is not None)
        if b is not None:
            self.view_b.show_chart(b, f"B: {other.name}")
            self._fill_table(a, b, doc.name, other.name)
            self._explain(gui_data.comparison(doc, other))

    def _explain(self, comparison) -> None:
        """The analysis core's explanations of the differences between the whole runs."""
        self.explanations = list(comparison.explanations)
        diffs = [d for d in comparison.config_diffs if d.key != "name"]
        options = ", ".join(f"{d.key} {d.before!r} → {d.after!r}" for d in diffs) or "none"
        items = "".join(f"<li>{html.escape(e.text)}</li>" for e in self.explanations[:8])
        self.explain.setText(
            f"<b>Why they differ (analysis core):</b> run options: {html.escape(options)}."
            + (f"<ul style='margin:2px'>{items}</ul>" if items else "")
        )

    def _fill_table(self, a: PipelineChart, b: PipelineChart, name_a: str, name_b: str) -> None:
        self.table.setHorizontalHeaderLabels(["", f"A: {name_a}", f"B: {name_b}", "B − A"])
        rows: list[tuple[str, str, str, str, QColor | None]] = []
        for phase in ("rampUp", "main", "rampDown", "weightUpdate", "host"):
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
        for s in range(max(a.n_stages, b.n_stages)):
            ca = float(a.stage_cycles[s]) if s < a.n_stages else None
            cb = float(b.stage_cycles[s]) if s < b.n_stages else None
            rows.append(
                (f"stage {s} busy cycles", fmt_int(ca), fmt_int(cb), fmt_change(ca, cb), None)
            )
            sa = int(a.stash_bytes[s]) if s < len(a.stash_bytes) else None
            sb = int(b.stash_bytes[s]) if s < len(b.stash_bytes) else None
            delta = fmt_change(sa, sb, "KiB")
            rows.append((f"stage {s} stash memory", fmt_bytes(sa), fmt_bytes(sb), delta, None))
        rows.append(("bottleneck stage", str(a.bottleneck), str(b.bottleneck), "", None))
        self.table.setRowCount(len(rows))
        for r, (label, va, vb, d, color) in enumerate(rows):
            self.table.setItem(r, 0, _item(label, color=color))
            self.table.setItem(r, 1, _item(va, True))
            self.table.setItem(r, 2, _item(vb, True))
            self.table.setItem(r, 3, _item(d, True))
