"""BSP view of the Execution Trace: tiles x time for one IPU, x linked with the timeline."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from analyser.core.trace_window import BspMatrix
from analyser.gui.axes import use_cycle_axis
from analyser.gui.palette import heatmap_colors
from analyser.gui.reports.trace.timeline import LANE_AXIS_PX
from analyser.gui.theme import style_plot


class BspView(QWidget):
    """Tiles x time heat map of per-tile busy share for one IPU (x linked with the timeline)."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        self.label = QLabel("")
        self.label.setWordWrap(True)
        lay.addWidget(self.label)
        self.plot = pg.PlotWidget()
        style_plot(self.plot)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.setLabel("left", "tile")
        self.plot.getPlotItem().getAxis("left").setWidth(LANE_AXIS_PX)
        self.plot.setLabel("bottom", "cycles")
        use_cycle_axis(self.plot, "bottom")
        self.plot.getViewBox().setMouseEnabled(x=False, y=True)
        self.plot.getViewBox().invertY(True)
        self.image = pg.ImageItem(axisOrder="row-major")
        stops = heatmap_colors()
        cmap = pg.ColorMap(np.linspace(0, 1, len(stops)), [QColor(c) for c in stops])
        self.image.setLookupTable(cmap.getLookupTable(nPts=256))
        self.plot.addItem(self.image)
        # the colour scale as a line of text above the plot: a colour bar inside the plot would
        # narrow it, and a cycle would no longer sit at the same x as in the timeline above
        swatches = "".join(
            f"<span style='color:{c}; font-size:14px;'>&#9632;</span>"
            for c in (cmap.map(v, mode="qcolor").name() for v in np.linspace(0, 1, 11))
        )
        self.scale = QLabel(f"busy share of each time bucket: 0% {swatches} 100%")
        self.scale.setTextFormat(Qt.TextFormat.RichText)
        lay.insertWidget(1, self.scale)
        lay.addWidget(self.plot, 1)
        self.matrix: BspMatrix | None = None
        #: True when a timeline sets the cycle range (the report lines the two up)
        self.follow_timeline = False

    def show_matrix(self, m: BspMatrix | None, message: str = "") -> None:
        self.matrix = m
        if m is None:
            self.image.clear()
            self.label.setText(message)
            return
        tiles = m.values.shape[1]
        self.image.setImage(m.values.T, autoLevels=False, levels=(0.0, 1.0))
        self.image.setRect(pg.QtCore.QRectF(m.t0, 0, m.t1 - m.t0, tiles))
        if not self.follow_timeline:  # in the Trace report, the timeline leads
            self.plot.setXRange(m.t0, m.t1, padding=0)
        self.plot.setYRange(0, tiles, padding=0)
        busy = m.values.mean() if m.values.size else 0.0
        self.label.setText(
            f"BSP view of IPU {m.ipu}: {m.n_steps:,} steps on {tiles:,} tiles in {m.values.shape[0]} "
            f"time buckets; mean tile busy share {100 * busy:.1f}% (dark = idle, waiting for the "
            f"sync; bright = computing or exchanging)."
        )
