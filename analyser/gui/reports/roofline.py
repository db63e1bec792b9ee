"""Roofline: every executed operation under the roofs of its IPU (``analyser.core.roofline``):
FLOPs per byte exchanged against FLOPs per cycle achieved, on log axes, with the AMP peak of the
run's precision and the exchange roof; points coloured by the roof that binds them (the trace's
colours of OnTileExecute, DoExchange and StreamCopyMid). Clicking a point names the operation.
In compare mode B's operations are drawn as triangles over A's circles, each with its roofs."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget

from analyser.gui.axes import LogAxis
from analyser.gui.model.operations import RooflinePoints
from analyser.gui.model.roofline_view import RooflineView, build_roofline_view
from analyser.gui.palette import hex_color
from analyser.gui.reports.base import Report
from analyser.gui.theme import style_plot
from analyser.gui.widgets import LegendLabel, make_plot

#: Colour of each binding roof: the trace's colour of the step type that roof limits.
LIMIT_STEP_TYPE = {
    "compute": "OnTileExecute",
    "exchange": "DoExchange",
    "host link": "StreamCopyMid",
}


class RooflineReport(Report):
    """Achieved FLOPs per cycle of every operation against its exchange intensity."""

    title = "Roofline"
    key = "roofline"
    needs_execution = True
    data_needs = ("target", "roofline")
    view_builder = staticmethod(build_roofline_view)
    compare_cost = 1

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = self.content_column()
        self.header = QLabel()
        self.header.setWordWrap(True)
        self.plot = make_plot("FLOPs per cycle (log)", "FLOPs per byte exchanged (log)")
        item = self.plot.getPlotItem()
        # decades labelled, minor ticks without text (pyqtgraph's log labels crowded)
        for side in ("bottom", "left"):
            label = item.getAxis(side).labelText
            axis = LogAxis(side)
            item.setAxisItems({side: axis})
            axis.setLabel(label)
        style_plot(self.plot)
        item.showGrid(x=True, y=True, alpha=0.2)
        #: what the points' colours (and, comparing, shapes) mean: in a real X server the orange
        #: and blue points had no key
        self.legend = LegendLabel()
        self.picked = QLabel("Click a point to name its operation.")
        self.picked.setWordWrap(True)
        layout.addWidget(self.header)
        layout.addWidget(self.plot, 1)
        layout.addWidget(self.legend)
        layout.addWidget(self.picked)
        self.points: dict[str, pg.ScatterPlotItem] = {}

    def chart_widget(self) -> QWidget:
        return self.plot

    def clear(self) -> None:
        self.plot.getPlotItem().clear()
        self.points = {}
        self.legend.set_entries([])

    def show_view(self, view: RooflineView) -> None:
        self.clear()
        for side in view.sides:
            if side.points is not None:
                self._draw(side.side, side.points, "t" if side.side == "B" else "o")
        self.header.setText("\n".join(s.header for s in view.sides))
        self.legend.set_entries(self._legend(set(view.limits), view.compare))

    @staticmethod
    def _legend(limits: set[str], compare: bool) -> list[tuple[str, str]]:
        """(name, colour) of each binding roof drawn, then the roofs' line."""
        entries = [
            (f"{lim}-bound", hex_color("step_types", step_type))
            for lim, step_type in LIMIT_STEP_TYPE.items()
            if lim in limits
        ]
        roofs = "roofs (A solid, B dashed; A circles, B triangles)" if compare else "roofs"
        return [*entries, (roofs, hex_color("chart", "max_memory_line"))]

    def _draw(self, side: str, pts: RooflinePoints, symbol: str) -> None:
        """Draw one profile's points and roofs."""
        # one brush per binding roof, shared by its points: pyqtgraph renders a symbol per
        # distinct brush object (a brush per point rendered 1,244 symbols for two profiles)
        by_limit = {
            lim: pg.mkBrush(hex_color("step_types", LIMIT_STEP_TYPE[lim]))
            for lim in set(pts.limits)
        }
        brushes = [by_limit[lim] for lim in pts.limits]
        spots = pg.ScatterPlotItem(
            x=pts.x, y=pts.y, symbol=symbol, size=8, brush=brushes, pen=None, data=pts.names
        )
        spots.sigClicked.connect(lambda _item, p, _ev: self._pick(side, p))
        self.plot.addItem(spots)
        self.points[side] = spots
        # the roofs drawn as the memory report draws its limit (B's dashed)
        style = Qt.PenStyle.DashLine if side == "B" else Qt.PenStyle.SolidLine
        pen = pg.mkPen(hex_color("chart", "max_memory_line"), width=2, style=style)
        self.plot.addItem(pg.PlotDataItem(pts.roof_x, pts.roof_y, pen=pen))

    def _pick(self, side: str, pts) -> None:
        if len(pts):
            p = pts[0]
            self.picked.setText(
                f"{side}: {p.data()}: {10 ** p.pos().x():,.3g} FLOPs per byte exchanged, "
                f"{10 ** p.pos().y():,.0f} FLOPs per cycle."
            )
