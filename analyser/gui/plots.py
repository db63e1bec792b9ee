"""Plots that cost less to build: pyqtgraph's PlotItem without its options form built up front.

``pyqtgraph.PlotItem.__init__`` builds the "Plot Options" context-menu form (about forty Qt
widgets: check boxes, spin boxes, sliders, group boxes, their menu and a WidgetGroup over them)
for every plot, even with the menu disabled. That was about a third of a plot's construction
(3-4 ms of 9-10 ms here) and a plot-heavy report builds three to five plots on its first visit
. Our plots never show that menu (``enableMenu=False`` everywhere), so
:class:`LightPlotItem` builds the form only when something reads it (``ctrl``, ``ctrlMenu``,
``stateGroup``): adding a curve item that has a log mode, ``saveState`` or the menu itself. Grid
lines are set on the axes directly (:meth:`LightPlotItem.showGrid`), as the form would.

The construction follows ``PlotItem.__init__`` of pyqtgraph 0.13 and 0.14 (pyqtgraph's
``graphicsItems/PlotItem/PlotItem.py``); ``tests/test_gui_plots.py`` checks that a
LightPlotItem has every attribute a PlotItem has, so an upgrade that adds one is caught."""

from __future__ import annotations

import weakref
from typing import Any

import pyqtgraph as pg
from pyqtgraph import functions as fn
from pyqtgraph.graphicsItems.ButtonItem import ButtonItem
from pyqtgraph.graphicsItems.LabelItem import LabelItem
from pyqtgraph.graphicsItems.PlotItem.PlotItem import ui_template
from pyqtgraph.icons import getGraphPixmap
from pyqtgraph.WidgetGroup import WidgetGroup
from PySide6.QtCore import QCoreApplication, QRectF, Qt
from PySide6.QtGui import QPainter, QPen
from PySide6.QtWidgets import (
    QGraphicsGridLayout,
    QGraphicsItem,
    QMenu,
    QSizePolicy,
    QWidget,
    QWidgetAction,
)

#: the attributes the options form provides, built on first use
_FORM_ATTRIBUTES = ("ctrl", "ctrlMenu", "stateGroup")
#: the sides built hidden on first use, and the side each is styled after
_HIDDEN_SIDES = {"top": "bottom", "right": "left"}
#: a solid pen's line style (looked up once: an enum attribute costs a lookup per tick)
_SOLID_LINE = Qt.PenStyle.SolidLine
#: each side's cell in the plot's grid layout (pyqtgraph's)
_AXIS_CELLS = {"top": (1, 1), "bottom": (3, 1), "left": (2, 0), "right": (2, 2)}
_defaults: list[Any] = []


def _default_form() -> Any:
    """One options form at pyqtgraph's defaults, never shown or connected: what a plot whose
    form was not built reads when a curve is added or removed (its choices can only be changed
    through its own form, so until that is built they are the defaults)."""
    if not _defaults:
        holder = QWidget()
        form = ui_template.Ui_Form()
        form.setupUi(holder)
        _defaults.append((holder, form))
    return _defaults[0][1]


def _line_as_rect(pen: QPen, p1: Any, p2: Any) -> QRectF | None:
    """The one-pixel rectangle filling what ``drawLine(p1, p2)`` draws with ``pen`` (aliased),
    for a solid pen a pixel wide and a line parallel to an axis; else None. Both ends are
    drawn, and the pixels a half-pixel-grown rectangle around the line fills are
    those Qt's aliased ``drawLine`` covers (checked against it at random fractional positions
    and offsets: all but about one line in forty, and those one pixel off)."""
    x1, y1, x2, y2 = p1.x(), p1.y(), p2.x(), p2.y()
    if x1 != x2 and y1 != y2:
        return None
    width = pen.widthF()
    if (
        width > 1.0
        or (width != 1.0 and not pen.isCosmetic())
        or pen.style() != _SOLID_LINE
        or not pen.isSolid()
    ):
        return None
    if y1 == y2:
        x1, x2 = min(x1, x2), max(x1, x2)
        return QRectF(x1 - 0.5, y1 - 0.5, x2 - x1 + 1.0, 1.0)
    y1, y2 = min(y1, y2), max(y1, y2)
    return QRectF(x1 - 0.5, y1 - 0.5, 1.0, y2 - y1 + 1.0)


