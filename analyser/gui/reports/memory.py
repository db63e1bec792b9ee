"""Memory Report: memory per tile for every IPU, broken down by category / region / liveness
class (stacked, one filled path per class), in software or physical tile order, with the max-memory
line, include-gaps option, tile selection (click, shift-click, typed list) and detail tabs for the
selected tiles (tiles, variables, vertices, exchanges, compute sets); a variables view; and a tile
map (memory over the chip floor plan). In compare mode, A and B are drawn one above the other
with linked axes and every table carries both."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

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
    QVBoxLayout,
    QWidget,
)

from analyser.core.quantities import columns
from analyser.core.units import MemoryUnits, axis_scale, fmt_bytes
from analyser.gui.items import BatchedRectsItem, settle_item_bounds
from analyser.gui.model import memory as memory_model
from analyser.gui.model.errors import TileSelectionError
from analyser.gui.model.labels import distinct_labels

# the chart's view-model, where the stacks, deltas and totals are computed (re-exported: tests
# and benchmarks read ``report.charts["A"]``)
from analyser.gui.model.memory import BREAKDOWN_SERIES as BREAKDOWN_SERIES
from analyser.gui.model.memory import BREAKDOWNS as BREAKDOWNS
from analyser.gui.model.memory import TileChart as TileChart
from analyser.gui.model.memory import no_tiles, one_tile
from analyser.gui.model.memory_view import MemorySide, MemoryView, build_memory_view
from analyser.gui.model.selection import (
    format_tile_list,
    parse_tile_list,
    toggle_pair,
    unique_pairs,
)
from analyser.gui.palette import heatmap_colors, hex_color, over_colors
from analyser.gui.plots import LightPlotWidget
from analyser.gui.reports.base import Report, lay_out
from analyser.gui.reports.memory_insights import MemoryInsightsPage
from analyser.gui.reports.memory_map import MemoryMapPage
from analyser.gui.theme import chart_colors, selection_hatch, style_plot
from analyser.gui.widgets import (
    FilterTable,
    KeyValueTree,
    LazyPage,
    LegendLabel,
    cache_static_items,
    chart_panel,
    make_plot,
    tab_widget,
)
from analyser.viewmodels import datasets

if TYPE_CHECKING:
    from analyser.gui.model.document import Document

GAPS_COLOR = "#5f5f5f"
#: One left-axis width for the three linked charts (A, B, B - A), so a tile sits at the same x
#: in each.
LEFT_AXIS_WIDTH = 62
#: Longest variable name on the Variables chart's axis (longer ones are elided in the middle).
VARIABLE_LABEL_CHARS = 32
TOTAL_COLOR = "#4e79a7"
#: The colours of the series that are not in the palette (``TileChart.color_keys`` group None).
OWN_COLORS = {"Total": TOTAL_COLOR, "Gaps": GAPS_COLOR}


def series_colors(chart: TileChart) -> list[str]:
    """The colour of each of ``chart``'s series, from the theme's palette (or
    :data:`OWN_COLORS`): picked when drawn, so a theme switch recolours a cached chart."""
    return [
        OWN_COLORS[name] if group is None else hex_color(group, name)
        for group, name in chart.color_keys
    ]


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
    bounds; the rectangles come from the view-model (:func:`memory_model.stack_rects`).
    (Filled polygons with one vertex per tile edge are far slower in Qt's rasteriser.)"""
    groups, bounds = memory_model.stack_rects(edges, cum, present)
    return [(pg.mkBrush(colors[j]), rects) for j, rects in groups], QtCore.QRectF(*bounds)


#: Least heights of a profile's per-tile chart and of the B - A chart (pixels).
MIN_PLOT_HEIGHT = 130
MIN_DELTA_HEIGHT = 90


