"""The Execution Trace's overview strip: the whole run above the lanes (Perfetto's overview)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QColor

from analyser.gui.axes import CycleAxis, fixed_prefix_axes
from analyser.gui.model.trace import TraceWindow
from analyser.gui.palette import heatmap_colors, qcolor
from analyser.gui.plots import LightPlotWidget
from analyser.gui.reports.trace.lane_items import LaneAxis
from analyser.gui.theme import style_plot


class OverviewStrip(LightPlotWidget):
    """The whole run in a strip above the lanes (Perfetto's overview): the busy share of each
    IPU per pixel (one row per IPU, the heat map's colours), the timeline's visible window
    marked as a band. Click to centre the view there, drag the band to move it, drag its
    edges to resize it. Computed once per profile from the trace's pyramids
    (:meth:`TraceWindow.overview`)."""

    #: the user moved the window: (t0, t1) for the timeline
    windowRequested = Signal(float, float)

    #: Buckets of the overview (a few per pixel of a wide screen).
    BUCKETS = 1200

    def __init__(self, parent=None) -> None:
        super().__init__(
            parent,
            enableMenu=False,
            axisItems={"left": LaneAxis(), "bottom": CycleAxis("bottom")},
        )
        style_plot(self)
        fixed_prefix_axes(self)  # lane labels, no units
        plot = self.getPlotItem()
        plot.setMenuEnabled(False)
        plot.hideButtons()
        plot.hideAxis("bottom")
        vb = plot.getViewBox()
        vb.setMouseEnabled(x=False, y=False)
        vb.invertY(True)
        vb.setDefaultPadding(0.0)
        self.image = pg.ImageItem(axisOrder="row-major")
        stops = heatmap_colors()
        cmap = pg.ColorMap(np.linspace(0, 1, len(stops)), [QColor(c) for c in stops])
        self.image.setLookupTable(cmap.getLookupTable(nPts=256))
        plot.addItem(self.image)
        self.band = pg.LinearRegionItem(
            (0, 1), movable=True, brush=qcolor("chart", "selection", 70), pen=pg.mkPen("#333")
        )
        self.band.setZValue(10)
        plot.addItem(self.band)
        self.band.sigRegionChanged.connect(self._band_moved)
        self.scene().sigMouseClicked.connect(self._on_click)
        self.overview = None
        self._updating = False
        self.setFixedHeight(54)
        self.setToolTip(
            "The whole run: share of each IPU's time computing or exchanging (dark: waiting "
            "in syncs). Click to move the view there; drag the band."
        )

    def set_trace(self, trace: TraceWindow | None) -> None:
        self.overview = None if trace is None else trace.overview(self.BUCKETS)
        if self.overview is None:
            self.image.clear()
            return
        ov = self.overview
        n = ov.busy.shape[0]
        self.image.setImage(ov.busy, autoLevels=False, levels=(0.0, 1.0))
        self.image.setRect(QRectF(ov.t0, 0, ov.t1 - ov.t0, n))
        axis = self.getPlotItem().getAxis("left")
        axis.set_labels([(n / 2, "Overview")])
        vb = self.getPlotItem().getViewBox()
        vb.setLimits(xMin=None, xMax=None)
        vb.setRange(xRange=(ov.t0, ov.t1), yRange=(0, n), padding=0)

    def align_left(self, width: int) -> None:
        """Give the label axis ``width`` pixels, as the timeline's, so cycles line up."""
        self.getPlotItem().getAxis("left").setWidth(width)

    def show_window(self, t0: float, t1: float) -> None:
        """Mark the timeline's visible window."""
        self._updating = True
        try:
            self.band.setRegion((t0, t1))
        finally:
            self._updating = False

    def _band_moved(self, *args) -> None:
        if self._updating or self.overview is None:
            return
        a, b = self.band.getRegion()
        if b > a:
            self.windowRequested.emit(float(a), float(b))

    def _on_click(self, event) -> None:
        if self.overview is None or event.button() != Qt.MouseButton.LeftButton:
            return
        vb = self.getPlotItem().getViewBox()
        if not vb.sceneBoundingRect().contains(event.scenePos()):
            return
        x = float(vb.mapSceneToView(event.scenePos()).x())
        a, b = self.band.getRegion()
        if a <= x <= b:
            return  # a click on the band itself (or the end of a drag of it)
        half = (b - a) / 2
        self.windowRequested.emit(x - half, x + half)
