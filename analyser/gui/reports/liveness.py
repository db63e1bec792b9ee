"""Liveness Report: not-always-live memory per program step (optionally plus always-live) for
each IPU, the peak marked; click a step to list its live variables, shift-click a second step to
compare the two; select a variable to shade its lifetime. Compare mode overlays B (dashed)."""

from __future__ import annotations

import contextlib
import html
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QVBoxLayout,
    QWidget,
)

from analyser.core.quantities import SERIES, VARIABLE_TABLE, columns
from analyser.core.units import MISSING, axis_scale
from analyser.gui.model import liveness as lvm
from analyser.gui.model.liveness import ALIGN_ADDED, ALIGN_REMOVED
from analyser.gui.model.liveness_view import LivenessSide, LivenessView, build_liveness_view
from analyser.gui.palette import hex_color
from analyser.gui.plots import LightPlotWidget
from analyser.gui.reports.base import Report, lay_out
from analyser.gui.theme import chart_colors, label_fill, selection_hatch, style_plot
from analyser.gui.widgets import (
    FilterTable,
    KeyValueTree,
    LegendLabel,
    cache_static_items,
    chart_panel,
    make_plot,
    tab_widget,
    tile_curve,
)
from analyser.viewmodels import datasets

if TYPE_CHECKING:
    from analyser.gui.model.document import Document

#: The chart's series as the catalogue declares them: its axis title and the peaks' colour.
LIVENESS_SERIES = SERIES["liveness"]


#: Above the curves and markers (a label drawn under a curve was crossed by it in a real X server).
PEAK_LABEL_Z = 20


def _peak_color() -> str:
    """The peaks' colour, read at draw time (the theme may change the palette)."""
    return hex_color(LIVENESS_SERIES.palette, LIVENESS_SERIES.names[0])


IPU_COLORS = [
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#b07aa1",
    "#76b7b2",
    "#edc948",
    "#9c755f",
]