class MemoryPlot(LightPlotWidget):
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
        # A, B and B - A fit over the details on a 720-px screen (at 180 the report's minimum
        # height, 667 px in compare mode, was taller than the room there)
        self.setMinimumHeight(MIN_PLOT_HEIGHT)
        cache_static_items(self)

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
        edges, cum = chart.stack(scale)
        present = chart.present()
        if self.stack.scene() is None:
            item.addItem(self.stack)
        colors = series_colors(chart)
        self.stack.set_groups(*stacked_bars(edges, cum, colors, present))
        self.paths = present
        # Legend in category order (bottom of the stack first).
        if self.legend is not None:
            self.legend.set_entries([(chart.names[j], colors[j]) for j in present])
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
        top = max(chart.top() / scale, sram if show_max else 0.0)
        item.getViewBox().setLimits(xMin=-0.5 - n * 0.02, xMax=n - 0.5 + n * 0.02, yMin=0)
        item.setXRange(-0.5, n - 0.5, padding=0.01)
        item.setYRange(0, top * 1.12 if top else 1, padding=0)

    def reset(self) -> None:
        """Show nothing (no document) while keeping the plot's own items."""
        item = self.getPlotItem()
        self.stack.set_groups([], QtCore.QRectF(0.0, 0.0, 0.0, 1.0))
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
        pos = chart.positions_of(pairs)
        if pos.size == 0:
            return
        top = max(chart.top(), float(chart.sram)) / scale
        width = max(1.0, chart.values.shape[0] / 600.0)
        # hatched and outlined, not tinted: a yellow tint turned the categories' colours into
        # others of the legend
        self.selection_item = pg.BarGraphItem(
            x=pos.astype(float),
            y0=0,
            height=top * 1.05,
            width=width,
            brush=selection_hatch(),
            pen=pg.mkPen(chart_colors().foreground, width=1),
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
        return chart.position_at(vb.mapSceneToView(scene_pos).x())

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
    """The sequential scale from 0 to 100% of tile memory, then the over-100% reds (which the
    scale below never takes) up to ``hi`` (> 1 when some tile is out of memory)."""
    stops, over = heatmap_colors(), over_colors()
    colors = [pg.mkColor(c) for c in stops]
    if hi > 1.0:
        colors += [pg.mkColor(c) for c in over]
    return pg.ColorMap(memory_model.map_stops(hi, len(stops), len(over)), colors)


class TileMap(pg.GraphicsLayoutWidget):
    """Memory of one IPU's tiles over the chip floor plan (share of tile SRAM), as an ImageItem."""

    tileClicked = Signal(int, int, bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent=parent)
        self.setBackground(chart_colors().background)
        self.plots: list[tuple[pg.PlotItem, pg.ImageItem, memory_model.FloorPlan]] = []
        self.bar: pg.ColorBarItem | None = None
        self.scene().sigMouseClicked.connect(self._on_click)
        self.setMinimumHeight(200)

    def show_maps(self, maps: list[memory_model.FloorPlan]) -> None:
        """``maps``: the view-model's floor plans (share of tile memory used per tile).

        Colours run through the heat-map palette up to 100% of tile memory; tiles above it (out
        of memory) are drawn in reds, so OOM tiles stand out without markers."""
        self.clear()
        self.plots = []
        hi = memory_model.map_levels(maps)
        cmap = oom_colormap(hi)
        images = []
        per_row = 2 if len(maps) > 1 else 1
        for k, plan in enumerate(maps):
            title = plan.title
            plot = self.addPlot(row=k // per_row, col=k % per_row)
            plot.setTitle(title, size="9pt")
            plot.setAspectLocked(True)
            plot.invertY(True)
            plot.setMenuEnabled(False)
            plot.setLabel("bottom", "column")
            plot.setLabel("left", "row")
            img = pg.ImageItem(plan.grid, levels=(0.0, hi))
            img.setColorMap(cmap)
            plot.addItem(img)
            n_oom = plan.n_oom
            if n_oom:
                plot.setTitle(f"{title}: {n_oom:,} tiles out of memory (red)", size="9pt")
            images.append(img)
            self.plots.append((plot, img, plan))
        if images:
            self.bar = pg.ColorBarItem(
                values=(0.0, hi), colorMap=cmap, label="share of tile memory", interactive=False
            )
            self.bar.setImageItem(images, insert_in=self.plots[-1][0])
            # shares as percentages, 100% (the tile's SRAM) always among the ticks
            self.bar.axis.setTicks([memory_model.map_ticks(hi)])

    def _on_click(self, event) -> None:
        for plot, _img, plan in self.plots:
            vb = plot.getViewBox()
            if not vb.sceneBoundingRect().contains(event.scenePos()):
                continue
            p = vb.mapSceneToView(event.scenePos())
            tile = plan.tile_at(math.floor(p.x()), math.floor(p.y()))
            if tile is not None:
                shift = bool(event.modifiers() & Qt.KeyboardModifier.ShiftModifier)
                self.tileClicked.emit(plan.ipu, tile, shift)
            return


def _lazy_table(placeholder: str) -> LazyPage:
    """A details tab's FilterTable, built on the tab's first visit."""
    return LazyPage(lambda: FilterTable(placeholder))


class MemoryReport(Report):
    title = "Memory Report"
    key = "memory"
    requires = datasets.MEMORY
    data_needs = ("target", "memory", "tile_breakdowns")
    view_builder = staticmethod(build_memory_view)
    #: (the IPU selector's index, the breakdown, physical tile order, gaps included) before
    #: any is chosen (see view_options)
    default_view_options = (0, "category", False, False)
    compare_cost = 3
    compare_part = ("_compare_plots", "plot_b")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.selection = no_tiles()
        self.charts: dict[str, TileChart] = {}
        #: the view-model shown (None before the first)
        self._view: MemoryView | None = None

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
        self.tiles_edit.setPlaceholderText("Tiles: 0-15, 1000, 1:0-15")
        self.tiles_edit.setToolTip(
            "Select tiles: a range (0-15), a tile (1000), or a tile range of one IPU (1:0-15), "
            "comma-separated; Enter selects them."
        )
        # wide enough for its example, narrow enough that the row fits a 1,280-px window
        self.tiles_edit.setMinimumWidth(170)
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
        self.clear_button.clicked.connect(lambda: self.set_selection(no_tiles()))

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
        #: B's chart and the B - A chart, built the first time compare mode draws (
        #: each plot costs 10-20 ms of the report's first visit)
        self._compare_plots: tuple[MemoryPlot, pg.PlotWidget] | None = None
        self.delta_items: list[pg.BarGraphItem] = []
        self.chart_page = chart_panel(self.plot_a, self.legend)
        #: the pages not shown first are built on their first visit (LazyPage)
        self.tile_map = LazyPage(self._build_tile_map)
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

        self.view_tabs = tab_widget()
        self.view_tabs.addTab(self.chart_page, "Memory per tile")
        self.view_tabs.addTab(self.tile_map, "Tile map")
        self.view_tabs.addTab(self.variables_page, "Variables")
        self.memory_map = LazyPage(MemoryMapPage)
        self.view_tabs.addTab(self.memory_map, "Tile memory map")
        self.insights_page = LazyPage(self._build_insights_page)
        self.view_tabs.addTab(self.insights_page, "Insights")
        #: (ipu, tile) the memory map shows: the last tile clicked, else the fullest shown
        self.map_tile: tuple[int, int] | None = None
        self.view_tabs.currentChanged.connect(lambda _i: self._draw_secondary())

        self.totals_tree = KeyValueTree()
        self.tiles_table = _lazy_table("Filter")
        self.tile_vars_table = _lazy_table("Filter variables on the selected tiles")
        self.vertices_table = _lazy_table("Filter vertex types")
        self.exchanges_table = _lazy_table("Filter exchanges")
        self.compute_sets_table = _lazy_table("Filter compute sets")
        self.details = tab_widget()
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

    def _build_tile_map(self) -> TileMap:
        tile_map = TileMap()
        tile_map.tileClicked.connect(self.click_tile)
        return tile_map

    def _build_insights_page(self) -> MemoryInsightsPage:
        page = MemoryInsightsPage()
        page.tileChosen.connect(lambda ipu, tile: self.set_selection(one_tile(ipu, tile)))
        return page

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
            plot_delta.setMinimumHeight(MIN_DELTA_HEIGHT)
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
    def _side(self, doc: Document | None) -> MemorySide | None:
        """The shown view-model's side of ``doc`` (A, or B compared)."""
        view = self._view
        if view is None:
            return None
        return view.b if doc is not None and doc is self.compare_doc else view.a

    def shown_ipus(self, doc: Document | None) -> list[int]:
        side = self._side(doc)
        return [] if side is None else list(side.shown_ipus)

    @property
    def breakdown(self) -> str | None:
        return BREAKDOWNS[self.breakdown_combo.currentText()]

    @property
    def physical(self) -> bool:
        return self.order_combo.currentIndex() == 1

    def build_chart(self, doc: Document | None) -> TileChart:
        """The stacked values of ``doc`` for the current options (the view-model's)."""
        if self.document is None:
            raise ValueError("no profile is shown")
        view = self.view_request(self.document, self.compare_doc).build()
        return view.b.chart if doc is self.compare_doc and view.b is not None else view.a.chart

    def view_options(self) -> tuple[int, str | None, bool, bool]:
        """The IPU selector's index (0 before it is filled), the breakdown, the tile order and
        the gaps: the charts are built for them."""
        return (
            max(self.ipu_combo.currentIndex(), 0),
            self.breakdown,
            self.physical,
            self.gaps_check.isChecked(),
        )

    # ------------------------------------------------------------------ refresh
    def show_documents(self, doc: Document, other: Document | None) -> None:
        if not self.keep_state:  # a theme switch keeps the selected tiles
            self.selection = no_tiles()
            self.map_tile = None
            self.tiles_edit.clear()
        super().show_documents(doc, other)

    def show_view(self, view: MemoryView) -> None:
        self._view = view
        self._refreshing = True
        try:
            self.ipu_combo.clear()
            self.ipu_combo.addItems(["All IPUs"] + [f"IPU {i}" for i in range(view.n_ipus)])
            self.ipu_combo.setCurrentIndex(view.ipu_index)
        finally:
            self._refreshing = False
        self._draw(view)
        if self.isVisible():
            # a view-model arriving after the report was shown: the lines' bounds (max memory,
            # IPU separators) and the layouts the fill changed settle before the first paint
            # (the window settles them after a fill in place), not in extra paints of each plot
            QtCore.QCoreApplication.sendPostedEvents(None, QtCore.QEvent.Type.LayoutRequest)
            settle_item_bounds(self)

    def _redraw(self, *_args: Any) -> None:
        """A choice changed (the IPU, breakdown, order, gaps, the max line): the charts for it,
        built here (the choice is taken at once; a revisit finds them cached)."""
        if self._refreshing:
            return
        doc, cmp = self.document, self.compare_doc
        if doc is not None and self.awaiting_view:
            self.refresh()  # the view-model awaited is for the choices before this one
            return
        if doc is None:
            self._draw(None)
            return
        self._view = self.view_request(doc, cmp).build()
        self._draw(self._view)

    def _draw(self, view: MemoryView | None) -> None:
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
        if view is None:  # pragma: no cover - a document always comes with its view-model
            return
        self.charts = {"A": view.a.chart}
        if view.b is not None:
            self.charts["B"] = view.b.chart
        top = max(c.top() for c in self.charts.values())
        scale, unit = axis_scale(self.units, top)
        show_max = self.max_check.isChecked()
        tag = (lambda s: f"{s.tag}: {s.name}") if view.b is not None else (lambda s: "")
        self.plot_a.draw(self.charts["A"], scale, unit, show_max, tag(view.a), self.units)
        if view.b is not None:
            self.plot_b.draw(self.charts["B"], scale, unit, show_max, tag(view.b), self.units)
            self._draw_delta(scale, unit)
        self._scale = scale
        self._show_selection()
        self._fill_totals()
        self._draw_secondary()
        self._fill_details()

    def tile_delta(self) -> np.ndarray:
        """B minus A bytes per displayed tile (over the tiles both profiles have)."""
        return memory_model.tile_delta(self.charts["A"], self.charts["B"])

    def _draw_delta(self, scale: float, unit: str) -> None:
        """Per-tile change B - A: increases red, decreases green (one bar item each)."""
        item = self.plot_delta.getPlotItem()
        for it in self.delta_items:
            item.removeItem(it)
        self.delta_items = []
        bars_of = memory_model.delta_bars(self.tile_delta(), scale)
        for (x, height), key in ((bars_of.increase, "increase"), (bars_of.decrease, "decrease")):
            if len(x):
                bars = pg.BarGraphItem(
                    x=x,
                    y0=0,
                    height=height,
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
        span = bars_of.span
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
        if self.document is None:
            return
        items = memory_model.insights_of(self.document, self.compare_doc)
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
        return memory_model.fullest_tile(doc, ipus)

    def _draw_memory_map(self) -> None:
        where, doc = self.mapped_tile(), self.document
        if where is None or doc is None:  # the mapped tile is None without a document
            self.memory_map.show_layouts(None, None, self.units)
            return
        ipu, tile = where
        a, b = memory_model.tile_layouts(doc, self.compare_doc, ipu, tile)
        self.memory_map.show_layouts(a, b, self.units)

    def _draw_tile_map(self) -> None:
        """One floor plan per shown IPU (A and B side by side in compare mode, for the first
        shown IPU)."""
        if self.document is None:
            return
        docs = [("A", self.document)] + ([("B", self.compare_doc)] if self.compare_doc else [])
        self.tile_map.show_maps(
            memory_model.floor_plans(
                docs, self.shown_ipus(self.document), self.gaps_check.isChecked()
            )
        )

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
        bars = memory_model.largest_variables(frame, n)
        if bars is None:
            self.variables_legend.set_entries([])
            return
        scale, unit = axis_scale(self.units, float(bars.sizes.max()))
        kinds = bars.by_kind()
        for kind, m in kinds:
            item.addItem(
                pg.BarGraphItem(
                    x0=0,
                    y=bars.y[m],
                    height=0.7,
                    width=bars.sizes[m] / scale,
                    brush=pg.mkBrush(hex_color("variable_kinds", kind)),
                    pen=pg.mkPen(None),
                )
            )
        # elided in the middle, distinct (the start says where, the end what); full names in
        # the bars' tooltips
        names = distinct_labels(bars.names, VARIABLE_LABEL_CHARS)
        self._variable_bars = bars
        item.getAxis("left").setTicks([list(zip(bars.y, names))])
        item.setLabel("bottom", f"bytes ({unit})")
        item.setTitle(f"{len(bars.y)} largest variables", size="9pt")
        item.setYRange(-0.6, len(bars.y) - 0.4, padding=0)
        self.variables_legend.set_entries([(k, hex_color("variable_kinds", k)) for k, _m in kinds])

    def _on_variables_hover(self, pos) -> None:
        """Tooltip of the bar under the pointer: the variable's full name and bytes."""
        bars = getattr(self, "_variable_bars", None)
        vb = self.variables_plot.getPlotItem().getViewBox()
        if bars is None or not vb.sceneBoundingRect().contains(pos):
            self.variables_plot.setToolTip("")
            return
        i = bars.bar_at(vb.mapSceneToView(pos).y())
        if i is None:
            self.variables_plot.setToolTip("")
            return
        self.variables_plot.setToolTip(f"{bars.names[i]}: {self._fmt_bytes(int(bars.sizes[i]))}")

    def _fmt_bytes(self, v: Any) -> str:
        return fmt_bytes(v, self.units)

    def _fill_totals(self) -> None:
        tree = self.totals_tree
        tree.clear()
        view = self._view
        if view is None:
            return
        if view.b is None:
            headers, title, rows = memory_model.totals_section(view.a.chart, self.units)
        else:
            headers, title, rows = memory_model.compare_totals_section(
                view.a.chart, view.b.chart, view.a.n_oom_tiles, view.b.n_oom_tiles, self.units
            )
        tree.set_headers(headers)
        tree.add_section(title, rows)

    # ------------------------------------------------------------------ selection
    def show_place(self, place) -> bool:
        """A tile ("IPU 1 tile 221": selected, its details shown), the Variables tab
        ("Variables (stash)": filtered by the kind) or the per-tile chart ("by category")."""
        at = place.tile()
        if at is not None:
            self.view_tabs.setCurrentWidget(self.chart_page)
            self.set_selection(memory_model.one_tile(*at))
            self.details.setCurrentWidget(self.tiles_table)
            return len(self.selection) == 1
        item = place.item.lower()
        if item.startswith("variables"):
            self.view_tabs.setCurrentWidget(self.variables_page)
            kind = item.partition("(")[2].rstrip(")").strip()
            self.variables_table.filter.setText(kind)
            return True
        if item.startswith("by category"):
            self.breakdown_combo.setCurrentText("Category")
            self.view_tabs.setCurrentWidget(self.chart_page)
            return True
        return False

    def click_tile(self, ipu: int, tile: int, shift: bool) -> None:
        if shift:
            self.set_selection(toggle_pair(self.selection, ipu, tile))
        else:
            self.set_selection(one_tile(ipu, tile))

    def select_typed(self) -> None:
        doc, view = self.document, self._view
        if doc is None or view is None:
            return
        ipus = self.shown_ipus(doc)
        try:
            pairs = parse_tile_list(
                self.tiles_edit.text(),
                view.a.num_ipus,
                view.a.tiles_per_ipu,
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
        if self.document is None:  # checked by _fill_details; the part may run later
            return
        docs = [("A", self.document)] + (
            [("B", self.compare_doc)] if self.compare_doc is not None else []
        )
        table = {
            self.tiles_table: "tiles",
            self.tile_vars_table: "variables",
            self.vertices_table: "vertices",
            self.exchanges_table: "exchanges",
        }.get(page, "compute_sets")
        frame = memory_model.selected_tiles_table(docs, self.selection, table, self.breakdown)
        page.set_frame(frame, self._detail_columns(frame))

    def _detail_columns(self, frame: pd.DataFrame) -> list:
        return memory_model.detail_columns(frame, self.units, memory_model.memory_class_names())