class LightAxisItem(pg.AxisItem):
    """A ``pg.AxisItem`` that sets its label's HTML only when the label's text changes:
    pyqtgraph sets it again on every pen, style, label, range and SI-prefix change (about ten
    times per axis while a plot is built and styled, each an HTML parse and text layout of
    ~40 us; 5.4 ms of a Pipeline Report's construction went to it). While it is constructed
    (its range, label, pens and style set one by one) the label is brought up to date once,
    at the end, not after each (eight times per axis)."""

    _label_html: str | None = None
    #: True until ``__init__`` has run (a class default: set before the C++ object exists)
    _building: bool = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._building = False
        self._updateLabel()

    def drawPicture(self, p: QPainter, axisSpec: Any, tickSpecs: Any, textSpecs: Any) -> None:
        """As ``AxisItem.drawPicture``, except that the axis line and the tick and grid lines,
        all parallel to the axes and a pixel wide, are filled as one-pixel rectangles on the
        same pixels (the rows and columns ``drawLine`` covers): Qt's raster engine draws a
        translucent line about twenty times slower than it fills the same pixels, and a
        plot with a grid has 35-40 of them across its whole width (pyqtgraph's three tick
        levels), 2.4-2.8 ms per axis at every paint of the axis."""
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        p.setRenderHint(QPainter.RenderHint.TextAntialiasing, True)
        for pen, p1, p2 in (axisSpec, *tickSpecs):
            rect = _line_as_rect(pen, p1, p2)
            if rect is None:
                p.setPen(pen)
                p.drawLine(p1, p2)
            else:
                p.fillRect(rect, pen.color())
        if self.style["tickFont"] is not None:
            p.setFont(self.style["tickFont"])
        p.setPen(self.textPen())
        p.setClipRect(self.boundingRect().toAlignedRect())
        for rect, flags, text in textSpecs:
            p.drawText(rect, int(flags), text)

    def _updateLabel(self) -> None:
        if self._building:
            return
        html = self.labelString()
        if html != self._label_html:
            self._label_html = html
            self.label.setHtml(html)
        self._adjustSize()
        self.picture = None
        self.update()


