"""Memory Report: memory per tile for every IPU, broken down by category / region / liveness
class (stacked, one filled path per class), in software or physical tile order, with the max-memory
line, include-gaps option, tile selection (click, shift-click, typed list) and detail tabs for the
selected tiles (tiles, variables, vertices, exchanges, compute sets); a variables view; and a tile
map (memory over the chip floor plan). In compare mode, A and B are drawn one above the other
with linked axes and every table carries both."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyqtgraph as pg
from PySide6 import QtCore, QtGui
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from analyser.core.quantities import SERIES, Series, columns
from analyser.core.units import (
    MemoryUnits,
    axis_scale,
    fmt_bytes,
    fmt_change,
)
from analyser.gui.items import BatchedRectsItem
from analyser.gui.model import data, datasets, tile_details
from analyser.gui.model import memory as memory_model
from analyser.gui.model.errors import TileSelectionError
from analyser.gui.model.labels import distinct_labels
from analyser.gui.model.selection import (
    format_tile_list,
    parse_tile_list,
    toggle_pair,
    unique_pairs,
)
from analyser.gui.palette import heatmap_colors, hex_color
from analyser.gui.reports.base import Report, lay_out
from analyser.gui.reports.memory_insights import MemoryInsightsPage
from analyser.gui.reports.memory_map import MemoryMapPage
from analyser.gui.theme import chart_colors, style_plot
from analyser.gui.widgets import (
    FilterTable,
    KeyValueTree,
    LegendLabel,
    make_plot,
    nice_name,
)

BREAKDOWNS = {"Total": None, "Category": "category", "Region": "region", "Liveness": "liveness"}
#: Each breakdown's chart series (names, palette group) in the catalogue.
BREAKDOWN_SERIES: dict[str, Series] = {
    "category": SERIES["memory_by_category"],
    "region": SERIES["memory_by_region"],
    "liveness": SERIES["memory_by_liveness"],
}
GAPS_COLOR = "#5f5f5f"
#: One left-axis width for the three linked charts (A, B, B - A), so a tile sits at the same x
#: in each.
LEFT_AXIS_WIDTH = 62
#: Longest variable name on the Variables chart's axis (longer ones are elided in the middle).
VARIABLE_LABEL_CHARS = 32
TOTAL_COLOR = "#4e79a7"


@dataclass
class TileChart:
    """What one plot shows: [n, k] stacked values over the displayed tiles."""

    values: np.ndarray  # [n, k] bytes
    names: list[str]
    colors: list[str]
    ipu_of: np.ndarray  # [n] IPU of each displayed position
    tile_of: np.ndarray  # [n] software tile id of each displayed position
    sram: int
    ipus: list[int]
    tiles_per_ipu: int

    @property
    def totals(self) -> np.ndarray:
        return self.values.sum(axis=1)


def ipu_tile_axis(item, chart: TileChart, lines: list) -> bool:
    """Ticks naming each IPU under its tiles on ``item``'s bottom axis, with a separator line
    between IPUs (appended to ``lines`` so the caller can remove them); True when there are
    several IPUs, else the axis keeps plain tile numbers."""
    axis = item.getAxis("bottom")
    if len(chart.ipus) <= 1:
        axis.setTicks(None)
        return False
    ticks = []
    for k, ipu in enumerate(chart.ipus):
        x0 = k * chart.tiles_per_ipu
        if k:
            line = pg.InfiniteLine(
                pos=x0 - 0.5, angle=90, pen=pg.mkPen(chart_colors().foreground, width=1)
            )
            item.addItem(line)
            lines.append(line)
        ticks.append((x0 + chart.tiles_per_ipu / 2, f"IPU {ipu}"))
    axis.setTicks([ticks])
    return True


def stacked_bars(
    edges: np.ndarray, cum: np.ndarray, colors: list[str], present: list[int]
) -> tuple[list[tuple[QtGui.QBrush, np.ndarray]], QtCore.QRectF]:
    """Stacked per-tile bars as rectangle groups for :class:`BatchedRectsItem` (one group, so
    one ``drawRects`` call, per category present, whatever the number of tiles) and their
    bounds. Column ``j`` of ``cum`` is the top of category ``j`` on each tile; each bar is
    (x, bottom, width 1, height), written from numpy. (Filled polygons with one vertex per tile
    edge are far slower in Qt's rasteriser.)"""
    groups = []
    lower = np.zeros(cum.shape[0])
    for j in range(cum.shape[1]):
        upper = cum[:, j]
        if j in present:
            keep = np.flatnonzero(upper > lower)
            rects = np.empty((keep.size, 4))
            rects[:, 0] = edges[keep]
            rects[:, 1] = lower[keep]
            rects[:, 2] = 1.0
            rects[:, 3] = upper[keep] - lower[keep]
            groups.append((pg.mkBrush(colors[j]), rects))
        lower = upper
    top = float(cum[:, -1].max()) if cum.size else 1.0
    bounds = QtCore.QRectF(float(edges[0]), 0.0, float(edges[-1] - edges[0]), top or 1.0)
    return groups, bounds


class MemoryPlot(pg.PlotWidget):
    """Stacked per-tile memory. Each class is one filled step path (not one rectangle per tile),
    drawn from the highest cumulative level down, so a 4 x 1,472-tile chart is k paths."""

    tileClicked = Signal(int, int, bool)  # ipu, tile, shift

    def __init__(self, legend: LegendLabel | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent=parent, enableMenu=False)
        style_plot(self)
        item = self.getPlotItem()
        item.setMenuEnabled(False)
        item.showGrid(x=False, y=True, alpha=chart_colors().grid_alpha)
        item.setLabel("bottom", "tile")
        # tile numbers take no SI prefix: pyqtgraph gives the empty plot's 0-1 range
        # "(x0.001)" and centres the axis title for that longer text until the next resize
        item.getAxis("bottom").enableAutoSIPrefix(False)
        self.chart: TileChart | None = None
        self.stack = BatchedRectsItem()
        item.addItem(self.stack)
        self.paths: list[int] = []
        self.max_line: pg.InfiniteLine | None = None
        self.separators: list[pg.InfiniteLine] = []
        self.selection_item: pg.BarGraphItem | None = None
        self.legend = legend
        self.scene().sigMouseClicked.connect(self._on_click)
        self.setMinimumHeight(180)

    def draw(
        self,
        chart: TileChart,
        scale: float,
        unit: str,
        show_max: bool,
        title: str = "",
        units: MemoryUnits = MemoryUnits.KIB,
    ) -> None:
        item = self.getPlotItem()
        if self.max_line is not None:
            item.removeItem(self.max_line)
        self.max_line = None
        self.chart = chart
        n = chart.values.shape[0]
        edges = np.arange(n + 1, dtype=np.float64) - 0.5
        cum = np.cumsum(chart.values, axis=1, dtype=np.float64) / scale
        present = [j for j in range(cum.shape[1]) if chart.values[:, j].any()]
        if self.stack.scene() is None:
            item.addItem(self.stack)
        self.stack.set_groups(*stacked_bars(edges, cum, chart.colors, present))
        self.paths = present
        # Legend in category order (bottom of the stack first).
        if self.legend is not None:
            self.legend.set_entries([(chart.names[j], chart.colors[j]) for j in present])
        sram = chart.sram / scale
        if show_max:
            self.max_line = pg.InfiniteLine(
                pos=sram,
                angle=0,
                pen=pg.mkPen(
                    hex_color("chart", "max_memory_line"), width=1.5, style=Qt.PenStyle.DashLine
                ),
                label=f"max memory per tile ({fmt_bytes(chart.sram, units)})",
                labelOpts={
                    "position": 0.02,
                    "color": hex_color("chart", "max_memory_line"),
                    "anchors": [(0, 0), (0, 0)],
                    "fill": _label_fill(),
                },
            )
            item.addItem(self.max_line)
        # IPU separators and ticks.
        for line in self.separators:
            item.removeItem(line)
        self.separators = []
        if ipu_tile_axis(item, chart, self.separators):
            item.setLabel("bottom", "tiles of each IPU")
        else:
            item.setLabel("bottom", f"tile (IPU {chart.ipus[0]})" if chart.ipus else "tile")
        item.setLabel("left", f"memory ({unit})")
        # pyqtgraph centres an axis title when the axis is resized: without this a title set
        # after the last resize keeps the place of the one before ("tile")
        item.getAxis("bottom").resizeEvent()
        if title:
            item.setTitle(title, size="9pt")
        top = max(float(cum[:, -1].max()) if cum.size else 0.0, sram if show_max else 0.0)
        item.getViewBox().setLimits(xMin=-0.5 - n * 0.02, xMax=n - 0.5 + n * 0.02, yMin=0)
        item.setXRange(-0.5, n - 0.5, padding=0.01)
        item.setYRange(0, top * 1.12 if top else 1, padding=0)

    def reset(self) -> None:
        """Show nothing (no document) while keeping the plot's own items."""
        item = self.getPlotItem()
        self.stack.set_groups(*stacked_bars(np.zeros(1), np.zeros((0, 1)), [], []))
        for it in [self.max_line, self.selection_item, *self.separators]:
            if it is not None:
                item.removeItem(it)
        self.max_line = None
        self.selection_item = None
        self.separators = []
        self.chart = None
        if self.legend is not None:
            self.legend.set_entries([])

    def show_selection(self, pairs: np.ndarray, scale: float) -> None:
        item = self.getPlotItem()
        if self.selection_item is not None:
            item.removeItem(self.selection_item)
            self.selection_item = None
        chart = self.chart
        if chart is None or len(pairs) == 0:
            return
        key = chart.ipu_of.astype(np.int64) * chart.tiles_per_ipu + chart.tile_of
        want = pairs[:, 0] * chart.tiles_per_ipu + pairs[:, 1]
        pos = np.flatnonzero(np.isin(key, want))
        if pos.size == 0:
            return
        top = max(float(chart.totals.max()), float(chart.sram)) / scale
        width = max(1.0, chart.values.shape[0] / 600.0)
        color = pg.mkColor(hex_color("chart", "selection"))
        color.setAlpha(110)
        self.selection_item = pg.BarGraphItem(
            x=pos.astype(float),
            y0=0,
            height=top * 1.05,
            width=width,
            brush=color,
            pen=pg.mkPen(None),
        )
        self.selection_item.setZValue(50)
        item.addItem(self.selection_item)

    def position_at(self, scene_pos) -> int | None:
        chart = self.chart
        if chart is None:
            return None
        vb = self.getPlotItem().getViewBox()
        if not vb.sceneBoundingRect().contains(scene_pos):
            return None
        x = vb.mapSceneToView(scene_pos).x()
        pos = int(np.floor(x + 0.5))
        return pos if 0 <= pos < chart.values.shape[0] else None

    def _on_click(self, event) -> None:
        pos = self.position_at(event.scenePos())
        if pos is None or event.button() != Qt.MouseButton.LeftButton:
            return
        shift = bool(event.modifiers() & Qt.KeyboardModifier.ShiftModifier)
        self.tileClicked.emit(int(self.chart.ipu_of[pos]), int(self.chart.tile_of[pos]), shift)


def _label_fill() -> QtGui.QBrush:
    color = pg.mkColor(chart_colors().background)
    color.setAlpha(200)
    return pg.mkBrush(color)


def oom_colormap(hi: float) -> pg.ColorMap:
    """Heat-map colours from 0 to 100% of tile memory, reds from 100% to ``hi`` (> 1 when some
    tile is out of memory)."""
    stops = heatmap_colors()
    edge = 1.0 / hi
    pos = list(np.linspace(0.0, edge, len(stops)))
    colors = [pg.mkColor(c) for c in stops]
    if hi > 1.0:
        pos += [min(1.0, edge + 1e-6), 1.0]
        colors += [pg.mkColor("#ff6b6b"), pg.mkColor("#7f0000")]
    return pg.ColorMap(pos, colors)


class TileMap(pg.GraphicsLayoutWidget):
    """Memory of one IPU's tiles over the chip floor plan (share of tile SRAM), as an ImageItem."""

    tileClicked = Signal(int, int, bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent=parent)
        self.setBackground(chart_colors().background)
        self.plots: list[tuple[pg.PlotItem, pg.ImageItem, Any, int, Any]] = []
        self.bar: pg.ColorBarItem | None = None
        self.scene().sigMouseClicked.connect(self._on_click)
        self.setMinimumHeight(200)

    def show_maps(self, maps: list[tuple[str, np.ndarray, np.ndarray, int, Any]]) -> None:
        """``maps``: (title, grid [cols, rows] of share used, oom mask grid, ipu, analysis).

        Colours run through the heat-map palette up to 100% of tile memory; tiles above it (out
        of memory) are drawn in reds, so OOM tiles stand out without markers."""
        self.clear()
        self.plots = []
        hi = max([1.0] + [float(np.nanmax(g)) for _, g, *_ in maps if np.isfinite(g).any()])
        cmap = oom_colormap(hi)
        images = []
        per_row = 2 if len(maps) > 1 else 1
        for k, (title, grid, oom, ipu, analysis) in enumerate(maps):
            plot = self.addPlot(row=k // per_row, col=k % per_row)
            plot.setTitle(title, size="9pt")
            plot.setAspectLocked(True)
            plot.invertY(True)
            plot.setMenuEnabled(False)
            plot.setLabel("bottom", "column")
            plot.setLabel("left", "row")
            img = pg.ImageItem(grid, levels=(0.0, hi))
            img.setColorMap(cmap)
            plot.addItem(img)
            n_oom = int(np.count_nonzero(oom))
            if n_oom:
                plot.setTitle(f"{title}: {n_oom:,} tiles out of memory (red)", size="9pt")
            images.append(img)
            self.plots.append((plot, img, grid, ipu, analysis))
        if images:
            self.bar = pg.ColorBarItem(
                values=(0.0, hi), colorMap=cmap, label="share of tile memory", interactive=False
            )
            self.bar.setImageItem(images, insert_in=self.plots[-1][0])
            # shares as percentages, 100% (the tile's SRAM) always among the ticks
            step = 0.25 if hi <= 2.0 else 0.5 if hi <= 4.0 else 1.0
            ticks = [(v, f"{100 * v:.0f}%") for v in np.arange(0.0, hi + 1e-9, step)]
            self.bar.axis.setTicks([ticks])

    def _on_click(self, event) -> None:
        for plot, _img, grid, ipu, analysis in self.plots:
            vb = plot.getViewBox()
            if not vb.sceneBoundingRect().contains(event.scenePos()):
                continue
            p = vb.mapSceneToView(event.scenePos())
            cx, cy = int(np.floor(p.x())), int(np.floor(p.y()))
            if not (0 <= cx < grid.shape[0] and 0 <= cy < grid.shape[1]):
                return
            xy = tile_details.tile_xy(analysis)
            hit = np.flatnonzero((xy[:, 0] == cx) & (xy[:, 1] == cy))
            if hit.size:
                shift = bool(event.modifiers() & Qt.KeyboardModifier.ShiftModifier)
                self.tileClicked.emit(ipu, int(hit[0]), shift)
            return


class MemoryReport(Report):
    title = "Memory Report"
    key = "memory"
    requires = datasets.MEMORY
    data_needs = ("target", "memory", "tile_breakdowns")
    compare_part = ("_compare_plots", "plot_b")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.selection = np.zeros((0, 2), np.int64)
        self.charts: dict[str, TileChart] = {}

        self.ipu_combo = QComboBox()
        self.breakdown_combo = QComboBox()
        self.breakdown_combo.addItems(list(BREAKDOWNS))
        self.breakdown_combo.setCurrentText("Category")
        self.order_combo = QComboBox()
        self.order_combo.addItems(["Software tile id", "Physical tile id"])
        self.gaps_check = QCheckBox("Include gaps")
        self.max_check = QCheckBox("Show max memory")
        self.max_check.setChecked(True)
        self.tiles_edit = QLineEdit()
        self.tiles_edit.setPlaceholderText("Select tiles: 0-15, 1000 or 1:0-15")
        self.tiles_edit.setMinimumWidth(200)
        self.select_button = QPushButton("Select")
        self.clear_button = QPushButton("Clear")
        self.error_label = QLabel("")
        self.error_label.setStyleSheet(f"color: {hex_color('status', 'oom')};")
        for w in (self.ipu_combo, self.breakdown_combo, self.order_combo):
            w.currentIndexChanged.connect(self._redraw)
        self.gaps_check.toggled.connect(self._redraw)
        self.max_check.toggled.connect(self._redraw)
        self.tiles_edit.returnPressed.connect(self.select_typed)
        self.select_button.clicked.connect(self.select_typed)
        self.clear_button.clicked.connect(lambda: self.set_selection(np.zeros((0, 2), np.int64)))

        controls = QHBoxLayout()
        for label, w in (
            ("IPU", self.ipu_combo),
            ("Breakdown", self.breakdown_combo),
            ("Order", self.order_combo),
        ):
            controls.addWidget(QLabel(label))
            controls.addWidget(w)
        controls.addWidget(self.gaps_check)
        controls.addWidget(self.max_check)
        controls.addStretch(1)
        controls.addWidget(self.tiles_edit)
        controls.addWidget(self.select_button)
        controls.addWidget(self.clear_button)

        self.legend = LegendLabel()
        self.plot_a = MemoryPlot(self.legend)
        self.plot_a.getPlotItem().getAxis("left").setWidth(LEFT_AXIS_WIDTH)
        self.plot_a.tileClicked.connect(self.click_tile)
        #: B's chart and the B - A chart, built the first time compare mode draws (issue 15:
        #: each plot costs 10-20 ms of the report's first visit)
        self._compare_plots: tuple[MemoryPlot, pg.PlotWidget] | None = None
        self.delta_items: list[pg.BarGraphItem] = []
        self.chart_page = QWidget()
        cl = QVBoxLayout(self.chart_page)
        cl.setContentsMargins(0, 0, 0, 0)
        cl.addWidget(self.plot_a, 1)
        cl.addWidget(self.legend)
        self.tile_map = TileMap()
        self.tile_map.tileClicked.connect(self.click_tile)
        self.variables_table = FilterTable("Filter variables by name, kind, type...")
        #: the Variables chart, built when the Variables tab is first filled
        self._variables_plot: pg.PlotWidget | None = None
        self.variables_legend = LegendLabel()
        self.variables_page = QSplitter(Qt.Orientation.Horizontal)
        self._variables_chart = QWidget()
        vl = QVBoxLayout(self._variables_chart)
        vl.setContentsMargins(0, 0, 0, 0)
        vl.addWidget(self.variables_legend)
        self.variables_page.addWidget(self._variables_chart)
        self.variables_page.addWidget(self.variables_table)
        self.variables_page.setSizes([520, 700])

        self.view_tabs = QTabWidget()
        self.view_tabs.addTab(self.chart_page, "Memory per tile")
        self.view_tabs.addTab(self.tile_map, "Tile map")
        self.view_tabs.addTab(self.variables_page, "Variables")
        self.memory_map = MemoryMapPage()
        self.view_tabs.addTab(self.memory_map, "Tile memory map")
        self.insights_page = MemoryInsightsPage()
        self.insights_page.tileChosen.connect(
            lambda ipu, tile: self.set_selection(np.array([[ipu, tile]], np.int64))
        )
        self.view_tabs.addTab(self.insights_page, "Insights")
        #: (ipu, tile) the memory map shows: the last tile clicked, else the fullest shown
        self.map_tile: tuple[int, int] | None = None
        self.view_tabs.currentChanged.connect(lambda _i: self._draw_secondary())

        self.totals_tree = KeyValueTree()
        self.tiles_table = FilterTable("Filter")
        self.tile_vars_table = FilterTable("Filter variables on the selected tiles")
        self.vertices_table = FilterTable("Filter vertex types")
        self.exchanges_table = FilterTable("Filter exchanges")
        self.compute_sets_table = FilterTable("Filter compute sets")
        self.details = QTabWidget()
        self.details.addTab(self.totals_tree, "Totals")
        self.details.addTab(self.tiles_table, "Selected tiles")
        self.details.addTab(self.tile_vars_table, "Variables")
        self.details.addTab(self.vertices_table, "Vertices")
        self.details.addTab(self.exchanges_table, "Exchanges")
        self.details.addTab(self.compute_sets_table, "Compute sets")
        self.details.currentChanged.connect(lambda _i: self._fill_details())

        lay_out(self, [controls, self.error_label], self.view_tabs, self.details, (520, 300))
        self.error_label.setVisible(False)
        self._refreshing = False

    def chart_widget(self) -> QWidget:
        return self.view_tabs.currentWidget()

    # ------------------------------------------------------------------ pages built on demand
    @property
    def plot_b(self) -> MemoryPlot:
        """B's chart, under A's (compare mode); built on first use."""
        return self._build_compare_plots()[0]

    @property
    def plot_delta(self) -> pg.PlotWidget:
        """The per-tile B - A chart under B's (compare mode); built on first use."""
        return self._build_compare_plots()[1]

    def _build_compare_plots(self) -> tuple[MemoryPlot, pg.PlotWidget]:
        if self._compare_plots is None:
            plot_b = MemoryPlot()
            plot_b.setXLink(self.plot_a)
            plot_b.setYLink(self.plot_a)
            plot_b.tileClicked.connect(self.click_tile)
            plot_delta = make_plot(mouse=True)
            plot_delta.setXLink(self.plot_a)
            plot_delta.setMinimumHeight(110)
            for plot in (plot_b, plot_delta):
                plot.getPlotItem().getAxis("left").setWidth(LEFT_AXIS_WIDTH)
                if self.compare_doc is None:
                    # hidden only when not comparing: hidden and shown again, a plot took one
                    # more repaint on every later visit of the report
                    plot.setVisible(False)
            layout = self.chart_page.layout()
            layout.insertWidget(1, plot_b, 1)
            layout.insertWidget(2, plot_delta, 0)
            self._compare_plots = (plot_b, plot_delta)
        return self._compare_plots

    @property
    def variables_plot(self) -> pg.PlotWidget:
        """The Variables tab's chart of the largest variables; built on first use."""
        if self._variables_plot is None:
            plot = make_plot(bottom="bytes", mouse=False)
            plot.setMinimumHeight(120)
            plot.scene().sigMouseMoved.connect(self._on_variables_hover)
            self._variables_chart.layout().insertWidget(0, plot, 1)
            plot.show()  # now, not when the layout's queued show comes round
            self._variables_plot = plot
        return self._variables_plot

    # ------------------------------------------------------------------ state helpers
    def shown_ipus(self, doc: Any) -> list[int]:
        n = data.target(doc).num_ipus
        idx = self.ipu_combo.currentIndex()
        if idx <= 0:
            return list(range(n))
        return [idx - 1] if idx - 1 < n else []

    @property
    def breakdown(self) -> str | None:
        return BREAKDOWNS[self.breakdown_combo.currentText()]

    @property
    def physical(self) -> bool:
        return self.order_combo.currentIndex() == 1

    def build_chart(self, doc: Any) -> TileChart:
        """The stacked values of ``doc`` for the current options (numbers from analyser.core)."""
        mem = data.memory(doc)
        tgt = data.target(doc)
        ipus = self.shown_ipus(doc)
        order = tile_details.tile_order(doc.analysis, self.physical)
        by = self.breakdown
        blocks = []
        if by is None:
            names, colors = ["Total"], [TOTAL_COLOR]
        else:
            series = BREAKDOWN_SERIES[by]
            names = [nice_name(n) for n in series.names]
            colors = [hex_color(series.palette, n) for n in series.names]
        for ipu in ipus:
            if by is None:
                vals = mem.tile_total[ipu][:, None]
            else:
                vals = data.tile_breakdown(doc, ipu, by)[0]
            vals = vals[order]
            if self.gaps_check.isChecked():
                vals = np.concatenate([vals, mem.tile_gaps[ipu][order][:, None]], axis=1)
            blocks.append(vals)
        if self.gaps_check.isChecked():
            names, colors = [*names, "Gaps"], [*colors, GAPS_COLOR]
        values = np.concatenate(blocks) if blocks else np.zeros((0, len(names)))
        n = len(order)
        return TileChart(
            values=values.astype(np.int64),
            names=names,
            colors=colors,
            ipu_of=np.repeat(np.asarray(ipus, np.int64), n),
            tile_of=np.tile(order, len(ipus)),
            sram=int(tgt.sram_per_tile),
            ipus=ipus,
            tiles_per_ipu=n,
        )

    # ------------------------------------------------------------------ refresh
    def show_documents(self, doc: Any, other: Any) -> None:
        self._refreshing = True
        try:
            current = self.ipu_combo.currentIndex()
            self.ipu_combo.clear()
            if doc is not None:
                n = data.target(doc).num_ipus
                if self.compare_doc is not None:
                    n = max(n, data.target(self.compare_doc).num_ipus)
                self.ipu_combo.addItems(["All IPUs"] + [f"IPU {i}" for i in range(n)])
                self.ipu_combo.setCurrentIndex(current if 0 <= current <= n else 0)
        finally:
            self._refreshing = False
        if not self.keep_state:  # a theme switch keeps the selected tiles
            self.selection = np.zeros((0, 2), np.int64)
            self.map_tile = None
            self.tiles_edit.clear()
        self._redraw()

    def _redraw(self, *_args: Any) -> None:
        if self._refreshing:
            return
        doc, cmp = self.document, self.compare_doc
        if cmp is not None or self._compare_plots is not None:
            plot_b, plot_delta = self._build_compare_plots()
            plot_b.setVisible(cmp is not None)
            plot_delta.setVisible(cmp is not None)
        if doc is None:
            self.plot_a.reset()
            if self._compare_plots is not None:
                self.plot_b.reset()
            return
        self.charts = {"A": self.build_chart(doc)}
        if cmp is not None:
            self.charts["B"] = self.build_chart(cmp)
        top = max(float(c.totals.max()) if c.totals.size else 0.0 for c in self.charts.values())
        scale, unit = axis_scale(self.units, top)
        show_max = self.max_check.isChecked()
        tag = (lambda t, d: f"{t}: {d.name}") if cmp is not None else (lambda t, d: "")
        self.plot_a.draw(self.charts["A"], scale, unit, show_max, tag("A", doc), self.units)
        if cmp is not None:
            self.plot_b.draw(self.charts["B"], scale, unit, show_max, tag("B", cmp), self.units)
            self._draw_delta(scale, unit)
        self._scale = scale
        self._show_selection()
        self._fill_totals()
        self._draw_secondary()
        self._fill_details()

    def tile_delta(self) -> np.ndarray:
        """B minus A bytes per displayed tile (over the tiles both profiles have)."""
        a, b = self.charts["A"].totals, self.charts["B"].totals
        n = min(a.size, b.size)
        return b[:n].astype(np.int64) - a[:n].astype(np.int64)

    def _draw_delta(self, scale: float, unit: str) -> None:
        """Per-tile change B - A: increases red, decreases green (one bar item each)."""
        item = self.plot_delta.getPlotItem()
        for it in self.delta_items:
            item.removeItem(it)
        self.delta_items = []
        delta = self.tile_delta() / scale
        x = np.arange(delta.size, dtype=float)
        for mask, key in ((delta > 0, "increase"), (delta < 0, "decrease")):
            if mask.any():
                bars = pg.BarGraphItem(
                    x=x[mask],
                    y0=0,
                    height=delta[mask],
                    width=1.0,
                    brush=pg.mkBrush(hex_color("compare", key)),
                    pen=pg.mkPen(None),
                )
                item.addItem(bars)
                self.delta_items.append(bars)
        item.setLabel("left", f"B−A {unit}")  # short: the chart is low
        # pyqtgraph places an axis title only when the axis is resized: without this the title
        # keeps the place computed for the empty title and its end is cut ("B−A Ki")
        item.getAxis("left").resizeEvent()
        # the same tile axis as the charts above: IPU ticks and separators, not a bare index
        ipu_tile_axis(item, self.charts["A"], self.delta_items)
        span = float(np.abs(delta).max()) if delta.size else 0.0
        item.setYRange(-span * 1.1 if span else -1, span * 1.1 if span else 1, padding=0)

    def _draw_secondary(self) -> None:
        doc = self.document
        if doc is None:
            return
        page = self.view_tabs.currentWidget()
        self.show_part_problem("")
        if page is self.tile_map:
            self.run_part("Tile map", self._draw_tile_map, datasets.TILE_XY, page)
        elif page is self.variables_page:
            self.run_part("Variables", self._fill_variables, datasets.VARIABLES, page)
        elif page is self.memory_map:
            needs = datasets.TILE_LIVENESS + datasets.VARIABLES
            self.run_part("Tile memory map", self._draw_memory_map, needs, page)
        elif page is self.insights_page:
            self.run_part("Memory insights", self._show_insights, (), page)

    def _show_insights(self) -> None:
        docs = [("A: ", self.document), ("B: ", self.compare_doc)]
        items = [(t, data.memory_insights(d)) for t, d in docs if d is not None]
        if len(items) == 1:
            items = [("", items[0][1])]
        self.insights_page.show_insights(items, self.units)

    def mapped_tile(self) -> tuple[int, int] | None:
        """The tile the memory map shows: the last one clicked or typed (first of the
        selection) when its IPU is shown, else the fullest tile of the shown IPUs."""
        doc = self.document
        if doc is None:
            return None
        ipus = self.shown_ipus(doc)
        if self.map_tile is not None and self.map_tile[0] in ipus:
            return self.map_tile
        mem = data.memory(doc)
        if not ipus:
            return None
        used = mem.tile_used[ipus]
        k = int(np.argmax(used))
        return ipus[k // used.shape[1]], k % used.shape[1]

    def _draw_memory_map(self) -> None:
        where = self.mapped_tile()
        if where is None:
            self.memory_map.show_layouts(None, None, self.units)
            return
        ipu, tile = where
        a = data.tile_layout(self.document, ipu, tile)
        b = None
        cmp = self.compare_doc
        fits = cmp is not None and ipu < data.target(cmp).num_ipus
        if fits and tile < data.target(cmp).tiles_per_ipu:
            b = data.tile_layout(cmp, ipu, tile)
        self.memory_map.show_layouts(a, b, self.units)

    def _draw_tile_map(self) -> None:
        """One floor plan per shown IPU (A and B side by side in compare mode, for the first
        shown IPU)."""
        maps = []
        ipus = self.shown_ipus(self.document)
        docs = [("A", self.document)] + ([("B", self.compare_doc)] if self.compare_doc else [])
        if len(docs) > 1:
            ipus = ipus[:1]
        for ipu in ipus:
            for tag, d in docs:
                mem = data.memory(d)
                if ipu >= mem.num_ipus:
                    continue
                used = mem.tile_used[ipu] if self.gaps_check.isChecked() else mem.tile_total[ipu]
                share = used / float(mem.sram_per_tile)
                grid = tile_details.floor_plan(d.analysis, share)
                oom = mem.tile_used[ipu] > mem.sram_per_tile
                title = f"IPU {ipu}" + (f" ({tag}: {d.name})" if len(docs) > 1 else "")
                maps.append((title, grid, oom, ipu, d.analysis))
        self.tile_map.show_maps(maps)

    def _fill_variables(self) -> None:
        docs = [
            (t, d, self.shown_ipus(d))
            for t, d in (("A", self.document), ("B", self.compare_doc))
            if d
        ]
        frame, first = memory_model.variables_table(docs, self.compare_doc is not None)
        self._draw_largest_variables(first)
        cols = columns("variables", self.units, name="Name")
        self.variables_table.set_frame(frame, cols)

    def _draw_largest_variables(self, frame: pd.DataFrame, n: int = 20) -> None:
        """Horizontal bars of the ``n`` largest variables of A, coloured by kind."""
        item = self.variables_plot.getPlotItem()
        item.clear()
        top = frame.head(n)
        if top.empty:
            self.variables_legend.set_entries([])
            return
        scale, unit = axis_scale(self.units, float(top["bytes"].max()))
        y = np.arange(len(top), dtype=float)[::-1]
        kinds = [str(k) for k in top["kind"]]
        for kind in dict.fromkeys(kinds):
            m = np.array([k == kind for k in kinds])
            item.addItem(
                pg.BarGraphItem(
                    x0=0,
                    y=y[m],
                    height=0.7,
                    width=top["bytes"].to_numpy()[m] / scale,
                    brush=pg.mkBrush(hex_color("variable_kinds", kind)),
                    pen=pg.mkPen(None),
                )
            )
        full = [str(x) for x in top["name"]]
        if "ipu" in top.columns and len(set(full)) < len(full):  # the same name on two IPUs
            full = [f"{n} · IPU {i}" for n, i in zip(full, top["ipu"], strict=True)]
        # elided in the middle, distinct (the start says where, the end what); full names in
        # the bars' tooltips
        names = distinct_labels(full, VARIABLE_LABEL_CHARS)
        self._variable_bars = (y, full, top["bytes"].to_numpy())
        item.getAxis("left").setTicks([list(zip(y, names))])
        item.setLabel("bottom", f"bytes ({unit})")
        item.setTitle(f"{len(top)} largest variables", size="9pt")
        item.setYRange(-0.6, len(top) - 0.4, padding=0)
        self.variables_legend.set_entries(
            [(k, hex_color("variable_kinds", k)) for k in dict.fromkeys(kinds)]
        )

    def _on_variables_hover(self, pos) -> None:
        """Tooltip of the bar under the pointer: the variable's full name and bytes."""
        bars = getattr(self, "_variable_bars", None)
        vb = self.variables_plot.getPlotItem().getViewBox()
        if bars is None or not vb.sceneBoundingRect().contains(pos):
            self.variables_plot.setToolTip("")
            return
        y, names, sizes = bars
        p = vb.mapSceneToView(pos)
        hit = np.flatnonzero(np.abs(y - p.y()) <= 0.4)
        if not len(hit):
            self.variables_plot.setToolTip("")
            return
        i = int(hit[0])
        self.variables_plot.setToolTip(f"{names[i]}: {self._fmt_bytes(int(sizes[i]))}")

    def _fmt_bytes(self, v: Any) -> str:
        return fmt_bytes(v, self.units)

    def _fill_totals(self) -> None:
        tree = self.totals_tree
        tree.clear()
        doc, cmp = self.document, self.compare_doc
        a = self.charts["A"]
        if cmp is None:
            tree.set_headers(("Class", "Bytes", "Share"))
            total = float(a.values.sum()) or 1.0
            rows = [
                (
                    name,
                    fmt_bytes(int(a.values[:, j].sum()), self.units),
                    f"{100 * a.values[:, j].sum() / total:.1f}%",
                )
                for j, name in enumerate(a.names)
            ]
            rows.append(("Total", fmt_bytes(int(a.values.sum()), self.units), "100.0%"))
            tree.add_section(f"Memory of {', '.join(f'IPU {i}' for i in a.ipus)}", rows)
            return
        b = self.charts["B"]
        tree.set_headers(("Class", "A", "B", "Change"))
        names = list(dict.fromkeys(a.names + b.names))
        rows = []
        for name in names:
            va = int(a.values[:, a.names.index(name)].sum()) if name in a.names else 0
            vb = int(b.values[:, b.names.index(name)].sum()) if name in b.names else 0
            rows.append(
                (
                    name,
                    fmt_bytes(va, self.units),
                    fmt_bytes(vb, self.units),
                    fmt_change(va, vb, self.units),
                )
            )
        ta, tb = int(a.values.sum()), int(b.values.sum())
        rows.append(
            (
                "Total",
                fmt_bytes(ta, self.units),
                fmt_bytes(tb, self.units),
                fmt_change(ta, tb, self.units),
            )
        )
        ma, mb = data.memory(doc), data.memory(cmp)
        rows.append(
            (
                "Out-of-memory tiles",
                f"{ma.n_oom_tiles:,}",
                f"{mb.n_oom_tiles:,}",
                f"{mb.n_oom_tiles - ma.n_oom_tiles:+,}",
            )
        )
        tree.add_section("Memory of the shown IPUs", rows)

    # ------------------------------------------------------------------ selection
    def click_tile(self, ipu: int, tile: int, shift: bool) -> None:
        if shift:
            self.set_selection(toggle_pair(self.selection, ipu, tile))
        else:
            self.set_selection(np.array([[ipu, tile]], np.int64))

    def select_typed(self) -> None:
        doc = self.document
        if doc is None:
            return
        tgt = data.target(doc)
        ipus = self.shown_ipus(doc)
        try:
            pairs = parse_tile_list(
                self.tiles_edit.text(),
                tgt.num_ipus,
                tgt.tiles_per_ipu,
                ipus[0] if len(ipus) == 1 else 0,
            )
        except TileSelectionError as exc:
            self.error_label.setText(str(exc))
            self.error_label.setVisible(True)
            return
        self.set_selection(pairs)

    def set_selection(self, pairs: np.ndarray) -> None:
        self.error_label.setVisible(False)
        self.selection = unique_pairs(pairs)
        if len(self.selection):
            self.map_tile = (int(self.selection[0, 0]), int(self.selection[0, 1]))
            if self.view_tabs.currentWidget() is self.memory_map:
                self._draw_memory_map()
        ipus = self.shown_ipus(self.document) if self.document is not None else []
        single = ipus[0] if len(ipus) == 1 else (0 if ipus else None)
        self.tiles_edit.setText(
            format_tile_list(self.selection, single) if len(self.selection) else ""
        )
        self._show_selection()
        if len(self.selection) and self.details.currentWidget() is self.totals_tree:
            self.details.setCurrentWidget(self.tiles_table)
        self._fill_details()
        if len(self.selection):
            self.statusMessage.emit(f"{len(self.selection)} tile(s) selected")

    def _show_selection(self) -> None:
        scale = getattr(self, "_scale", 1.0)
        self.plot_a.show_selection(self.selection, scale)
        if self.compare_doc is not None:
            self.plot_b.show_selection(self.selection, scale)

    def _fill_details(self) -> None:
        page = self.details.currentWidget()
        if page is self.totals_tree or self.document is None:
            return
        title = self.details.tabText(self.details.currentIndex())
        self.run_part(
            f"Selected tiles' {title.lower()}", lambda: self._fill_detail_page(page), (), page
        )

    def _fill_detail_page(self, page: Any) -> None:
        docs = [("A", self.document)] + (
            [("B", self.compare_doc)] if self.compare_doc is not None else []
        )
        frames = []
        for tag, d in docs:
            n_ipus = data.target(d).num_ipus
            for ipu in np.unique(self.selection[:, 0]) if len(self.selection) else []:
                if ipu >= n_ipus:
                    continue
                tiles = self.selection[self.selection[:, 0] == ipu, 1]
                if page is self.tiles_table:
                    f = tile_details.tile_memory_rows(
                        d.analysis, int(ipu), tiles, self.breakdown or "category"
                    )
                elif page is self.tile_vars_table:
                    f = tile_details.tile_variables(d.analysis, int(ipu), tiles)
                elif page is self.vertices_table:
                    f = tile_details.tile_vertices(d.analysis, int(ipu), tiles)
                elif page is self.exchanges_table:
                    f = tile_details.tile_exchanges(d.analysis, int(ipu), tiles)
                else:
                    f = tile_details.tile_compute_sets(d.analysis, int(ipu), tiles)
                f = f.assign(ipu=int(ipu))
                if len(docs) > 1:
                    f = f.assign(profile=tag)
                frames.append(f)
        frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        page.set_frame(frame, self._detail_columns(frame))

    def _detail_columns(self, frame: pd.DataFrame) -> list:
        return memory_model.detail_columns(frame, self.units, _memory_class_names())


def _memory_class_names() -> set[str]:
    return {n for series in BREAKDOWN_SERIES.values() for n in series.names}
