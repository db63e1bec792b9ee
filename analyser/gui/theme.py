"""Light and dark themes: the Qt style sheets in ``assets/themes`` plus matching chart colours."""

from __future__ import annotations

import gc
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication, QWidget


@dataclass(frozen=True)
class ChartColors:
    """A theme's chart colours: background, axes and text, and the grid's opacity."""

    background: str
    foreground: str
    grid_alpha: float


CHART_COLORS = {
    "light": ChartColors("#ffffff", "#303030", 0.25),
    "dark": ChartColors("#202226", "#d0d0d0", 0.3),
}
#: The themes' names (each has a style sheet in ``assets/themes``).
THEMES = tuple(CHART_COLORS)

_current = "light"


def current_theme() -> str:
    return _current


def chart_colors() -> ChartColors:
    return CHART_COLORS[_current]


def label_fill(alpha: int = 215):
    """A brush of the chart background, nearly opaque: put behind a label drawn over data so
    that the lines under it do not cross its text."""
    color = QColor(chart_colors().background)
    color.setAlpha(alpha)
    return pg.mkBrush(color)


def style_sheet(name: str) -> str:
    if name not in THEMES:
        raise ValueError(f"unknown theme {name!r}; choose light or dark")
    text = resources.files("assets").joinpath("themes", f"{name}.qss").read_text(encoding="utf-8")
    icons = Path(str(resources.files("assets").joinpath("icons"))).as_posix()
    return text.replace("@ICONS@", icons)


def style_plot(plot: pg.PlotWidget) -> None:
    """Apply the current chart colours to one pyqtgraph plot widget (every report's plots get
    them when built), and keep the plot from repainting whole when it is shown
    (:func:`no_repaint_on_activation`: a pass of its own per plot)."""
    no_repaint_on_activation(plot)
    colors = chart_colors()
    plot.setBackground(colors.background)
    item = plot.getPlotItem()
    for name in ("left", "bottom", "right", "top"):
        axis = item.getAxis(name)
        axis.setPen(pg.mkPen(colors.foreground))
        axis.setTextPen(pg.mkPen(colors.foreground))
        # an axis draws its grid lines: below the data, not across the bars
        axis.setZValue(-1)


def apply_theme(name: str, root: QWidget | None = None) -> None:
    """Switch to theme ``name``: style sheet on the application, chart colours on every plot."""
    global _current
    sheet = style_sheet(name)
    _current = name
    colors = CHART_COLORS[name]
    pg.setConfigOptions(background=colors.background, foreground=colors.foreground)
    app = QApplication.instance()
    if app is not None and root is None:
        # The application-wide style sheet re-polishes every live widget, calling back into
        # Python for pyqtgraph's widgets; a garbage collection started by one of those calls
        # could delete an unreachable widget (a closed window still in a reference cycle) while
        # Qt iterates over it (a segfault seen once in the test suite, in "Garbage-collecting"
        # under setStyleSheet). Collect first, then keep the collector paused for the call.
        gc.collect()
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            app.setStyleSheet(sheet)
        finally:
            if was_enabled:
                gc.enable()
    elif root is not None:
        root.setStyleSheet(sheet)
    if root is not None:
        for plot in root.findChildren(pg.PlotWidget):
            style_plot(plot)
        for view in root.findChildren(pg.GraphicsLayoutWidget):
            view.setBackground(colors.background)


class _ActivationFilter(QObject):
    """Drops the window (de)activation events a scene forwards to its top-level item."""

    EVENTS = (QEvent.Type.WindowActivate, QEvent.Type.WindowDeactivate)

    def eventFilter(self, obj, event) -> bool:
        return event.type() in self.EVENTS


def no_repaint_on_activation(view: pg.GraphicsView) -> None:
    """Keep ``view``'s plot from repainting whole when it is shown or hidden (or the window
    gains or loses focus): a graphics view shown sends its scene a WindowActivate, which the
    scene forwards to its top-level item (the plot); a ``QGraphicsWidget`` answers it with
    ``update()``, and the scene's queued update then flushes the window's pending repaint, so
    a report shown painted its plots a second time in a pass of their own (issue 23 item 11:
    the Execution Trace's five plots, ~25 ms of a later visit's 55). Nothing a plot draws
    depends on the window being active; the scene itself still tracks activation (focus)."""
    central = getattr(view, "centralWidget", None)
    if central is None:  # pragma: no cover - every pyqtgraph GraphicsView has one
        return
    flt = view.findChild(_ActivationFilter, options=Qt.FindChildOption.FindDirectChildrenOnly)
    if flt is None:
        flt = _ActivationFilter(view)
    central.installEventFilter(flt)