class LightPlotItem(pg.PlotItem):
    """A ``pg.PlotItem`` whose context-menu options form is built on first use (see the
    module's docstring); everything else is as pyqtgraph builds it."""

    def __init__(
        self,
        parent: Any = None,
        name: str | None = None,
        labels: dict[str, Any] | None = None,
        title: str | None = None,
        viewBox: pg.ViewBox | None = None,
        axisItems: dict[str, pg.AxisItem] | None = None,
        enableMenu: bool = True,
    ) -> None:
        pg.GraphicsWidget.__init__(self, parent)
        #: (x shown, y shown, alpha 0-255) of the grid, kept for the form if it is built
        self._grid = (False, False, 128)
        self._closed = False
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.autoBtn = ButtonItem(getGraphPixmap("auto"), 14, self)
        self.autoBtn.mode = "auto"
        self.autoBtn.clicked.connect(self.autoBtnClicked)
        self.buttonsHidden = False
        self.mouseHovering = False
        self.layout = QGraphicsGridLayout()
        self.layout.setContentsMargins(1, 1, 1, 1)
        self.setLayout(self.layout)
        self.layout.setHorizontalSpacing(0)
        self.layout.setVerticalSpacing(0)
        if viewBox is None:
            viewBox = pg.ViewBox(parent=self, enableMenu=enableMenu)
        self.vb = viewBox
        self.vb.sigStateChanged.connect(self.viewStateChanged)
        self.setMenuEnabled(enableMenu, None)
        if name is not None:
            self.vb.register(name)
        self.vb.sigRangeChanged.connect(self.sigRangeChanged)
        self.vb.sigXRangeChanged.connect(self.sigXRangeChanged)
        self.vb.sigYRangeChanged.connect(self.sigYRangeChanged)
        self.vb.sigRangeChangedManually.connect(self.sigRangeChangedManually)
        self.layout.addItem(self.vb, 2, 1)
        self.alpha = 1.0
        self.autoAlpha = True
        self.spectrumMode = False
        self.legend = None
        # side -> {"item": its AxisItem, "pos": its layout cell}, as pyqtgraph keeps them
        self.axes: dict[str, dict[str, Any]] = {}
        self.setAxisItems(axisItems)
        self.titleLabel = LabelItem("", size="11pt", parent=self)
        self.layout.addItem(self.titleLabel, 0, 1)
        self.setTitle(None)
        for i in range(4):
            self.layout.setRowPreferredHeight(i, 0)
            self.layout.setRowMinimumHeight(i, 0)
            self.layout.setRowSpacing(i, 0)
            self.layout.setRowStretchFactor(i, 1)
        for i in range(3):
            self.layout.setColumnPreferredWidth(i, 0)
            self.layout.setColumnMinimumWidth(i, 0)
            self.layout.setColumnSpacing(i, 0)
            self.layout.setColumnStretchFactor(i, 1)
        self.layout.setRowStretchFactor(2, 100)
        self.layout.setColumnStretchFactor(1, 100)
        # pyqtgraph's own bookkeeping (PlotItem.addItem, PlotItem.addAvgCurve): every item
        # added, the data items among them and their params, the averaging options by name and
        # the averaged curves as [count, PlotDataItem] by their parameters
        self.items: list[QGraphicsItem] = []
        self.curves: list[pg.PlotDataItem] = []
        self.itemMeta: weakref.WeakKeyDictionary[pg.PlotDataItem, dict[str, Any]] = (
            weakref.WeakKeyDictionary()
        )
        self.dataItems: list[pg.PlotDataItem] = []
        self.paramList: dict[str, bool] = {}
        self.avgCurves: dict[tuple[tuple[str, Any], ...], list[Any]] = {}
        self.avgPen = fn.mkPen((0, 200, 0))
        self.avgShadowPen = fn.mkPen((0, 0, 0), width=4)
        self.fileDialog = None
        for k, v in (labels or {}).items():
            self.setLabel(k, *((v,) if isinstance(v, str) else v))
        if title is not None:
            self.setTitle(title)

    def setAxisItems(self, axisItems: dict[str, pg.AxisItem] | None = None) -> None:
        """As ``PlotItem.setAxisItems``: the axes given are shown; the bottom and left ones not
        given and not there yet are a :class:`LightAxisItem` (pyqtgraph would build a plain
        AxisItem), and the top and right ones not given are built hidden when something
        first asks for them (:meth:`getAxis`): pyqtgraph builds all four, and an axis was
        0.8 ms of a plot's 6 to build, the two hidden ones also taking part in every layout
        pass of the plot."""
        given = dict(axisItems or {})
        built = [s for s in ("bottom", "left") if s not in given and s not in self.axes]
        for side in built:
            given[side] = LightAxisItem(side, parent=self)
        for side in ("top", "bottom", "left", "right"):  # pyqtgraph's order
            if side in given:
                self._place_axis(side, given[side], shown=True, ours=side in built)

    def _place_axis(self, side: str, axis: pg.AxisItem, shown: bool, ours: bool) -> None:
        """Put ``axis`` on ``side`` in place of the one there, as ``PlotItem.setAxisItems``
        (``ours``: built here, so not another plot's)."""
        old = self.axes.get(side)
        if old is not None:
            old = old["item"]
            self.layout.removeItem(old)
            if old.scene() is not None:
                old.scene().removeItem(old)
            old.unlinkFromView()
        if not ours and axis.scene() is not None and axis is not old:
            raise RuntimeError(
                "Can't add an axis to multiple plots. Shared axes can be achieved with "
                "multiple AxisItem instances and set[X/Y]Link."
            )
        axis.linkToView(self.vb)
        self.axes[side] = {"item": axis, "pos": _AXIS_CELLS[side]}
        self.layout.addItem(axis, *_AXIS_CELLS[side])
        # above images at z=0 (items that draw over the axes use z >= 1), as pyqtgraph
        axis.setZValue(0.5)
        axis.setFlag(QGraphicsItem.GraphicsItemFlag.ItemNegativeZStacksBehindParent)
        self.showAxis(side, shown)

    def getAxis(self, name: str) -> pg.AxisItem:
        """As ``PlotItem.getAxis``; a top or right axis not built yet is built now, hidden,
        styled as the bottom or left one (pens, SI prefix, depth, grid, log mode)."""
        if name in _HIDDEN_SIDES and self.axes is not None and name not in self.axes:
            partner = self.axes[_HIDDEN_SIDES[name]]["item"]
            axis = LightAxisItem(name, parent=self)
            axis.setPen(partner.pen())
            axis.setTextPen(partner.textPen())
            if not partner.autoSIPrefix:
                axis.enableAutoSIPrefix(False)
            axis.logMode = partner.logMode
            self._place_axis(name, axis, shown=False, ours=True)
            axis.setZValue(partner.zValue())
            x_on, y_on, alpha = self._grid
            if not self.form_built():
                axis.setGrid(alpha if (x_on if name == "top" else y_on) else False)
            else:
                axis.setGrid(partner.grid)
        return super().getAxis(name)

    def _checkScaleKey(self, key: str) -> None:
        if key not in _HIDDEN_SIDES:  # built on first use
            super()._checkScaleKey(key)

    # ------------------------------------------------------------------ the form, on first use
    def __getattr__(self, attr: str) -> Any:
        # only reached for attributes not set yet: the form's, built now
        if attr in _FORM_ATTRIBUTES and not self.__dict__.get("_closed", True):
            self._build_form()
            return self.__dict__[attr]
        raise AttributeError(attr)

    def _build_form(self) -> None:
        """Build the options form and its menu, as ``PlotItem.__init__`` does, and bring it to
        the grid state set meanwhile."""
        w = QWidget()
        c = ui_template.Ui_Form()
        c.setupUi(w)
        tr = QCoreApplication.translate
        menu_items = [
            (tr("PlotItem", "Transforms"), c.transformGroup),
            (tr("PlotItem", "Downsample"), c.decimateGroup),
            (tr("PlotItem", "Average"), c.averageGroup),
            (tr("PlotItem", "Alpha"), c.alphaGroup),
            (tr("PlotItem", "Grid"), c.gridGroup),
            (tr("PlotItem", "Points"), c.pointsGroup),
        ]
        menu = QMenu(tr("PlotItem", "Plot Options"))
        for label, group in menu_items:
            sub = menu.addMenu(label)
            act = QWidgetAction(self)
            act.setDefaultWidget(group)
            sub.addAction(act)
        state = WidgetGroup()
        for _label, group in menu_items:
            state.autoAdd(group)
        self.__dict__.update(ctrl=c, ctrlMenu=menu, stateGroup=state)
        self._form_widget = w
        x, y, alpha = self._grid
        c.xGridCheck.setChecked(x)
        c.yGridCheck.setChecked(y)
        c.gridAlphaSlider.setValue(alpha)
        for sig, slot in (
            (c.alphaGroup.toggled, self.updateAlpha),
            (c.alphaSlider.valueChanged, self.updateAlpha),
            (c.autoAlphaCheck.toggled, self.updateAlpha),
            (c.xGridCheck.toggled, self.updateGrid),
            (c.yGridCheck.toggled, self.updateGrid),
            (c.gridAlphaSlider.valueChanged, self.updateGrid),
            (c.fftCheck.toggled, self.updateSpectrumMode),
            (c.subtractMeanCheck.toggled, self.updateSubtractMeanMode),
            (c.logXCheck.toggled, self.updateLogMode),
            (c.logYCheck.toggled, self.updateLogMode),
            (c.derivativeCheck.toggled, self.updateDerivativeMode),
            (c.phasemapCheck.toggled, self.updatePhasemapMode),
            (c.downsampleSpin.valueChanged, self.updateDownsampling),
            (c.downsampleCheck.toggled, self.updateDownsampling),
            (c.autoDownsampleCheck.toggled, self.updateDownsampling),
            (c.subsampleRadio.toggled, self.updateDownsampling),
            (c.meanRadio.toggled, self.updateDownsampling),
            (c.clipToViewCheck.toggled, self.updateDownsampling),
            (c.avgParamList.itemClicked, self.avgParamListClicked),
            (c.averageGroup.toggled, self.avgToggled),
            (c.maxTracesCheck.toggled, self._handle_max_traces_toggle),
            (c.forgetTracesCheck.toggled, self.updateDecimation),
            (c.maxTracesSpin.valueChanged, self.updateDecimation),
        ):
            sig.connect(slot)

    def addItem(self, item: Any, *args: Any, **kwargs: Any) -> None:
        """As ``PlotItem.addItem``; a curve reads the default choices (:func:`_default_form`)
        when this plot's form was not built."""
        self._with_defaults(super().addItem, item, *args, **kwargs)

    def removeItem(self, item: Any) -> None:
        """As ``PlotItem.removeItem`` (a curve removed reads the choices too)."""
        self._with_defaults(super().removeItem, item)

    def _with_defaults(self, method: Any, *args: Any, **kwargs: Any) -> None:
        if self.form_built() or not hasattr(args[0], "setLogMode"):
            method(*args, **kwargs)
            return
        self.__dict__["ctrl"] = _default_form()
        try:
            method(*args, **kwargs)
        finally:
            del self.__dict__["ctrl"]
        # what the shared form's parameter list was given is this plot's, not the next one's
        _default_form().avgParamList.clear()

    def form_built(self) -> bool:
        """True once the options form exists (something read it)."""
        return "_form_widget" in self.__dict__

    # ------------------------------------------------------------------ without the form
    def showGrid(self, x: bool | None = None, y: bool | None = None, alpha: float | None = None):
        """As ``PlotItem.showGrid``, on the axes directly (the form, when built, follows)."""
        if x is None and y is None and alpha is None:
            raise ValueError("Must specify at least one of x, y, or alpha.")
        gx, gy, ga = self._grid
        if alpha is not None:
            ga = int(fn.clip_scalar(alpha, 0, 1) * 255)
        self._grid = (gx if x is None else bool(x), gy if y is None else bool(y), ga)
        if self.form_built():
            c = self.ctrl
            c.xGridCheck.setChecked(self._grid[0])
            c.yGridCheck.setChecked(self._grid[1])
            c.gridAlphaSlider.setValue(ga)
        else:
            self.updateGrid()

    def updateGrid(self, *args: Any) -> None:
        if self.form_built():
            super().updateGrid(*args)
            return
        x_on, y_on, alpha = self._grid
        x = alpha if x_on else False
        y = alpha if y_on else False
        for side, entry in self.axes.items():  # those built (the others take it when built)
            entry["item"].setGrid(x if side in ("top", "bottom") else y)

    def close(self) -> None:
        if self._closed:
            return
        if not self.form_built():
            self.__dict__["ctrlMenu"] = QMenu()  # what PlotItem.close takes apart
        super().close()
        self._closed = True


