"""Light and dark themes: a Qt palette for Fusion (colours in ``assets/themes/*.json``) plus
matching chart colours.

A palette, not an application style sheet: under a style sheet every widget is drawn and laid
out by Qt's ``QStyleSheetStyle``, which re-resolves the rules for a widget and all its children
each time one is given a parent. A report's first visit built its widgets 2-5 times slower
under the sheet (a Memory Report's Insights tab: 18.6 ms with the sheet, 3.6 ms without) and its
tables painted slower. Only the side list of reports, whose items need
padding and hover colours a palette cannot give, keeps a small sheet of its own."""

from __future__ import annotations

import gc
import json
from dataclasses import dataclass, fields
from importlib import resources

import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QPalette
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
#: The themes' names (each has its widget colours in ``assets/themes/<name>.json``).
THEMES = tuple(CHART_COLORS)
#: Qt's own cross-platform style, drawn from the palette alone (the same on every platform)
STYLE = "Fusion"
#: objectName of the side list of reports (its sheet: :func:`side_list_sheet`)
SIDE_LIST = "reportList"

_current = "light"
#: (application, theme) whose palette the application has: a window's creation sets its theme
#: again, which then costs nothing
_applied: tuple[int, str] | None = None


@dataclass(frozen=True)
class UiColors:
    """A theme's widget colours (``assets/themes/<name>.json``): the palette's roles, and the
    side list's background and hovered item."""

    window: str
    text: str
    muted: str
    disabled: str
    base: str
    alternate_base: str
    button: str
    border: str
    highlight: str
    highlighted_text: str
    tooltip_base: str
    tooltip_text: str
    link: str
    side_list: str
    side_list_hover: str


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


def selection_hatch():
    """The brush of a selection over coloured marks: thin diagonal lines in the chart's
    foreground (the pattern is cosmetic: device pixels, whatever the view's scale), so the
    marks keep their own colour between the lines instead of being tinted into another's."""
    return QBrush(QColor(chart_colors().foreground), Qt.BrushStyle.BDiagPattern)


def ui_colors(name: str) -> UiColors:
    """Theme ``name``'s widget colours, read from ``assets/themes/<name>.json``."""
    if name not in THEMES:
        raise ValueError(f"unknown theme {name!r}; choose light or dark")
    text = resources.files("assets").joinpath("themes", f"{name}.json").read_text(encoding="utf-8")
    return parse_ui_colors(f"assets/themes/{name}.json", json.loads(text))


def parse_ui_colors(source: str, raw: object) -> UiColors:
    """The widget colours in ``raw`` (the JSON object read from ``source``): every field of
    :class:`UiColors`, each a colour Qt can parse; else a ValueError naming what is wrong."""
    if not isinstance(raw, dict):
        raise ValueError(f"{source}: expected an object of colours, found {type(raw).__name__}")
    names = [f.name for f in fields(UiColors)]
    missing = [n for n in names if n not in raw]
    bad = [n for n in names if n in raw and not QColor.isValidColorName(str(raw[n]))]
    problems = ([f"missing {', '.join(missing)}"] if missing else []) + (
        [f"not a colour: {', '.join(bad)}"] if bad else []
    )
    if problems:
        raise ValueError(f"{source}: " + "; ".join(problems))
    return UiColors(**{n: str(raw[n]) for n in names})


def palette(name: str) -> QPalette:
    """The Qt palette of theme ``name`` (for the Fusion style, which draws from it alone)."""
    c = ui_colors(name)
    col = QColor
    pal = QPalette(col(c.button), col(c.window))  # bevel shades worked out from the button's
    role = QPalette.ColorRole
    for r, value in (
        (role.Window, c.window),
        (role.WindowText, c.text),
        (role.Base, c.base),
        (role.AlternateBase, c.alternate_base),
        (role.Text, c.text),
        (role.Button, c.button),
        (role.ButtonText, c.text),
        (role.BrightText, "#ffffff"),
        (role.Highlight, c.highlight),
        (role.HighlightedText, c.highlighted_text),
        (role.ToolTipBase, c.tooltip_base),
        (role.ToolTipText, c.tooltip_text),
        (role.PlaceholderText, c.muted),
        (role.Link, c.link),
        (role.LinkVisited, c.link),
        # muted text: the empty states' labels use "palette(mid)"
        (role.Mid, c.muted),
    ):
        pal.setColor(r, col(value))
    disabled = QPalette.ColorGroup.Disabled
    for r in (role.WindowText, role.Text, role.ButtonText):
        pal.setColor(disabled, r, col(c.disabled))
    pal.setColor(disabled, role.Highlight, col(c.border))
    return pal


