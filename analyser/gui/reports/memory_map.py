"""The Memory Report's per-tile memory map: the address layout of one tile over the run
(addresses up, liveness steps across), its regions (non-interleaved, interleaved, overflowed),
the code and other always-live categories, every variable as a block of its bytes over its live
steps, and the gaps. The layout is :func:`analyser.core.memory_layout.tile_layout`'s: the
simulator's modelled allocation, which the map says in its header; its blocks, colours and texts
are the view-model's (:mod:`analyser.gui.model.memory`); this module only draws them."""

from __future__ import annotations

from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QPen
from PySide6.QtWidgets import QGraphicsRectItem, QLabel, QWidget

from analyser.core.units import MemoryUnits, axis_scale, fmt_bytes
from analyser.gui.items import BatchedRectsItem
from analyser.gui.model import memory as memory_model
from analyser.gui.model.memory import TileLayout

# what the map says of a layout is the view-model's (re-exported: tests import them from here)
from analyser.gui.model.memory import block_text as block_text
from analyser.gui.model.memory import layout_title as layout_title
from analyser.gui.palette import hex_color
from analyser.gui.theme import chart_colors
from analyser.gui.widgets import LegendLabel, headed_column, make_plot, nice_name

#: Region bands behind the blocks (palette memory_regions), drawn faint.
REGION_ALPHA = 40


class MemoryMapPlot(QWidget):
    """The map of one tile of one profile; ``blockClicked`` carries the block's text."""

    blockClicked = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        lay, self.title = headed_column(self, margin=0)
        self.plot = make_plot(bottom="liveness step", mouse=True)
        self.plot.getPlotItem().getAxis("left").setWidth(62)
        # step numbers take no SI prefix (the empty plot's "(x0.001)" put the axis title off
        # centre: pyqtgraph centres it for the text it has when the axis is resized)
        self.plot.getPlotItem().getAxis("bottom").enableAutoSIPrefix(False)
        lay.addWidget(self.plot, 1)
        self.rects = BatchedRectsItem()
        self.rects.setZValue(1)
        self.plot.addItem(self.rects)
        self.extras: list[Any] = []
        self.highlight = QGraphicsRectItem()
        self.highlight.setZValue(3)
        self.highlight.setBrush(QBrush(Qt.BrushStyle.NoBrush))
        self.highlight.setVisible(False)
        self.plot.addItem(self.highlight)
        self.layout_: TileLayout | None = None
        self.scale = 1.0
        self.units = MemoryUnits.KIB
        self.selected: Any = None
        self.plot.scene().sigMouseClicked.connect(self._on_click)

    def show_layout(self, layout: TileLayout | None, units: MemoryUnits, title: str = "") -> None:
        item = self.plot.getPlotItem()
        for it in self.extras:
            item.removeItem(it)
        self.extras = []
        self.highlight.setVisible(False)
        self.selected = None
        self.layout_ = layout
        self.units = units
        if layout is None:
            self.rects.set_groups([])
            self.title.setText(title)
            return
        top = max(layout.sram, layout.top_address)
        self.scale, unit = axis_scale(units, top)
        blocks = memory_model.layout_blocks(layout, self.scale)
        out = []
        for g, n, dark, m in blocks.colour_groups():
            base = QColor(hex_color(g, n))
            out.append((QBrush(base.darker(118) if dark else base), blocks.rects[m]))
        n_steps = max(1, layout.n_steps)
        self.rects.set_groups(out, QRectF(0, 0, n_steps, top / self.scale))
        # regions: faint bands with their names (on the background colour, over the blocks),
        # the tile's end dashed
        bg = QColor(chart_colors().background)
        for region, lo, hi in layout.regions:
            color = QColor(hex_color("memory_regions", region))
            color.setAlpha(REGION_ALPHA)
            band = pg.LinearRegionItem(
                (lo / self.scale, hi / self.scale),
                orientation="horizontal",
                movable=False,
                brush=QBrush(color),
                pen=pg.mkPen(None),
            )
            band.setZValue(0)
            label = pg.TextItem(
                f"{nice_name(region).lower()} ({fmt_bytes(hi - lo, units)})",
                color=hex_color("memory_regions", region),
                anchor=(1, 0),
                fill=pg.mkBrush(QColor(bg.red(), bg.green(), bg.blue(), 200)),
            )
            label.setPos(n_steps, hi / self.scale)
            label.setZValue(4)
            for it in (band, label):
                item.addItem(it)
                self.extras.append(it)
        end = pg.InfiniteLine(
            pos=layout.sram / self.scale,
            angle=0,
            pen=pg.mkPen(hex_color("chart", "max_memory_line"), style=Qt.PenStyle.DashLine),
        )
        peak = layout.peak_step()
        peak_line = pg.InfiniteLine(
            pos=peak + 0.5, angle=90, pen=pg.mkPen(hex_color("chart", "peak_marker"), width=1)
        )
        for it in (end, peak_line):
            it.setZValue(2)
            item.addItem(it)
            self.extras.append(it)
        item.setLabel("left", f"address ({unit})")
        item.setXRange(0, n_steps, padding=0.01)
        item.setYRange(0, top / self.scale, padding=0.02)
        self.title.setText(title)

    def select_at(self, step: float, address: float) -> Any:
        """Select the block at liveness ``step`` and byte ``address``; returns its row."""
        lay = self.layout_
        if lay is None:
            return None
        row = lay.block_at(address, step)
        self.selected = row
        if row is None:
            self.highlight.setVisible(False)
            self.blockClicked.emit(
                f"free memory at 0x{int(address):05x}, step {round(step):,}"
                if 0 <= address < lay.sram
                else ""
            )
            return None
        pen = QPen(QColor(hex_color("chart", "selection")))
        pen.setCosmetic(True)
        pen.setWidth(2)
        self.highlight.setPen(pen)
        self.highlight.setRect(QRectF(*memory_model.block_rect(row, self.scale)))
        self.highlight.setVisible(True)
        self.blockClicked.emit(block_text(lay, row, self.units))
        return row

    def _on_click(self, event) -> None:
        vb = self.plot.getPlotItem().getViewBox()
        if not vb.sceneBoundingRect().contains(event.scenePos()):
            return
        p = vb.mapSceneToView(event.scenePos())
        self.select_at(p.x(), p.y() * self.scale)