class LightPlotWidget(pg.PlotWidget):
    """A ``pg.PlotWidget`` over a :class:`LightPlotItem` (the same arguments)."""

    def __init__(self, parent: QWidget | None = None, background: Any = "default", **kwargs):
        item = kwargs.pop("plotItem", None)
        if item is None:
            item = LightPlotItem(**kwargs)
        super().__init__(parent, background=background, plotItem=item)

    def keyPressEvent(self, event) -> None:
        if chart_key(self, event):
            event.accept()
            return
        super().keyPressEvent(event)


#: Zoom factor of one W / S press on a chart, and the share of the view one A / D press pans.
CHART_KEY_ZOOM = 1.25
CHART_KEY_PAN = 0.1


def chart_key(plot: pg.PlotWidget, event: Any) -> bool:
    """The Execution Trace's keys on any chart with the keyboard focus (click it, or Tab to it):
    W / + and S / - zoom about the middle, A / D and the arrows pan, Home / 0 shows everything,
    along the axes the mouse may zoom. True when ``event`` was one of them."""
    K = Qt.Key
    key = event.key()
    if event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier:
        return False
    vb = plot.getPlotItem().getViewBox()
    axes = [i for i, on in enumerate(vb.state["mouseEnabled"]) if on]
    if not axes:
        return False
    if key in (K.Key_Home, K.Key_0):
        vb.autoRange()
        return True
    zoom = {
        K.Key_W: 1 / CHART_KEY_ZOOM,
        K.Key_Plus: 1 / CHART_KEY_ZOOM,
        K.Key_Equal: 1 / CHART_KEY_ZOOM,
    }
    zoom.update({K.Key_S: CHART_KEY_ZOOM, K.Key_Minus: CHART_KEY_ZOOM})
    pan = {K.Key_A: -1, K.Key_Left: -1, K.Key_D: 1, K.Key_Right: 1}
    if key in zoom:
        f = zoom[key]
        vb.scaleBy(x=f if 0 in axes else 1.0, y=f if 0 not in axes else 1.0)
        return True
    if key in pan and 0 in axes:
        (x0, x1), _y = vb.viewRange()
        vb.translateBy(x=pan[key] * CHART_KEY_PAN * (x1 - x0))
        return True
    return False