def side_list_sheet(name: str) -> str:
    """The side list of reports' own style sheet: roomy items, a hover colour and its border
    (a list view's item padding and hover background are not palette roles)."""
    c = ui_colors(name)
    return (
        f"QListWidget#{SIDE_LIST} {{ background: {c.side_list}; border: none;"
        f" border-right: 1px solid {c.border}; font-size: 13px; outline: 0; }}"
        f" QListWidget#{SIDE_LIST}::item {{ padding: 8px 12px; }}"
        f" QListWidget#{SIDE_LIST}::item:selected {{ background: {c.highlight};"
        f" color: {c.highlighted_text}; }}"
        f" QListWidget#{SIDE_LIST}::item:hover:!selected {{ background: {c.side_list_hover}; }}"
    )


def emphasised(widget: QWidget, pixel_size: int | None = None, top: int = 0) -> None:
    """Give ``widget`` a semi-bold font (of ``pixel_size`` px when given) and ``top`` px of
    room above it: the report title and section headings (fonts, not style sheet rules)."""
    font = widget.font()
    font.setWeight(QFont.Weight.DemiBold)
    if pixel_size is not None:
        font.setPixelSize(pixel_size)
    widget.setFont(font)
    if top:
        widget.setContentsMargins(0, top, 0, 0)


def style_plot(plot: pg.PlotWidget) -> None:
    """Apply the current chart colours to one pyqtgraph plot widget (every report's plots get
    them when built), and keep the plot from repainting whole when it is shown
    (:func:`no_repaint_on_activation`: a pass of its own per plot)."""
    no_repaint_on_activation(plot)
    colors = chart_colors()
    plot.setBackground(colors.background)
    item = plot.getPlotItem()
    # the axes built (a light plot builds its hidden top and right ones when first asked
    # for, styled as the bottom and left ones)
    for entry in list(item.axes.values()):
        axis = entry["item"]
        axis.setPen(pg.mkPen(colors.foreground))
        axis.setTextPen(pg.mkPen(colors.foreground))
        # an axis draws its grid lines: below the data, not across the bars
        axis.setZValue(-1)


def apply_theme(name: str, root: QWidget | None = None) -> None:
    """Switch to theme ``name``: Fusion and the theme's palette on the application (every
    window, dialog and menu), bold table headers, the side list's sheet and chart colours on
    ``root``'s plots."""
    global _current, _applied
    pal = palette(name)
    _current = name
    colors = CHART_COLORS[name]
    pg.setConfigOptions(background=colors.background, foreground=colors.foreground)
    # instance() is typed as the core application; styles, palettes and fonts are a GUI one's
    app = QApplication.instance()
    if isinstance(app, QApplication) and _applied != (id(app), name):
        _applied = (id(app), name)
        # A palette change reaches every live widget, calling back into Python for
        # pyqtgraph's; a garbage collection started by one of those calls could delete an
        # unreachable widget (a closed window still in a reference cycle) while Qt iterates
        # over it (a segfault seen once in the test suite under the former application style
        # sheet). Collect first, then keep the collector paused for the call.
        gc.collect()
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            if app.style().name().lower() != STYLE.lower():
                app.setStyle(STYLE)
            app.setPalette(pal)
            header = QFont(app.font())
            header.setWeight(QFont.Weight.DemiBold)
            # PySide6's stubs type the class name as bytes; PySide6 itself takes only a str
            app.setFont(header, "QHeaderView")  # type: ignore[arg-type]
        finally:
            if was_enabled:
                gc.enable()
    if root is not None:
        for side in root.findChildren(QWidget, SIDE_LIST):
            side.setStyleSheet(side_list_sheet(name))
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
    a report shown painted its plots a second time in a pass of their own (
    the Execution Trace's five plots, ~25 ms of a later visit's 55). Nothing a plot draws
    depends on the window being active; the scene itself still tracks activation (focus)."""
    central = getattr(view, "centralWidget", None)
    if central is None:  # pragma: no cover - every pyqtgraph GraphicsView has one
        return
    flt = view.findChild(_ActivationFilter, options=Qt.FindChildOption.FindDirectChildrenOnly)
    if flt is None:
        flt = _ActivationFilter(view)
    central.installEventFilter(flt)