class LivenessPlot(LightPlotWidget):
    stepClicked = Signal(int, bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent=parent, enableMenu=False)
        style_plot(self)
        item = self.getPlotItem()
        item.setMenuEnabled(False)
        item.showGrid(x=False, y=True, alpha=chart_colors().grid_alpha)
        self.n_steps = 0
        self.scene().sigMouseClicked.connect(self._on_click)
        cache_static_items(self)

    def _on_click(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton or self.n_steps == 0:
            return
        vb = self.getPlotItem().getViewBox()
        if not vb.sceneBoundingRect().contains(event.scenePos()):
            return
        x = round(vb.mapSceneToView(event.scenePos()).x())
        if 0 <= x < self.n_steps:
            shift = bool(event.modifiers() & Qt.KeyboardModifier.ShiftModifier)
            self.stepClicked.emit(x, shift)


class LivenessReport(Report):
    title = "Liveness Report"
    key = "liveness"
    requires = datasets.LIVENESS + datasets.VARIABLES
    data_needs = ("target", "liveness", "liveness_steps", "variables", "operation_names")
    view_builder = staticmethod(build_liveness_view)
    compare_cost = 1

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ipu_combo = QComboBox()
        self.always_check = QCheckBox("Include always-live")
        self.ipu_combo.currentIndexChanged.connect(lambda _i: self._on_ipu())
        self.always_check.toggled.connect(lambda _b: self._redraw())
        self.hint = QLabel(
            "Click a step to list its live variables; shift-click a second step to compare."
        )
        controls = QHBoxLayout()
        controls.addWidget(QLabel("IPU"))
        controls.addWidget(self.ipu_combo)
        controls.addWidget(self.always_check)
        controls.addStretch(1)
        controls.addWidget(self.hint)

        self.plot = LivenessPlot()
        self.plot.stepClicked.connect(self.click_step)
        self.legend = LegendLabel()
        self.chart_panel = chart_panel(self.plot, self.legend)

        self.step_tree = KeyValueTree()
        self.live_table = FilterTable("Filter live variables (select one to shade its lifetime)")
        self.live_table.view.selectionModel().currentRowChanged.connect(
            lambda *_: self._shade_variable()
        )
        self.compare_table = FilterTable("Filter")
        self.details = tab_widget()
        self.details.addTab(self.step_tree, "Step")
        self.details.addTab(self.live_table, "Live variables")
        self.details.addTab(self.compare_table, "Compare steps")
        # the selected step's vertices and per-tile cycle estimate (PopVision's Liveness tabs),
        # computed only when their tab is shown
        self.vertices_table = FilterTable("Filter vertices")
        self.cycles_panel = QWidget()
        cl = QVBoxLayout(self.cycles_panel)
        cl.setContentsMargins(0, 0, 0, 0)
        self.cycles_text = QLabel("")
        self.cycles_text.setWordWrap(True)
        cl.addWidget(self.cycles_text)
        self.cycles_plot: pg.PlotWidget | None = None  # built on the tab's first visit
        self.details.insertTab(1, self.vertices_table, "Vertices")
        self.details.insertTab(2, self.cycles_panel, "Cycle estimate")
        self._tabs_stale = True
        self.details.currentChanged.connect(lambda _i: self._fill_step_tabs())

        lay_out(self, [controls], self.chart_panel, self.details, (450, 330))
        self.steps: list[int] = []
        self._scale = 1.0
        self._markers: list[Any] = []
        self._region: pg.LinearRegionItem | None = None
        self._refreshing = False
        #: what the chart shows (see show_view); None before the first view-model
        self.view_model: LivenessView | None = None

    def chart_widget(self) -> QWidget:
        return self.chart_panel

    def shown_ipus(self) -> list[int]:
        view = self.view_model
        if self.document is None or view is None:
            return []
        n = view.a.num_ipus
        idx = self.ipu_combo.currentIndex()
        return list(range(n)) if idx <= 0 else [idx - 1]

    def clear(self) -> None:
        self.view_model = None

    def show_view(self, view: LivenessView) -> None:
        self.view_model = view
        self._refreshing = True
        try:
            cur = self.ipu_combo.currentIndex()
            self.ipu_combo.clear()
            if self.document is not None:
                n = view.a.num_ipus
                self.ipu_combo.addItems(["All IPUs"] + [f"IPU {i}" for i in range(n)])
                self.ipu_combo.setCurrentIndex(cur if 0 <= cur <= n else 0)
        finally:
            self._refreshing = False
        self._say_rebuilt(view.rebuilt_names)
        if self.keep_state and self.steps:  # a theme switch keeps the selected steps
            self._redraw()
            return
        self.steps = []
        self._redraw()
        self._select_peak()

    def _on_ipu(self) -> None:
        """Another IPU shown: its own peak selected (IPU 1 kept IPU 0's peak step)."""
        if self._refreshing or self.document is None:
            return
        self.steps = []
        self._redraw()
        self._select_peak()

    def _select_peak(self) -> None:
        """Start on the highest peak of the shown IPUs: its step details and the variables live
        there (what to shrink when memory is short) instead of empty panels."""
        view = self.view_model
        if self.document is None or view is None:
            return
        lv = view.a.summary
        best: tuple[float, int] | None = None
        for ipu, curve in self._side_curves(view.a).items():
            if curve.size and ipu < len(lv.peak_step):
                step = int(lv.peak_step[ipu])
                value = float(curve[min(step, curve.size - 1)])
                if best is None or value > best[0]:
                    best = (value, step)
        if best is not None:
            self.click_step(int(self.positions("A", lv.n_steps)[best[1]]), False)

    def _say_rebuilt(self, rebuilt: tuple[str, ...]) -> None:
        """A line above the report when a curve was summed from the variables' lifetimes (the
        profile has no /liveness/not_always_live): what is drawn is not what the file holds."""
        text = (
            f"{' and '.join(rebuilt)}: no /liveness/not_always_live in the profile; the curve "
            "is summed from its variables' lifetimes."
            if rebuilt
            else ""
        )
        if text or self.part_problem().endswith("variables' lifetimes."):
            self.show_part_problem(text)

    def curves(self, doc: Document | None) -> dict[int, np.ndarray]:
        """The curves drawn for ``doc`` (A or B: bytes per liveness step per shown IPU)."""
        view = self.view_model
        side = None if view is None else view.a if doc is self.document else view.b
        return {} if side is None else self._side_curves(side)

    def _side_curves(self, side: LivenessSide) -> dict[int, np.ndarray]:
        """The curves drawn for one profile of the view-model, from the core's summary."""
        lv = side.summary
        n = lv.not_always_live.shape[0]
        return {
            ipu: lv.curve(ipu, include_always_live=self.always_check.isChecked())
            for ipu in self.shown_ipus()
            if ipu < n
        }

    # ------------------------------------------------------------------ alignment
    def alignment(self) -> Any:
        """A's and B's steps aligned by program (core ``align_steps``), None without B."""
        if self.document is None or self.compare_doc is None or self.view_model is None:
            return None
        return self.view_model.alignment

    def positions(self, tag: str, n: int) -> np.ndarray:
        """x of each of ``n`` steps of profile ``tag`` ("A" / "B") on the chart: its step index,
        or its row of the alignment when comparing."""
        al = self.alignment()
        if al is None:
            return np.arange(n)
        return al.a_pos if tag == "A" else al.b_pos

    def steps_at(self, x: int) -> dict[str, int]:
        """{"A": step, "B": step} at chart position ``x`` (-1: that profile has no step there)."""
        al = self.alignment()
        if al is None:
            return {"A": x}
        if not 0 <= x < al.n_rows:
            return {"A": -1, "B": -1}
        return {"A": int(al.a[x]), "B": int(al.b[x])}

    def _redraw(self) -> None:
        if self._refreshing:
            return
        item = self.plot.getPlotItem()
        item.clear()
        self._markers = []
        self._region = None
        self.peak_labels: list[pg.TextItem] = []
        view, cmp = self.view_model, self.compare_doc
        if self.document is None or view is None:
            self.legend.set_entries([])
            return
        sides = [(view.a, Qt.PenStyle.SolidLine)] + (
            [(view.b, Qt.PenStyle.DashLine)] if view.b is not None else []
        )
        all_curves = [(s.tag, s, style, self._side_curves(s)) for s, style in sides]
        top = max(
            (float(c.max()) for *_, cs in all_curves for c in cs.values() if c.size), default=0.0
        )
        scale, unit = axis_scale(self.units, top)
        self._scale = scale
        entries = []
        al = self.alignment()
        n_steps = al.n_rows if al is not None else 0
        peaks: list[lvm.Peak] = []
        for tag, side, style, cs in all_curves:
            for ipu, curve in cs.items():
                color = IPU_COLORS[ipu % len(IPU_COLORS)]
                x = self.positions(tag, curve.size).astype(float)
                item.addItem(
                    pg.PlotDataItem(x, curve / scale, pen=pg.mkPen(color, width=2, style=style))
                )
                dashed = style == Qt.PenStyle.DashLine
                label = f"IPU {ipu}" + (f" ({tag})" if cmp is not None else "")
                entries.append((label, color, "dashed" if dashed else "line"))
                n_steps = max(n_steps, curve.size)
                if curve.size:
                    peak = lvm.curve_peak(side.summary, tag, ipu, x, curve)
                    peaks.append(peak)
                    marker = pg.ScatterPlotItem(
                        [peak.x],
                        [peak.nbytes / scale],
                        symbol="t1",
                        size=13,
                        brush=pg.mkBrush(_peak_color()),
                        pen=pg.mkPen(None),
                    )
                    item.addItem(marker)
        if al is not None:
            entries += self._draw_unmatched(al)
        labels = lvm.peak_labels(peaks, top, self.units, cmp is not None)
        for label in labels:
            # a peak near an edge gets its label on the inner side (a centred label was cut
            # at the chart's left edge)
            ax = lvm.label_anchor(label.x, n_steps)
            text = pg.TextItem(
                label.text,
                color=_peak_color(),
                anchor=(ax, 1.2 + 1.3 * label.level),
                fill=label_fill(),  # the curves under the label do not cross its text
            )
            text.setZValue(PEAK_LABEL_Z)
            text.setPos(label.x, label.nbytes / scale)
            item.addItem(text)
            self.peak_labels.append(text)
        self.plot.n_steps = n_steps
        title = LIVENESS_SERIES.title
        if self.always_check.isChecked():
            title = title.replace("not-always-live", "not-always-live + always-live")
        item.setLabel("left", f"{title} ({unit})")
        item.setLabel(
            "bottom",
            "program step (liveness)"
            if al is None
            else "program step, A and B aligned by program (as a diff)",
        )
        entries.append(("peak", _peak_color()))
        self.legend.set_entries(entries)
        item.setXRange(0, max(n_steps - 1, 1), padding=0.01)
        levels = max((label.level for label in labels), default=0)
        item.setYRange(0, top / scale * (1.15 + 0.07 * levels) if top else 1, padding=0)
        self._show_steps()

    #: Most added / removed runs shaded (profiles of different models differ everywhere).
    MAX_UNMATCHED_RUNS = 300

    def _draw_unmatched(self, al: Any) -> list[tuple[str, str]]:
        """Shade the steps only A has (removed in B) and only B has (added), as a diff would."""
        item = self.plot.getPlotItem()
        colors = {ALIGN_REMOVED: hex_color("compare", "a"), ALIGN_ADDED: hex_color("compare", "b")}
        seen = set()
        for status, lo, hi in al.unmatched_runs()[: self.MAX_UNMATCHED_RUNS]:
            brush = pg.mkColor(colors[status])
            brush.setAlpha(70)
            # edged in the full colour: a run of one step is thinner than a pixel
            region = pg.LinearRegionItem(
                values=(lo - 0.5, hi + 0.5),
                movable=False,
                brush=brush,
                pen=pg.mkPen(colors[status], width=1),
            )
            region.setZValue(-10)
            item.addItem(region)
            seen.add(status)
        names = {ALIGN_REMOVED: "steps only in A (removed)", ALIGN_ADDED: "steps only in B (added)"}
        return [(names[s], colors[s]) for s in (ALIGN_REMOVED, ALIGN_ADDED) if s in seen]

    # ------------------------------------------------------------------ steps
    def click_step(self, step: int, shift: bool) -> None:
        """Select chart position ``step`` (A's step index, or the aligned row when comparing);
        with ``shift`` a second one to compare with the first."""
        if shift and self.steps:
            self.steps = [self.steps[0], step] if step != self.steps[0] else [step]
        else:
            self.steps = [step]
        self._show_steps()

    def _step_text(self, x: int, first: bool) -> str:
        at = self.steps_at(x)
        if self.compare_doc is None:
            return f"step {x}" if first else f"vs {x}"
        show = lambda s: str(s) if s >= 0 else MISSING  # noqa: E731
        return ("step " if first else "vs ") + f"A {show(at['A'])} · B {show(at['B'])}"

    def _show_steps(self) -> None:
        item = self.plot.getPlotItem()
        for m in self._markers:
            item.removeItem(m)
        self._markers = []
        for k, s in enumerate(self.steps):
            # the selection's labels go at the foot of the chart: the peak labels (and the
            # default selection is the peak) take its top
            line = pg.InfiniteLine(
                pos=s,
                angle=90,
                pen=pg.mkPen(hex_color("chart", "selection"), width=2),
                label=self._step_text(s, k == 0),
                labelOpts={
                    "position": 0.04 + 0.08 * k,
                    "anchors": [(0, 1), (0, 1)],
                    "color": chart_colors().foreground,
                    "fill": pg.mkBrush(chart_colors().background),
                },
            )
            item.addItem(line)
            self._markers.append(line)
        self._fill_step_details()

    def _fill_step_details(self) -> None:
        tree = self.step_tree
        tree.clear()
        doc, cmp = self.document, self.compare_doc
        if doc is None or not self.steps:
            self.live_table.set_frame(pd.DataFrame())
            self.compare_table.set_frame(pd.DataFrame())
            self._details_changed()
            return
        ipus = self.shown_ipus()
        al = self.alignment()
        for x in self.steps:
            rows = []
            at = self.steps_at(x)
            for tag, d in [("A", doc)] + ([("B", cmp)] if cmp is not None else []):
                s = at[tag]
                prefix = f"{tag}: " if cmp is not None else ""
                if s < 0:
                    gone = "none: removed in B" if tag == "B" else "none: added in B"
                    rows.append((prefix + "Step", gone))
                    continue
                side = self.view_model.side(tag) if self.view_model is not None else None
                if side is None or s >= side.n_steps:
                    continue
                if cmp is not None:
                    rows.append((prefix + "Step", str(s)))
                rows += lvm.step_rows(d, s, ipus, self.units, prefix)
            title = f"Step {x}" if al is None else f"{self._step_text(x, True)} ({al.status(x)})"
            tree.add_section(title, rows)
        always = self.always_check.isChecked()
        live = lvm.live_variables_table(self._step_docs(), ipus, always, cmp is not None)
        cols = list(VARIABLE_TABLE)
        cols.insert(cols.index("bytes"), "ipu")
        self.live_table.set_frame(live, columns("variables", self.units, cols))
        a_steps = [self.steps_at(x)["A"] for x in self.steps]
        if len(self.steps) == 2 and min(a_steps) >= 0:
            both = lvm.compare_steps_table(doc, a_steps[0], a_steps[1], ipus, always)
            self.compare_table.filter.setPlaceholderText("Filter")
            self.compare_table.set_frame(both, columns("live_at_steps", self.units))
            self.details.setCurrentWidget(self.compare_table)
        else:
            self.compare_table.set_frame(pd.DataFrame())
            self.compare_table.filter.setPlaceholderText(
                "Shift-click a second step on the chart to compare the variables live at each"
            )
            if self.details.currentWidget() is self.compare_table:
                self.details.setCurrentWidget(self.live_table)
        self._details_changed()

    def _details_changed(self) -> None:
        """The selected step changed: the per-step tabs are filled when shown."""
        self._tabs_stale = True
        self._fill_step_tabs()

    def _step_docs(self) -> list[tuple[str, Any, int]]:
        """(tag, document, its step) at the first selected position, profiles with a step."""
        if not self.steps:
            return []
        return lvm.step_docs(self.document, self.compare_doc, self.steps_at(self.steps[0]))

    def _fill_step_tabs(self) -> None:
        """Fill the Vertices and Cycle estimate tabs when one of them is shown (first visit and
        step changes cost nothing while they are hidden)."""
        current = self.details.currentWidget()
        if not self._tabs_stale or current not in (self.vertices_table, self.cycles_panel):
            return
        self._tabs_stale = False
        # a profile lacking the compute sets or the per-tile cycles: these tabs say so, the
        # rest of the report keeps working
        self.show_part_problem("")
        self.run_part("Vertices", self._fill_vertices, (), self.vertices_table)
        self.run_part("Cycle estimate", self._fill_cycles, (), self.cycles_panel)

    def _fill_vertices(self) -> None:
        frame = lvm.vertices_table(self._step_docs(), self.compare_doc is not None)
        self.vertices_table.set_frame(frame, columns("step_vertices", self.units))

    def _fill_cycles(self) -> None:
        if self.cycles_plot is None:
            self.cycles_plot = make_plot(left="cycles (one execution)", bottom="tile", mouse=True)
            self.cycles_panel.layout().addWidget(self.cycles_plot, 1)
        item = self.cycles_plot.getPlotItem()
        item.clear()
        lines = []
        compare = self.compare_doc is not None
        for k, (tag, d, step) in enumerate(self._step_docs()):
            cycles = lvm.step_tile_cycles(d, step)
            color = hex_color("compare", "a" if k == 0 else "b")
            item.addItem(tile_curve(cycles, k))
            side = self.view_model.side(tag) if self.view_model is not None else None
            name = side.summary.step_names[step] if side is not None else str(step)
            swatch = f"<span style='color:{color}'>■</span> " if compare else ""
            text = lvm.cycles_line(tag if compare else "", step, name, cycles)
            lines.append(swatch + html.escape(text))
        self.cycles_text.setText("<br>".join(lines))

    def live_variable_names(self) -> list[str]:
        model = self.live_table.model
        if model.rowCount() == 0:
            return []
        col = model.column_of("name")
        return [str(model.raw(r, col)) for r in range(model.rowCount())]

    def _shade_variable(self) -> None:
        item = self.plot.getPlotItem()
        if self._region is not None:
            item.removeItem(self._region)
            self._region = None
        idx = self.live_table.view.currentIndex()
        if not idx.isValid():
            return
        src = self.live_table.proxy.mapToSource(idx)
        model = self.live_table.model
        try:
            start = int(model.raw(src.row(), model.column_of("live_start")))
            end = int(model.raw(src.row(), model.column_of("live_end")))
        except ValueError:
            return
        if start < 0:
            return
        tag = "A"
        if self.compare_doc is not None:
            with contextlib.suppress(ValueError):
                tag = str(model.raw(src.row(), model.column_of("profile")))
            side = self.view_model.side(tag) if self.view_model is not None else None
            if side is None:
                return
            pos = self.positions(tag, side.n_steps)
            if not len(pos):
                return
            start = int(pos[min(start, len(pos) - 1)])
            end = int(pos[min(end, len(pos) - 1)])
        self._region = pg.LinearRegionItem(
            values=(start - 0.5, end + 0.5),
            movable=False,
            brush=selection_hatch(),  # not a tint over the classes' colours
            pen=pg.mkPen(chart_colors().foreground, width=1),
        )
        item.addItem(self._region)
