"""The Execution Trace timeline's plot parts: the grid lines, the view box that turns a drag
on the time axis into a range selection, and the lane-label axis (click to fold, right click
for the lane menu)."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QLineF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QPainter, QPen

from analyser.gui.plots import LightAxisItem
from analyser.gui.theme import chart_colors

#: Width of the lane-label axis (the BSP view's axis matches it so x positions line up).
LANE_AXIS_PX = 230


class GridLines(pg.GraphicsObject):
    """Vertical lines at the bottom axis' major ticks, drawn with one ``drawLines`` call (the
    pyqtgraph grid re-renders the axis picture on every paint, which costs more than the steps)."""

    def __init__(self, plot: pg.PlotItem) -> None:
        super().__init__()
        self.plot = plot
        self.setZValue(-100)
        plot.getViewBox().sigRangeChanged.connect(self._changed)

    @property
    def pen(self) -> QPen:
        """A faint line in the current theme's foreground (read at paint: themes switch)."""
        color = QColor(chart_colors().foreground)
        color.setAlpha(40)
        pen = QPen(color)
        pen.setCosmetic(True)
        return pen

    def _changed(self, *args) -> None:
        self.prepareGeometryChange()

    def boundingRect(self) -> QRectF:
        return self.plot.getViewBox().viewRect()

    def paint(self, painter: QPainter, *args) -> None:
        vb = self.plot.getViewBox()
        (x0, x1), (y0, y1) = vb.viewRange()
        axis = self.plot.getAxis("bottom")
        levels = axis.tickValues(x0, x1, max(1.0, vb.width()))
        xs = [x for _spacing, values in levels[:2] for x in values]
        if not xs:
            return
        painter.setPen(self.pen)
        painter.drawLines([QLineF(x, y0, x, y1) for x in xs])


class TraceViewBox(pg.ViewBox):
    """The timeline's view box: a drag on the time axis, or a Shift + drag over the lanes,
    selects a range of cycles (handed to ``range_drag``) instead of panning."""

    def __init__(self) -> None:
        super().__init__(enableMenu=False)  # the timeline has no context menu: none to build
        self.range_drag = None

    def mouseDragEvent(self, ev, axis=None) -> None:
        if (
            self.range_drag is not None
            and ev.button() == Qt.MouseButton.LeftButton
            and (axis == 0 or (axis is None and ev.modifiers() & Qt.KeyboardModifier.ShiftModifier))
        ):
            ev.accept()
            self.range_drag(ev)
            return
        super().mouseDragEvent(ev, axis)


def light_fill(color: QColor) -> bool:
    """True when dark text reads better than white on ``color`` (relative luminance)."""
    return 0.299 * color.redF() + 0.587 * color.greenF() + 0.114 * color.blueF() > 0.6


class LaneAxis(LightAxisItem):
    """Left axis showing lane labels at lane centres; a click on a label is handed to
    ``clicked(y)`` (y in lanes) when set (the timeline folds lane groups), a right click to
    ``menu(y, screen_pos)`` (the timeline's lane menu)."""

    def __init__(self) -> None:
        super().__init__("left")
        self._labels: list[tuple[float, str]] = []
        self.clicked = None
        self.menu = None
        self.setWidth(LANE_AXIS_PX)
        font = QFont()
        font.setPointSize(8)
        self.setStyle(tickFont=font, tickTextOffset=4)

    def set_labels(self, labels: list[tuple[float, str]]) -> None:
        self._labels = labels
        self.setTicks([labels, []])

    def mouseClickEvent(self, event) -> None:
        vb = self.linkedView()
        right = event.button() == Qt.MouseButton.RightButton and self.menu is not None
        if vb is None or not (
            right or (self.clicked and event.button() == Qt.MouseButton.LeftButton)
        ):
            super().mouseClickEvent(event)
            return
        event.accept()
        y = float(vb.mapSceneToView(event.scenePos()).y())
        if right:
            self.menu(y, event.screenPos().toPoint())
        else:
            self.clicked(y)