def legend_entries(layouts: list[TileLayout]) -> list[tuple[str, str]]:
    """(name, colour) of every category and variable kind drawn (the regions are named on
    their bands)."""
    return [
        (nice_name(n) if g == "memory_categories" else n, hex_color(g, n))
        for g, n in memory_model.legend_keys(layouts)
    ]


class MemoryMapPage(QWidget):
    """The tab: a header saying what the map is, A's map (and B's in compare mode), a legend
    and the clicked block's description."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        lay, self.header = headed_column(
            self,
            "Modelled layout: the profile stores bytes per tile, category and variable, not "
            "addresses, so the simulator lays them out with a documented policy (code first in "
            "non-interleaved memory; always-live variables, then the others sharing addresses "
            "when their live ranges do not overlap, largest first in interleaved memory). It is "
            "not a compiler's allocation. Click a block to name it; click a tile in "
            "'Memory per tile' to map it.",
        )
        #: A's and B's maps, built when first drawn (B's in compare mode only): each is a
        #: pyqtgraph plot, 10-20 ms to build, and the Memory Report opens on another tab
        self._map_a: MemoryMapPlot | None = None
        self._map_b: MemoryMapPlot | None = None
        self.legend = LegendLabel()
        lay.addWidget(self.legend)
        self.details = QLabel("")
        self.details.setWordWrap(True)
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.details)
        self.compare = False

    @property
    def map_a(self) -> MemoryMapPlot:
        """A's map (the only one outside compare mode); built on first use."""
        if self._map_a is None:
            self._map_a = self._add_map(1, "A: ")
        return self._map_a

    @property
    def map_b(self) -> MemoryMapPlot:
        """B's map, under A's, its axes linked to A's; built on first use."""
        if self._map_b is None:
            a = self.map_a
            self._map_b = self._add_map(2, "B: ")
            self._map_b.setVisible(self.compare)
            self._map_b.plot.setXLink(a.plot)
            self._map_b.plot.setYLink(a.plot)
        return self._map_b

    def _add_map(self, index: int, tag: str) -> MemoryMapPlot:
        m = MemoryMapPlot()
        m.blockClicked.connect(lambda text: self._clicked(text, tag))
        self.layout().insertWidget(index, m, 1)
        m.show()  # now, not when the layout's queued show comes round
        return m

    def _clicked(self, text: str, tag: str) -> None:
        self.details.setText((tag if self.compare else "") + text)

    def show_layouts(self, a: TileLayout | None, b: TileLayout | None, units: MemoryUnits) -> None:
        self.compare = b is not None
        if b is not None or self._map_b is not None:
            self.map_b.setVisible(b is not None)
        tag = "A: " if b is not None else ""
        self.map_a.show_layout(a, units, layout_title(a, units, tag) if a is not None else "")
        if b is not None:
            self.map_b.show_layout(b, units, layout_title(b, units, "B: "))
            # one address axis for both (linked): up to the higher of the two tops, so an
            # overflow above the tile's end shows in either
            top = max(max(x.sram, x.top_address) for x in (a, b) if x is not None)
            scale = self.map_a.scale
            self.map_a.plot.getPlotItem().setYRange(0, top / scale, padding=0.02)
        self.legend.set_entries(legend_entries([x for x in (a, b) if x is not None]))
        self.details.setText("")


__all__ = ["MemoryMapPage", "MemoryMapPlot", "block_text", "layout_title", "legend_entries"]
